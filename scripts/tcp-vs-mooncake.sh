#!/usr/bin/env bash
# TCP engine side by side with Mooncake's C++ transfer_engine_bench, interleaved rounds, same run.
# Per round and per (operation, block size): Mooncake C++ default TCP (one connection per request),
# Mooncake C++ with MC_TCP_ENABLE_CONNECTION_POOL=1, this checkout's bench, and optionally a second
# mooncake4j checkout (REF, e.g. main in a /tmp clone, for before/after ratios). Each measurement
# starts a fresh target, runs one initiator for DURATION s (batch 128, 1 thread, 1 GiB buffers on
# 127.0.0.1) and stops the target. Raw rows go to OUT (TSV); a summary (medians and per-round
# ratios against the contender measured just before in the same round) is printed at the end.
#
#   scripts/tcp-vs-mooncake.sh [path/to/transfer_engine_bench]
#   env: MOONCAKE_BENCH (the C++ bench, instead of the argument), REF (another mooncake4j checkout,
#        already built; named "ref"), REFS ("name=dir ..." for several), ROUNDS (3), DURATION (5), BLOCKS ("65536 1048576"), OPS ("read write"),
#        BATCH (128), BUFFER (1073741824), WHO (contenders, default "cpp cpppool java [refs]";
#        "iperf3" adds a single-stream loopback reference; GB/s = 10^9 bytes/s everywhere),
#        OUT (tcp-vs-mooncake-<time>.tsv in the current folder)
#
# Without a C++ bench (no argument, no MOONCAKE_BENCH, or not executable) the C++ contenders are
# skipped with the reason; with neither a C++ bench nor REF there is nothing to compare and the
# script exits 0 after saying so. Nothing of Mooncake is part of this repository: build it
# outside (docs/performance.md, "Building Mooncake's bench").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cpp=${1:-${MOONCAKE_BENCH:-}}
declare -A refdir=()
refs=${REFS:-}
[ -z "${REF:-}" ] || refs="ref=$REF $refs"
rounds=${ROUNDS:-3}
duration=${DURATION:-5}
blocks=${BLOCKS:-"65536 1048576"}
ops=${OPS:-"read write"}
batch=${BATCH:-128}
buffer=${BUFFER:-1073741824}
out=${OUT:-$PWD/tcp-vs-mooncake-$(date -u +%Y%m%dT%H%M%S).tsv}

who=()
if [ -n "$cpp" ] && [ -x "$cpp" ]; then
  who+=(cpp cpppool)
else
  echo "tcp-vs-mooncake: skipping the Mooncake C++ contenders: ${cpp:+$cpp is not an executable}${cpp:-no transfer_engine_bench given (argument or MOONCAKE_BENCH)}" >&2
fi
who+=(java)
for pair in $refs; do
  name=${pair%%=*}; dir=${pair#*=}
  [ -x "$dir/bin/mooncake4j" ] || { echo "tcp-vs-mooncake: $name: $dir has no bin/mooncake4j" >&2; exit 2; }
  refdir[$name]=$dir
  who+=("$name")
done
if [ -n "${WHO:-}" ]; then read -r -a who <<<"$WHO"; fi
if [ ${#who[@]} -lt 2 ]; then
  echo "tcp-vs-mooncake: skipped: nothing to compare this build with (give a Mooncake bench, REF or REFS)" >&2
  exit 0
fi

"$here/bin/mooncake4j" version >/dev/null # build once, outside the timed runs
for name in "${!refdir[@]}"; do "${refdir[$name]}/bin/mooncake4j" version >/dev/null; done
tmp=$(mktemp -d)
target_pid=
cleanup() {
  if [ -n "$target_pid" ]; then kill "$target_pid" 2>/dev/null || true; wait "$target_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# bench command (without flags) for a contender
bench_cmd() {
  case "$1" in
    cpp | cpppool) echo "$cpp" ;;
    java) echo "$here/bin/mooncake4j bench" ;;
    *) echo "${refdir[$1]}/bin/mooncake4j bench" ;;
  esac
}

# one measurement, tried twice (a target that fails to start on a port taken meanwhile):
# prints "<GB/s>\t<desc/s>" (or "-\t-" on failure, with the reason on stderr)
measure() {
  local res
  res=$(measure_once "$@")
  [ "${res%%$'\t'*}" != "-" ] || res=$(measure_once "$@")
  printf '%s\n' "$res"
}

# single-stream loopback ceiling of the moment: iperf3 (needs iperf3 on PATH), same slot as the benches
measure_iperf3() {
  local port=$((20000 + RANDOM % 20000)) line
  iperf3 -s -B 127.0.0.1 -p "$port" -1 >"$tmp/iperf-s.out" 2>&1 &
  target_pid=$!
  sleep 0.5
  line=$(iperf3 -c 127.0.0.1 -p "$port" -t "$duration" -f G 2>&1 | grep receiver | tail -1)
  wait "$target_pid" 2>/dev/null || true; target_pid=
  if [ -z "$line" ]; then printf -- '-\t-\t-\n'; return; fi
  printf '%s\t-\t-\n' "$(echo "$line" | sed 's/.* \([0-9.]*\) GBytes\/sec.*/\1/' | awk '{ printf "%.2f", $1 * 1.073741824 }')"
}

measure_once() {
  local w=$1 op=$2 block=$3 cmd env=()
  if [ "$w" = iperf3 ]; then measure_iperf3; return; fi
  cmd=$(bench_cmd "$w")
  [ "$w" = cpppool ] && env=(MC_TCP_ENABLE_CONNECTION_POOL=1)
  local common=(--protocol=tcp --metadata_server=P2PHANDSHAKE --local_server_name=127.0.0.1
                --buffer_size="$buffer" --threads=1 --batch_size="$batch" --block_size="$block")
  # shellcheck disable=SC2086
  env GLOG_logtostderr=1 "${env[@]}" $cmd --mode=target "${common[@]}" >"$tmp/target.out" 2>&1 &
  target_pid=$!
  local seg=
  for _ in $(seq 1 300); do
    seg=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$tmp/target.out" | head -1)
    [ -n "$seg" ] && break
    kill -0 "$target_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$seg" ]; then
    echo "tcp-vs-mooncake: $w target did not start:" >&2; tail -5 "$tmp/target.out" >&2
    kill "$target_pid" 2>/dev/null || true; wait "$target_pid" 2>/dev/null || true; target_pid=
    printf -- '-\t-\t-\n'; return
  fi
  local c0 c1
  c0=$(cpu_ticks "$target_pid")
  # shellcheck disable=SC2086
  env GLOG_logtostderr=1 "${env[@]}" $cmd --mode=initiator "${common[@]}" --segment_id="$seg" \
      --operation="$op" --duration="$duration" --report_unit=GB >"$tmp/init.out" 2>&1 || true
  c1=$(cpu_ticks "$target_pid")
  kill "$target_pid" 2>/dev/null || true; wait "$target_pid" 2>/dev/null || true; target_pid=
  local line gbs count secs
  line=$(grep -o 'Test completed: duration [0-9.]*, batch count [0-9]*, throughput [0-9.]*' "$tmp/init.out" | tail -1)
  if [ -z "$line" ]; then
    echo "tcp-vs-mooncake: $w initiator failed:" >&2; tail -5 "$tmp/init.out" >&2
    echo "tcp-vs-mooncake: its target said:" >&2; tail -5 "$tmp/target.out" >&2
    printf -- '-\t-\t-\n'; return
  fi
  secs=$(echo "$line" | sed 's/.*duration \([0-9.]*\),.*/\1/')
  count=$(echo "$line" | sed 's/.*batch count \([0-9]*\),.*/\1/')
  gbs=$(echo "$line" | sed 's/.*throughput \([0-9.]*\)$/\1/')
  printf '%s\t%s\t%s\n' "$gbs" "$(awk -v c="$count" -v b="$batch" -v s="$secs" 'BEGIN { printf "%.0f", c * b / s }')" \
    "$(awk -v d=$((c1 - c0)) -v hz="$hz" -v g="$gbs" -v s="$secs" 'BEGIN { if (g > 0) printf "%.3f", d / hz / (g * s); else print "-" }')"
}

