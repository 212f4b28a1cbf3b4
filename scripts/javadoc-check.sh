#!/usr/bin/env bash
# Javadoc of the exported packages (`mvn javadoc:javadoc`, every warning listed): fails on any
# warning or error outside the package io.mooncake4j.engine itself (whose javadoc is the engine
# core's work; its sub-package engine.testing is checked). Prints the count of each.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/bin/lib/jdk.sh"
export JAVA_HOME="$JDK"
cd "$here"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -rf target/reports/apidocs # the plugin skips a run whose output looks up to date
if ! mvn -B -ntp javadoc:javadoc >"$log" 2>&1; then
  cat "$log" >&2
  echo "javadoc-check: javadoc failed" >&2
  exit 1
fi
all=$(grep -c -E ': (warning|error):' "$log" || true)
outside=$(grep -E ': (warning|error):' "$log" | grep -v -E 'src/main/java/io/mooncake4j/engine/[^/]+\.java:' || true)
n=$(printf '%s' "$outside" | grep -c . || true)
echo "javadoc-check: $all warnings in all, $n outside io.mooncake4j.engine"
if [ "$n" -gt 0 ]; then
  printf '%s\n' "$outside" >&2
  exit 1
fi
