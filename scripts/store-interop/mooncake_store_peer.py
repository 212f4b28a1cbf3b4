#!/usr/bin/env python3
"""A Mooncake Store client built from Mooncake's own source (its pybind `store` module), driven over
stdin/stdout by mooncake4j's interop test (MooncakeClientInteropTest) and bench (store-interop.sh).

Not part of the build: it needs the `store` extension module built outside this project
(docs/store.md, "Mooncake's own client"); PYTHONPATH must name the folder that holds it.

usage: mooncake_store_peer.py MASTER_HOST:PORT METADATA_SERVER SEGMENT_BYTES
Prints "READY <segment name>", then answers one line per command:
  put KEY SIZE SEED [SEGMENT]   -> "PUT <rc>"  value = pattern(SIZE, SEED), optionally preferring SEGMENT
  get KEY                       -> "GET <length> <sha256 hex>" (length 0 for a miss)
  bench VALUE_BYTES BATCH SECONDS -> "BENCH put <GB/s> <p50 ms> <batches> get <GB/s> <p50 ms> <failures>"
  quit
"""
import ctypes
import hashlib
import sys
import time

from store import MooncakeDistributedStore, ReplicateConfig


def pattern(size, seed):
    # the same bytes as MooncakeClientInteropTest.pattern: (i * 31 + seed * 7 + (i >> 8)) mod 256
    return bytes(((i * 31 + seed * 7 + (i >> 8)) & 0xFF) for i in range(size))


def bench(store, value, batch, seconds):
    n = value * batch
    src = ctypes.create_string_buffer(n)
    dst = ctypes.create_string_buffer(n)
    ctypes.memset(src, 0x5A, n)
    base_s = ctypes.addressof(src)
    base_d = ctypes.addressof(dst)
    if store.register_buffer(base_s, n) != 0 or store.register_buffer(base_d, n) != 0:
        return "BENCH error: register_buffer failed"
    ps = [base_s + i * value for i in range(batch)]
    pd = [base_d + i * value for i in range(batch)]
    sizes = [value] * batch
    put_t, get_t, fails, rounds = [], [], 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        keys = ["mc-bench-%d-%d" % (rounds, i) for i in range(batch)]
        t0 = time.perf_counter()
        pr = store.batch_put_from(keys, ps, sizes)
        t1 = time.perf_counter()
        gr = store.batch_get_into(keys, pd, sizes)
        t2 = time.perf_counter()
        put_t.append(t1 - t0)
        get_t.append(t2 - t1)
        fails += sum(1 for r in pr if r != 0) + sum(1 for r in gr if r != value)
        # force: the gets just took read leases, as the Java bench's batchRemove(keys, true)
        store.batch_remove(keys, True)
        rounds += 1
    store.unregister_buffer(base_s)
    store.unregister_buffer(base_d)

    def rate(ts):
        return batch * value * len(ts) / sum(ts) / 1e9

    def p50(ts):
        return sorted(ts)[len(ts) // 2] * 1e3

    return "BENCH put %.3f %.3f %d get %.3f %.3f %d" % (rate(put_t), p50(put_t), rounds, rate(get_t), p50(get_t), fails)


def main():
    master, metadata, segment = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", metadata, segment, 64 << 20, "tcp", "", master)
    if rc != 0:
        print("SETUP-FAILED %d" % rc, flush=True)
        return 1
    print("READY %s" % store.get_hostname(), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "quit":
            break
        if cmd[0] == "put":
            cfg = ReplicateConfig()
            if len(cmd) > 4:
                cfg.preferred_segment = cmd[4]
            print("PUT %d" % store.put(cmd[1], pattern(int(cmd[2]), int(cmd[3])), cfg), flush=True)
        elif cmd[0] == "get":
            v = store.get(cmd[1])
            print("GET %d %s" % (len(v), hashlib.sha256(v).hexdigest()), flush=True)
        elif cmd[0] == "bench":
            print(bench(store, int(cmd[1]), int(cmd[2]), float(cmd[3])), flush=True)
        else:
            print("ERROR unknown command %s" % cmd[0], flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
