#!/usr/bin/env bash
# ModelBench (a Jlama model: prefill, TTFT and decode on one node vs a P/D pair, whole-request and layer-wise
# push) with the P-D traffic over a rate-limited link: for each rate, a private network namespace whose
# loopback is brought up and shaped by tbf (both directions of every 127.0.0.1 connection cross it), the bench
# run inside it (ip netns exec), the namespace removed on exit. It emulates the link between separate P and D
# hosts; the CPU is still this machine's, shared by P and D (they run one after the other in the bench).
#   sudo scripts/model-link.sh MODEL_DIR [PROMPT_TOKENS] [DECODE_TOKENS] [ROUNDS] [DTYPE]
#   e.g. bin/mooncake4j make-model --tiny /tmp/m8 --layers 8 --hidden 1024 --heads 16 --kv-heads 8 \
#          --intermediate 2816 --context 2048 && sudo scripts/model-link.sh /tmp/m8 1024 32 4
# Environment: RATE (tbf rates, space separated, default "10gbit"; "none" runs on plain loopback, no root
#   needed), MODEL_JAVA_OPTS (extra JVM options), MODEL_BUILD=0 to skip the test-compile.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
rates=${RATE:-10gbit}
if [ "$rates" != none ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "model-link: needs root (it creates a network namespace and a tc qdisc); run it as root or with sudo," \
         "or with RATE=none on plain loopback" >&2
    exit 2
  fi
  for c in ip tc; do
    command -v "$c" >/dev/null || { echo "model-link: needs '$c' (iproute2) on PATH" >&2; exit 2; }
  done
fi
. bin/lib/jdk.sh

if [ "${MODEL_BUILD:-1}" != 0 ]; then
  # ModelBench is a test class of the node module; the reactor's last module (the node) writes the file last
  mvn -B -ntp -o -q -pl mooncake4j-node -am test-compile dependency:build-classpath \
      -Dmdep.outputFile="$PWD/mooncake4j-node/target/test.classpath" -Dmdep.includeScope=test
fi
cp="mooncake4j-node/target/test-classes:mooncake4j-node/target/classes:$(cat mooncake4j-node/target/test.classpath)"
jvm=("$JAVA_HOME/bin/java" -Xmx4g --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED
     --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)

if [ "$rates" = none ]; then
  # shellcheck disable=SC2086
  exec "${jvm[@]}" ${MODEL_JAVA_OPTS:-} -cp "$cp" io.mooncake4j.model.ModelBench "$@"
fi

ns=""
cleanup() {
  if [ -n "$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for rate in $rates; do
  ns="model$$-$rate"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # burst: 4 MB holds a few ms of 10-25 Gbit/s (tbf needs burst >= rate / HZ); latency bounds the queue
  tc -n "$ns" qdisc add dev lo root tbf rate "$rate" burst 4mb latency 20ms
  echo "model-link: netns $ns, lo: $(tc -n "$ns" qdisc show dev lo | head -n1); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  # shellcheck disable=SC2086
  ip netns exec "$ns" "${jvm[@]}" ${MODEL_JAVA_OPTS:-} \
      "-Dmodel.link=tbf $rate on lo in a private netns (emulated P-D link; P and D still share this host's CPU)" \
      -cp "$cp" io.mooncake4j.model.ModelBench "$@"
  tc -n "$ns" -s qdisc show dev lo | sed 's/^/model-link: /'
  ip netns del "$ns"
  ns=""
done
