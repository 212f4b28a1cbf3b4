#!/usr/bin/env bash
# Same-machine bench, two processes: for each protocol given (default: shm tcp), block size 64 KiB
# and 1 MiB, read and write, runs a bench target and an initiator (batch 128) on 127.0.0.1 and
# prints the initiator's summary with the memcpy baseline it measured in the same run.
#   scripts/shm-bench.sh [protocol ...]     env: THREADS (2), DURATION (5), ENGINE (the protocol)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${THREADS:-2}
duration=${DURATION:-5}
engine=${ENGINE:-}
protocols=("$@")
[ ${#protocols[@]} -eq 0 ] && protocols=(shm tcp)
"$here/bin/mooncake4j" version >/dev/null # build once, outside the timed runs
tmp=$(mktemp -d)
target_pid=
cleanup() {
  if [ -n "$target_pid" ]; then kill "$target_pid" 2>/dev/null || true; wait "$target_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
for proto in "${protocols[@]}"; do
  for block in 65536 1048576; do
    for op in read write; do
      common=(--protocol="$proto" --engine="${engine:-$proto}" --local_server_name=127.0.0.1 --batch_size=128
              --block_size="$block" --threads="$threads" --buffer_size=1)
      "$here/bin/mooncake4j" bench --mode=target "${common[@]}" >"$tmp/target.out" 2>"$tmp/target.err" &
      target_pid=$!
      seg=
      for _ in $(seq 1 300); do
        seg=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$tmp/target.out" | head -1)
        [ -n "$seg" ] && break
        kill -0 "$target_pid" 2>/dev/null || { cat "$tmp/target.err" >&2; exit 1; }
        sleep 0.1
      done
      [ -n "$seg" ] || { echo "target did not start" >&2; exit 1; }
      echo "== protocol $proto, block $block, $op, batch 128, threads $threads, ${duration} s"
      "$here/bin/mooncake4j" bench --mode=initiator "${common[@]}" --segment_id="$seg" --operation="$op" \
        --duration="$duration" --memcpy_baseline --report_unit=GiB 2>"$tmp/init.err" \
        | grep -E '^(Test completed|Memcpy baseline|Batch latency)' || { cat "$tmp/init.err" >&2; exit 1; }
      kill "$target_pid"; wait "$target_pid" 2>/dev/null || true; target_pid=
    done
  done
done
