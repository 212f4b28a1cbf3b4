#!/usr/bin/env bash
# P and D as separate hosts: every node in its own network namespace, joined by veth pairs to a bridge in a
# "switch" namespace (10.231.0.0/24, addresses only inside namespaces this script creates), links rate
# limited by tbf. Starts 2 P nodes (one at TP 2), 2 D nodes, a kv_both reference node and the proxy,
# sends a mixed workload (completions and chat, streamed and not, several prompt lengths, shared prefixes),
# checks every completion against the reference, kills one P mid-run, and checks that the affected
# requests fail cleanly, the rest succeed and the surviving nodes free all their blocks.
#   sudo scripts/multihost.sh              (root: it creates namespaces; CI runs it from .ci/run)
# Environment: MULTIHOST_REQUESTS (300), MULTIHOST_RATE (10gbit), MULTIHOST_TIMEOUT (seconds, 600).
# Last line: "multihost: N ok, M failed-as-expected, 0 wrong"; exit status non-zero on anything wrong.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
if [ "$(id -u)" != 0 ]; then
  echo "multihost: needs root (network namespaces); run it as root or with sudo" >&2
  exit 2
fi
command -v ip >/dev/null && command -v tc >/dev/null || { echo "multihost: needs iproute2 (ip, tc)" >&2; exit 2; }
. bin/lib/jdk.sh

requests=${MULTIHOST_REQUESTS:-300}
rate=${MULTIHOST_RATE:-10gbit}
budget=${MULTIHOST_TIMEOUT:-600}
start_s=$SECONDS

# Build the jar once (bin/mooncake4j would do it too, but in every namespace at once).
node_jar=mooncake4j-node/target/mooncake4j-node.jar
if [ ! -f $node_jar ] || [ -n "$(find ./*/src/main ./pom.xml ./*/pom.xml -newer $node_jar -print -quit)" ]; then
  echo "multihost: building the jar..." >&2
  TMPDIR_BUILD_LOG=$(mktemp)
  if ! mvn -q -B -ntp -DskipTests package >"$TMPDIR_BUILD_LOG" 2>&1; then
    cat "$TMPDIR_BUILD_LOG" >&2; rm -f "$TMPDIR_BUILD_LOG"
    echo "multihost: the build failed (output above)" >&2
    exit 1
  fi
  rm -f "$TMPDIR_BUILD_LOG"
fi
cp="$here/$node_jar:$here/mooncake4j-node/target/modules/*:$here/mooncake4j-node/target/lib/*:$here/mooncake4j-node/target/cli-lib/*"
java=("$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED -XX:+UseSerialGC -Xmx384m -XX:TieredStopAtLevel=1
      -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.showDateTime=true
      -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -Dorg.slf4j.simpleLogger.showShortLogName=true)

tag="mc$$"                       # unique per run: namespaces mc<pid>-<host>, links inside them only
logs=$(mktemp -d "${TMPDIR:-/tmp}/multihost.$$.XXXX")
namespaces=()
pids=()

