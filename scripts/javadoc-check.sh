#!/usr/bin/env bash
# Javadoc of the exported packages (`mvn javadoc:javadoc`, every warning listed): fails on any
# warning or error in any package, listing them. Prints the count.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/bin/lib/jdk.sh"
export JAVA_HOME="$JDK"
cd "$here"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -rf ./*/target/reports/apidocs # the plugin skips a run whose output looks up to date
# compile first: the modules then find each other in the reactor, with nothing installed in ~/.m2
if ! mvn -B -ntp -DskipTests compile javadoc:javadoc >"$log" 2>&1; then
  cat "$log" >&2
  echo "javadoc-check: javadoc failed" >&2
  exit 1
fi
found=$(grep -E ': (warning|error):' "$log" || true)
n=$(printf '%s' "$found" | grep -c . || true)
echo "javadoc-check: $n warnings"
if [ "$n" -gt 0 ]; then
  printf '%s\n' "$found" >&2
  exit 1
fi
