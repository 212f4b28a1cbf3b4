#!/usr/bin/env bash
# TtftBench (layer-wise TTFT, issue 13) with P-D traffic over a rate-limited link: for each rate, a private
# network namespace whose loopback is brought up and shaped by tbf (both directions of every 127.0.0.1
# connection cross it), the bench run inside it (ip netns exec), the namespace removed on exit. This emulates
# the link between separate P and D hosts; the CPU is still this machine's, shared by P and D.
#   sudo scripts/ttft-link.sh [TtftBench args...]     e.g.  sudo scripts/ttft-link.sh 3 tcp 1024,8192,32768 balanced
# Environment: RATE (tbf rates, space separated, default "10gbit"; e.g. RATE="10gbit 25gbit"),
#   TTFT_JAVA_OPTS (extra JVM options, e.g. "-Dttft.dNice=19"), TTFT_BUILD=0 to skip the test-compile.
# Each run's header says "link: tbf <rate> on lo in netns ..." (-Dttft.link), and each row its transfer's GB/s.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
if [ "$(id -u)" != 0 ]; then
  echo "ttft-link: needs root (it creates a network namespace and a tc qdisc); run it as root or with sudo" >&2
  exit 2
fi
for c in ip tc; do
  command -v "$c" >/dev/null || { echo "ttft-link: needs '$c' (iproute2) on PATH" >&2; exit 2; }
done
. bin/lib/jdk.sh

rates=${RATE:-10gbit}
if [ "${TTFT_BUILD:-1}" != 0 ]; then
  # TtftBench is a test class of the node module; the reactor's last module (the node) writes the file last
  mvn -B -ntp -o -q -pl mooncake4j-node -am test-compile dependency:build-classpath \
      -Dmdep.outputFile="$PWD/mooncake4j-node/target/test.classpath" -Dmdep.includeScope=test
fi
cp="mooncake4j-node/target/test-classes:mooncake4j-node/target/classes:$(cat mooncake4j-node/target/test.classpath)"

ns=""
cleanup() {
  if [ -n "$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for rate in $rates; do
  ns="ttft$$-$rate"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # burst: 4 MB holds a few ms of 10-25 Gbit/s (tbf needs burst >= rate / HZ); latency bounds the queue
  tc -n "$ns" qdisc add dev lo root tbf rate "$rate" burst 4mb latency 20ms
  echo "ttft-link: netns $ns, lo: $(tc -n "$ns" qdisc show dev lo | head -n1); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  # shellcheck disable=SC2086
  ip netns exec "$ns" "$JAVA_HOME/bin/java" -Xmx6g --enable-native-access=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED ${TTFT_JAVA_OPTS:-} \
      "-Dttft.link=tbf $rate on lo in a private netns (emulated P-D link; P and D still share this host's CPU)" \
      -cp "$cp" io.mooncake4j.sim.TtftBench "$@"
  tc -n "$ns" -s qdisc show dev lo | sed 's/^/ttft-link: /'
  ip netns del "$ns"
  ns=""
done
