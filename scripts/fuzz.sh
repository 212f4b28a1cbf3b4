#!/usr/bin/env bash
# Fuzzes every port of real mooncake4j nodes on 127.0.0.1 and prints one summary line.
#   scripts/fuzz.sh [--cases N] [--seed S] [--target NAME] [--max-rss-growth-mib M]
# N cases per port (default 10000), seed S (default 1); NAME is a port (side-channel, bootstrap-http,
# handshake, data-port) or a target class name. Exit status 0 when no case and no resource check failed.
# Builds the classes first when they are missing or older than the sources. See docs/reliability.md.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/bin/lib/jdk.sh"

lib="$here/mooncake4j/target"; node="$here/mooncake4j-node/target"
main_class="$lib/test-classes/io/mooncake4j/fuzz/FuzzMain.class"
if [ ! -f "$main_class" ] || [ ! -d "$node/modules" ] || [ ! -d "$node/lib" ] || [ ! -d "$node/cli-lib" ] \
    || [ -n "$(find "$here"/*/src "$here"/pom.xml "$here"/*/pom.xml -newer "$main_class" -print -quit 2>/dev/null)" ]; then
  if ! command -v mvn >/dev/null 2>&1; then
    echo "fuzz.sh: the classes are missing or stale and Maven (mvn) is not installed: apt-get install maven" >&2
    exit 2
  fi
  echo "fuzz.sh: building (first run or sources changed)..." >&2
  log=$(mktemp)
  if ! (cd "$here" && mvn -q -B -ntp -DskipTests package) >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"
    echo "fuzz.sh: the build failed (output above)" >&2
    exit 1
  fi
  rm -f "$log"
fi

# A fixed, pre-touched heap: RSS growth then measures native memory (threads, buffers), not heap sizing.
# Expected rejections are logged at WARN by the nodes; only ERROR (a real fault) is shown by default.
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Xms512m -Xmx512m -XX:+AlwaysPreTouch \
  -Dorg.slf4j.simpleLogger.defaultLogLevel="${MOONCAKE4J_LOG_LEVEL:-error}" \
  ${MOONCAKE4J_JAVA_OPTS:-} \
  -cp "$lib/classes:$lib/test-classes:$node/modules/*:$node/lib/*:$node/cli-lib/*" \
  io.mooncake4j.fuzz.FuzzMain "$@"
