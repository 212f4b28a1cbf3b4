#!/usr/bin/env bash
# GPU check for mooncake4j: runs the tests tagged `gpu` and a short GPU->host->GPU copy benchmark,
# then prints a summary. Two steps, so that the GPU machine needs no network and no Maven:
#
#   scripts/gpu-check.sh prepare                 on a build machine (Maven + its local repository):
#                                                builds target/gpu-check/ = jar, test classes, every
#                                                dependency (JCuda and its natives included) and a
#                                                jlink'd Java runtime (~42 MB in all)
#   scripts/gpu-check.sh [run] [MiB] [iters] [device]
#                                                on the GPU machine (Linux x86_64, offline, no JDK
#                                                needed): default 256 MiB, 5 iterations, cuda:0
#
# Then it runs the CLI on the GPU: bench --use_vram (plain and --verify), demo --device cuda
# --requests 8, and bench --use_vram --verify between two processes over the cuda-ipc transport
# (MC_TRANSPORTS=cuda-ipc,tcp; every byte must go by cuda-ipc) (GPU_CHECK_CLI=0 skips this; about
# 40 s more).
#
# Exit status: 0 all passed, 1 a test, the benchmark or a CLI run failed, 2 CUDA unavailable (the
# cause and its fix are printed), 3 bundle missing, 124 the 280 s time limit hit. Details: docs/gpu.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle="$here/target/gpu-check"   # at the checkout's top, beside the modules
mode=run
if [ "${1:-}" = prepare ] || [ "${1:-}" = run ]; then mode=$1; shift; fi