# user + system CPU ticks of a process so far
cpu_ticks() {
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
hz=$(getconf CLK_TCK)

printf '# round\twho\top\tblock\tbatch\tGB/s\tdesc/s\ttarget CPU s/GB\tload1\n' >"$out"
echo "tcp-vs-mooncake: ${rounds} rounds x (${ops}) x (${blocks}), contenders: ${who[*]}; raw rows in $out" >&2
for r in $(seq 1 "$rounds"); do
  for block in $blocks; do
    for op in $ops; do
      for w in "${who[@]}"; do
        res=$(measure "$w" "$op" "$block")
        load=$(cut -d' ' -f1 /proc/loadavg)
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$w" "$op" "$block" "$batch" "$res" "$load" | tee -a "$out" >&2
      done
    done
  done
done

# summary: median GB/s per contender, and per-round ratios java / each other contender (median, range)
awk -F'\t' -v order="${who[*]}" '
  function median(arr, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
    return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
  }
  /^#/ { next }
  $6 != "-" { g[$3 "/" $4 "/" $2 "/" $1] = $6; keys[$3 "/" $4] = 1; rounds[$1] = 1 }
  $8 != "-" && $8 != "" { cpu[$3 "/" $4 "/" $2 "/" $1] = $8 }
  END {
    nw = split(order, ws, " ")
    printf "%-14s", "op/block"
    for (k = 1; k <= nw; k++) printf "%12s", ws[k] " GB/s"
    for (k = 1; k <= nw; k++) if (ws[k] != "java") printf "%26s", "java/" ws[k] " med (range)"
    printf "\n"
    for (key in keys) {
      printf "%-14s", key
      for (k = 1; k <= nw; k++) {
        n = 0; for (r in rounds) if ((key "/" ws[k] "/" r) in g) a[++n] = g[key "/" ws[k] "/" r]
        if (n) printf "%12.2f", median(a, n); else printf "%12s", "-"
      }
      for (k = 1; k <= nw; k++) {
        if (ws[k] == "java") continue
        n = 0; lo = 1e9; hi = 0
        for (r in rounds) {
          j = key "/java/" r; o = key "/" ws[k] "/" r
          if ((j in g) && (o in g) && g[o] > 0) { x = g[j] / g[o]; a[++n] = x; if (x < lo) lo = x; if (x > hi) hi = x }
        }
        if (n) printf "%26s", sprintf("%.2fx (%.2f-%.2f) n=%d", median(a, n), lo, hi, n); else printf "%26s", "-"
      }
      printf "\n"
    }
    printf "\ntarget process CPU seconds per GB moved (median; lower is better)\n%-14s", "op/block"
    for (k = 1; k <= nw; k++) printf "%12s", ws[k]
    printf "\n"
    for (key in keys) {
      printf "%-14s", key
      for (k = 1; k <= nw; k++) {
        n = 0; for (r in rounds) if ((key "/" ws[k] "/" r) in cpu) a[++n] = cpu[key "/" ws[k] "/" r]
        if (n) printf "%12.3f", median(a, n); else printf "%12s", "-"
      }
      printf "\n"
    }
  }' "$out"
