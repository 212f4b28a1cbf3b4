#!/usr/bin/env bash
# Prefill and decode tokens/s of one kv_both Jlama node, Jlama's Vector API kernels ("before": what ran
# while jlama-native was not on the class path) against whatever Jlama picks with jlama-native on it
# ("after": its native kernels when they load), in alternating JVMs so that both see the same moments of the
# shared machine; `uptime` before each run. Not a test (SpeedBench, a test class of the node module).
#   scripts/model-speed.sh MODEL_DIR [PROMPT_TOKENS=256] [DECODE_TOKENS=32] [ROUNDS=3] [DTYPE=F32]
#   e.g. bin/mooncake4j make-model --tiny /tmp/m8 --layers 8 --hidden 1024 --heads 16 --kv-heads 8 \
#          --intermediate 2816 --context 2048 && scripts/model-speed.sh /tmp/m8 256 32 3
# Environment: PAIRS (before/after JVM pairs, default 2), MODEL_JAVA_OPTS (extra JVM options, both sides),
#   MODEL_BUILD=0 to skip the test-compile.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
[ $# -ge 1 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
. bin/lib/jdk.sh
if [ "${MODEL_BUILD:-1}" != 0 ]; then
  mvn -B -ntp -o -q -pl mooncake4j-node -am test-compile dependency:build-classpath \
      -Dmdep.outputFile="$PWD/mooncake4j-node/target/test.classpath" -Dmdep.includeScope=test
fi
cp="mooncake4j-node/target/test-classes:mooncake4j-node/target/classes:$(cat mooncake4j-node/target/test.classpath)"
case "$cp" in
  *jlama-native*) ;;
  *) echo "model-speed: jlama-native is not on the test class path" >&2; exit 1 ;;
esac
jvm=("$JAVA_HOME/bin/java" -Xmx4g --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED
     --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Dorg.slf4j.simpleLogger.defaultLogLevel=warn)
out=$(mktemp)
run=$(mktemp)
trap 'rm -f "$out" "$run"' EXIT
for i in $(seq 1 "${PAIRS:-2}"); do
  for side in before after; do
    opts=()
    [ "$side" = before ] && opts=(-Djlama.force_panama_tensor_operations=true)
    echo "== pair $i, $side: $(uptime)"
    # shellcheck disable=SC2086
    "${jvm[@]}" ${MODEL_JAVA_OPTS:-} "${opts[@]}" -cp "$cp" io.mooncake4j.model.SpeedBench "$@" | tee "$run"
    sed -n "s/^SPEED /$side /p" "$run" >> "$out"
  done
done
echo
echo "== results (medians per JVM; ops = Jlama's tensor operations)"
cat "$out"
awk '$1=="before"{for(i=2;i<=NF;i++){split($i,kv,"=");b[kv[1]]+=kv[2]};nb++}
     $1=="after"{for(i=2;i<=NF;i++){split($i,kv,"=");a[kv[1]]+=kv[2]};na++}
     END{if(nb&&na&&b["prefill_tps"]>0&&b["decode_tps"]>0)
       printf "after/before (mean of pairs): prefill %.2fx, decode %.2fx\n",
         (a["prefill_tps"]/na)/(b["prefill_tps"]/nb), (a["decode_tps"]/na)/(b["decode_tps"]/nb)}' "$out"