if [ "$mode" = prepare ]; then
  . "$here/bin/lib/jdk.sh"
  command -v mvn >/dev/null 2>&1 || { echo "gpu-check prepare: Maven (mvn) is needed here: apt-get install maven" >&2; exit 2; }
  offline=${MVN_OFFLINE--o}   # MVN_OFFLINE= (empty) to let Maven download what the local repository lacks
  cd "$here"
  mvn -B -ntp -q $offline -DskipTests package   # every module, test classes included
  rm -rf "$bundle"
  # the library's tests (GpuCheck) with their dependencies; the node's jar and what it adds (the CLI runs)
  mvn -B -ntp -q $offline -pl mooncake4j dependency:copy-dependencies -DincludeScope=test -DoutputDirectory="$bundle/lib"
  cp mooncake4j/target/mooncake4j.jar "$bundle/"
  cp -r mooncake4j/target/test-classes "$bundle/test-classes"
  mkdir -p "$bundle/node"
  cp mooncake4j-node/target/mooncake4j-node.jar "$bundle/node/"
  # what the node adds (its module path and class path: the CLI runs on the class path here), less the model runtime (Jlama and what only it needs: the check runs no model),
  # so that the bundle fits a 64 MiB transfer
  model_only='^(jlama-|jackson-databind|jackson-annotations|jackson-dataformat|snakeyaml|guava|failureaccess|listenablefuture|jsr305|checker-qual|error_prone|j2objc|jctools|jinjava|javassist|re2j|commons-lang3|commons-net|java-ipv6|annotations-|big-math|jemoji|jafama)'
  for j in mooncake4j-node/target/lib/*.jar mooncake4j-node/target/modules/*.jar; do
    name=$(basename "$j")
    [[ "$name" =~ $model_only ]] && continue
    [ -f "$bundle/lib/$name" ] || cp "$j" "$bundle/node/"
  done
  # a small Java runtime, so the GPU machine needs no JDK (GPU_CHECK_JRE=0 to skip), packed as jre.tar.xz
  # (~14 MB: an uncompressed image compresses far better under xz than jlink's own zip); run unpacks it
  if [ "${GPU_CHECK_JRE:-1}" = 1 ]; then
    rm -rf "$here/target/gpu-check-jre"
    "$JAVA_HOME/bin/jlink" --add-modules java.base,java.logging,java.net.http,jdk.httpserver,jdk.unsupported,jdk.zipfs \
      --strip-debug --no-header-files --no-man-pages --compress=zip-0 --output "$here/target/gpu-check-jre/jre"
    tar -C "$here/target/gpu-check-jre" -cf - jre | xz -T2 -6 >"$bundle/jre.tar.xz"
    rm -rf "$here/target/gpu-check-jre"
  fi
  echo "gpu-check bundle ready: $bundle ($(du -sh "$bundle" | cut -f1)); copy the checkout's target/gpu-check,"
  echo "scripts/ and bin/ to the GPU machine and run scripts/gpu-check.sh there"
  exit 0
fi

if [ ! -f "$bundle/mooncake4j.jar" ] || [ ! -d "$bundle/lib" ] || [ ! -d "$bundle/test-classes" ]; then
  echo "gpu-check: no prepared bundle in $bundle; run 'scripts/gpu-check.sh prepare' on a build machine first" >&2
  exit 3
fi
if [ ! -x "$bundle/jre/bin/java" ] && [ -f "$bundle/jre.tar.xz" ]; then
  tar -C "$bundle" -xJf "$bundle/jre.tar.xz" 2>/dev/null \
    || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle/jre.tar.xz" "$bundle"
fi
if [ -x "$bundle/jre/bin/java" ] && "$bundle/jre/bin/java" -version >/dev/null 2>&1; then
  JAVA_HOME="$bundle/jre"   # the runtime prepared with the bundle
else
  . "$here/bin/lib/jdk.sh"  # else a JDK >= 22 installed here
fi

echo "== host"
uname -srm
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader || true
  timeout 30 nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/driver CUDA version \1/p' | head -n1 || true
else
  echo "nvidia-smi not found"
fi

status=0
timeout 280 "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Xss1m \
  -Dmooncake4j.cuda.nativeDir="$bundle/natives" \
  -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
  -cp "$bundle/mooncake4j.jar:$bundle/test-classes:$bundle/lib/*" \
  io.mooncake4j.memory.cuda.GpuCheck "$@" || status=$?
if [ "$status" = 124 ]; then echo "RESULT: TIMEOUT (280 s)"; fi

# The CLI on the GPU: bench --use_vram (GPU buffers on both sides, TCP staging, --verify),
# demo --device cuda (KV caches of P and D on the GPU) and bench over cuda-ipc. Skipped when CUDA is unavailable (status 2),
# the bundle is missing or the time limit was hit. GPU_CHECK_CLI=0 skips it.
if { [ "$status" = 0 ] || [ "$status" = 1 ]; } && [ "${GPU_CHECK_CLI:-1}" = 1 ]; then
  gpu=${3:-0}
  clidir="$bundle/cli-run"
  rm -rf "$clidir"; mkdir -p "$clidir"
  cli=("$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Dmooncake4j.cuda.nativeDir="$bundle/natives"
       -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$bundle/node/*:$bundle/lib/*" io.mooncake4j.cli.Main)
  cli_status=0
  echo "== CLI on cuda:$gpu"
  # bench: a target with a GPU buffer in the background, then two 4 s initiator runs (plain write, --verify)
  timeout 90 "${cli[@]}" bench --mode=target --protocol=tcp --local_server_name=127.0.0.1 --use_vram \
      --gpu_id="$gpu" --buffer_size=256M --duration=60 >"$clidir/target.out" 2>&1 &
  tpid=$!
  segment=
  for _ in $(seq 1 300); do
    segment=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$clidir/target.out" | head -n1)
    [ -n "$segment" ] && break
    kill -0 "$tpid" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "$segment" ]; then
    echo "cli bench --use_vram: FAIL (the target printed no 'listening on' line):"; tail -n 5 "$clidir/target.out"
    cli_status=1
  else
    for extra in "--operation=write" "--verify"; do
      if timeout 60 "${cli[@]}" bench --mode=initiator --protocol=tcp --local_server_name=127.0.0.1 \
          --segment_id="$segment" --use_vram --gpu_id="$gpu" --threads=4 --batch_size=16 --block_size=1M \
          --duration=4 "$extra" >"$clidir/initiator.out" 2>&1; then
        echo "cli bench --use_vram $extra: PASS: $(grep -m1 'Test completed' "$clidir/initiator.out")"
        grep -m1 '^Verify:' "$clidir/initiator.out" || true
      else
        echo "cli bench --use_vram $extra: FAIL:"; tail -n 5 "$clidir/initiator.out"
        cli_status=1
      fi
    done
  fi
  kill "$tpid" 2>/dev/null || true
  wait "$tpid" 2>/dev/null || true
  # demo: 8 Llama-3-8B requests of 2k tokens, P and D KV caches on the GPU
  if timeout 120 "${cli[@]}" demo --device cuda --gpu-id "$gpu" --requests 8 --timeout 100 \
      >"$clidir/demo.out" 2>&1; then
    echo "cli demo --device cuda --requests 8: PASS"
  else
    echo "cli demo --device cuda --requests 8: FAIL"
    cli_status=1
  fi
  grep -E '^  (requests|KV caches|KV bytes verified|throughput) ' "$clidir/demo.out" || tail -n 5 "$clidir/demo.out"
  # cuda-ipc: GPU->GPU between two processes over CUDA IPC handles (a handle cannot be opened in the
  # process that made it, so target and initiator are separate JVMs). Both run with
  # MC_TRANSPORTS=cuda-ipc,tcp; the initiator's "Bytes by transport" line must show every byte on
  # cuda-ipc and none on tcp, and --verify reads every byte back. GPU_CHECK_IPC_GPU picks the
  # initiator's GPU (default: the target's; another index exercises the cross-device path).
  ipc_gpu=${GPU_CHECK_IPC_GPU:-$gpu}
  MC_TRANSPORTS=cuda-ipc,tcp timeout 60 "${cli[@]}" bench --mode=target --protocol=auto --local_server_name=127.0.0.1 \
      --use_vram --gpu_id="$gpu" --buffer_size=256M --duration=45 >"$clidir/ipc-target.out" 2>&1 &
  ipid=$!
  segment=
  for _ in $(seq 1 300); do
    segment=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$clidir/ipc-target.out" | head -n1)
    [ -n "$segment" ] && break
    kill -0 "$ipid" 2>/dev/null || break
    sleep 0.2
  done
  if [ -z "$segment" ]; then
    echo "cli bench cuda-ipc: FAIL (the target printed no 'listening on' line):"; tail -n 5 "$clidir/ipc-target.out"
    cli_status=1
  elif MC_TRANSPORTS=cuda-ipc,tcp timeout 40 "${cli[@]}" bench --mode=initiator --protocol=auto \
      --local_server_name=127.0.0.1 --segment_id="$segment" --use_vram --gpu_id="$ipc_gpu" --threads=4 \
      --batch_size=16 --block_size=1M --duration=4 --verify --memcpy_baseline=false >"$clidir/ipc-initiator.out" 2>&1; then
    by=$(grep -m1 '^Bytes by transport:' "$clidir/ipc-initiator.out" || true)
    ipc_bytes=$(printf '%s' "$by" | sed -n 's/.*cuda-ipc \([0-9.]* [KMGTP]*i*B\).*/\1/p')
    tcp_bytes=$(printf '%s' "$by" | sed -n 's/.*tcp \([0-9.]* [KMGTP]*i*B\).*/\1/p')
    if [ -n "$ipc_bytes" ] && [ "$ipc_bytes" != "0 B" ] && [ "$tcp_bytes" = "0 B" ]; then
      echo "cli bench cuda-ipc cuda:$ipc_gpu -> cuda:$gpu --verify: PASS: $(grep -m1 'Test completed' "$clidir/ipc-initiator.out")"
      echo "  $by"
      grep -m1 '^Verify:' "$clidir/ipc-initiator.out" || true
    else
      echo "cli bench cuda-ipc --verify: FAIL: the bytes did not all go by cuda-ipc: ${by:-no 'Bytes by transport' line}"
      grep -iE 'cuda-ipc|could not move' "$clidir/ipc-initiator.out" "$clidir/ipc-target.out" | head -n 5 || true
      cli_status=1
    fi
  else
    echo "cli bench cuda-ipc --verify: FAIL:"; tail -n 5 "$clidir/ipc-initiator.out"
    cli_status=1
  fi
  kill "$ipid" 2>/dev/null || true
  wait "$ipid" 2>/dev/null || true
  # P/D nodes: the connector's KV on the GPU between two processes. A P and a D `serve` node (synthetic
  # Llama-3-8B, KV caches on cuda:N, engine and mooncake_protocol auto, MC_TRANSPORTS=cuda-ipc,tcp) behind
  # `proxy`; 16 requests of 2,048-token prompts through the proxy, then the same prompts to P alone as
  # the single-node reference. Passes when every answer is 200 and equals P's own, D counts no
  # mismatched KV word, and P's status shows its KV went by cuda-ipc and none by tcp.
  # GPU_CHECK_PD_DEVICE=cpu runs the step's plumbing on a host without a GPU (then tcp carries it).
  pd_device=${GPU_CHECK_PD_DEVICE:-cuda}
  pd_ok=1
  pd_pids=()
  pd_serve() {  # NAME ROLE PORT
    MC_TRANSPORTS=cuda-ipc,tcp VLLM_HOST_IP=127.0.0.1 VLLM_MOONCAKE_BOOTSTRAP_PORT=18998 timeout 150 "${cli[@]}" serve \
        --host 127.0.0.1 --port "$3" --device "$pd_device" --gpu-id "$gpu" --transfer-engine auto --kv-cache-memory 4G \
        --kv-transfer-config "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"$2\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"auto\"}}" >"$clidir/pd-$1.out" 2>&1 &
    pd_pids+=($!)
  }
  pd_serve p kv_producer 18100
  pd_serve d kv_consumer 18200
  timeout 150 "${cli[@]}" proxy --host 127.0.0.1 --port 18000 --prefill http://127.0.0.1:18100 18998 \
      --decode http://127.0.0.1:18200 >"$clidir/pd-proxy.out" 2>&1 &
  pd_pids+=($!)
  pd_get() { python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1" 2>/dev/null; }
  for url in http://127.0.0.1:18100/health http://127.0.0.1:18200/health http://127.0.0.1:18000/health; do
    for _ in $(seq 1 300); do
      pd_get "$url" >/dev/null && break
      for pid in "${pd_pids[@]}"; do kill -0 "$pid" 2>/dev/null || break 2; done
      sleep 0.2
    done
    pd_get "$url" >/dev/null || { echo "cli serve P/D $pd_device: FAIL ($url never answered)"; pd_ok=0; break; }
  done
  if [ "$pd_ok" = 1 ]; then
    python3 "$here/scripts/lib/pd-client.py" http://127.0.0.1:18000 http://127.0.0.1:18100 16 2048 8 4 \
        >"$clidir/pd-client.out" 2>&1 || pd_ok=0
    cat "$clidir/pd-client.out"
    pst=$(pd_get http://127.0.0.1:18100/mooncake/status); dst=$(pd_get http://127.0.0.1:18200/mooncake/status)
    verdict=$(python3 - "$pst" "$dst" "$pd_device" <<'PY'
import json, sys
p, d, device = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
by = p.get("transfer_bytes_by_transport", {})
kv = d.get("kv_bytes_received", 0)
want = "cuda-ipc" if device == "cuda" else "tcp"
others = sum(v for k, v in by.items() if k != want)
print(f"pd KV: D received {kv / 2**30:.2f} GiB, {d.get('kv_mismatched_words')} mismatched words; P's engines "
      f"carried {', '.join(f'{k} {v / 2**30:.2f} GiB' for k, v in sorted(by.items())) or 'nothing'}")
ok = kv > 0 and d.get("kv_mismatched_words") == 0 and by.get(want, 0) >= kv and others == 0
print("pd verdict:", "PASS" if ok else f"FAIL (want every KV byte by {want}, none mismatched)")
PY
) || pd_ok=0
    echo "$verdict"
    case "$verdict" in *"pd verdict: PASS"*) ;; *) pd_ok=0 ;; esac
  fi
  for pid in "${pd_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pd_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$pd_ok" = 1 ]; then
    echo "cli serve P/D --device $pd_device: PASS"
  else
    echo "cli serve P/D --device $pd_device: FAIL (outputs pd-*.out in $clidir)"
    tail -n 5 "$clidir"/pd-p.out "$clidir"/pd-d.out 2>/dev/null || true
    cli_status=1
  fi
  echo "CLI RESULT: $([ "$cli_status" = 0 ] && echo PASS || echo FAIL) (outputs in $clidir)"
  if [ "$cli_status" != 0 ] && [ "$status" = 0 ]; then status=1; fi
fi
exit "$status"