cleanup() {
  local rc=$?
  set +e
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ "$rc" != 0 ]; then
    echo "multihost: failed (exit $rc); node logs:" >&2
    for f in "$logs"/*.log; do echo "---- $(basename "$f")" >&2; tail -n 25 "$f" >&2; done
  fi
  rm -rf "$logs"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sw="$tag-sw"
ip netns add "$sw"; namespaces+=("$sw")
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
ip -n "$sw" link set lo up

# host NAME LAST_OCTET: a namespace with eth0 = 10.231.0.LAST_OCTET, cabled to the bridge, egress limited
host() {
  local ns="$tag-$1" addr="10.231.0.$2"
  ip netns add "$ns"; namespaces+=("$ns")
  ip -n "$sw" link add "p-$1" type veth peer name eth0 netns "$ns"
  ip -n "$sw" link set "p-$1" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 4mb latency 50ms
  ip netns exec "$sw" tc qdisc add dev "p-$1" root tbf rate "$rate" burst 4mb latency 50ms
}
host p1 11; host p2 12; host d1 21; host d2 22; host ref 31; host proxy 2; host client 3

kv_config() {  # ROLE
  printf '{"kv_connector":"MooncakeConnector","kv_role":"%s","kv_connector_extra_config":{"mooncake_protocol":"tcp"}}' "$1"
}
# serve NAME ADDR ROLE TP: a serving node in namespace NAME (HTTP 8100, bootstrap 8998)
serve() {
  local name=$1 addr=$2 role=$3 tp=$4
  ip netns exec "$tag-$name" env VLLM_HOST_IP="$addr" VLLM_MOONCAKE_BOOTSTRAP_PORT=8998 \
      VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=10 \
      "${java[@]}" -cp "$cp" io.mooncake4j.cli.Main serve --model tiny --host "$addr" --port 8100 \
      --tensor-parallel-size "$tp" --kv-cache-memory 64M --drain-timeout 5 --kv-transfer-config "$(kv_config "$role")" \
      >"$logs/$name.log" 2>&1 &
  pids+=($!)
  eval "pid_$name=$!"
  disown $!  # no job-control notice when a node is killed: the summary stays the last line
}
serve p1 10.231.0.11 kv_producer 2
serve p2 10.231.0.12 kv_producer 1
serve d1 10.231.0.21 kv_consumer 1
serve d2 10.231.0.22 kv_consumer 1
serve ref 10.231.0.31 kv_both 1
ip netns exec "$tag-proxy" "${java[@]}" -cp "$cp" io.mooncake4j.cli.Main proxy --host 10.231.0.2 --port 8000 \
    --prefill http://10.231.0.11:8100 8998 --prefill http://10.231.0.12:8100 8998 \
    --decode http://10.231.0.21:8100 --decode http://10.231.0.22:8100 >"$logs/proxy.log" 2>&1 &
pids+=($!)
disown $!

# Wait (bounded) until every node and the proxy answer GET /health with 200, probing from the client host.
http_status() {  # ADDR PORT PATH -> status code, or 000
  ip netns exec "$tag-client" timeout 5 bash -c '
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$3" "$1" >&3
    read -r _ code _ <&3; echo "$code"' _ "$1" "$2" "$3" 2>/dev/null || echo 000
}
for target in 10.231.0.11:8100 10.231.0.12:8100 10.231.0.21:8100 10.231.0.22:8100 10.231.0.31:8100 10.231.0.2:8000; do
  until [ "$(http_status "${target%:*}" "${target#*:}" /health)" = 200 ]; do
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null || { echo "multihost: a node exited during start-up (pid $pid)" >&2; exit 1; }
    done
    if [ $((SECONDS - start_s)) -gt $((budget / 3)) ]; then
      echo "multihost: $target not healthy after $((SECONDS - start_s)) s" >&2; exit 1
    fi
    sleep 0.5
  done
done
echo "multihost: 7 hosts up ($((SECONDS - start_s)) s): P 10.231.0.11 (TP 2), P 10.231.0.12, D 10.231.0.21, D 10.231.0.22," \
     "kv_both reference 10.231.0.31, proxy 10.231.0.2:8000, client 10.231.0.3; links tbf $rate"

# The workload; after half of it, P 10.231.0.12 is killed (SIGKILL: no drain, connections reset).
remaining=$((budget - (SECONDS - start_s)))
set +e
ip netns exec "$tag-client" timeout "$remaining" "${java[@]}" -cp "$cp" io.mooncake4j.proxy.WorkloadClient \
    --proxy http://10.231.0.2:8000 --reference http://10.231.0.31:8100 --model tiny \
    --requests "$requests" --concurrency 12 --prompt-lengths 48,300,1000,2500 --prefix-groups 4 --shared-prefix 256 \
    --max-tokens 4,12 --stream-every 2 --chat-every 5 --seed "$$" \
    --kill-at $((requests / 2)) --kill-cmd "kill -KILL $pid_p2" --killed-name "http://10.231.0.12:8100" \
    --drained http://10.231.0.11:8100,http://10.231.0.21:8100,http://10.231.0.22:8100 --drain-timeout 120 \
    --timeout $((remaining - 150 > 60 ? remaining - 150 : 60)) --kv-bytes-per-token 4096 --label multihost \
    | tee "$logs/client.out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" != 0 ]; then
  exit "$rc"
fi
last=$(tail -n 1 "$logs/client.out")
case "$last" in
  "multihost: "*", 0 wrong") ;;
  *) echo "multihost: unexpected summary '$last'" >&2; exit 1 ;;
esac
