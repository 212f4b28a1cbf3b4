package io.mooncake4j.store;

import io.mooncake4j.engine.TransferEngine;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The copying calls of {@link MooncakeStoreClient} (put, put_parts, put_batch, upsert, get, get_batch,
 * get_buffer): values are staged in registered memory (a range of the local buffer, or a temporary
 * registration when it has no room) and moved with the zero-copy data path. The caller (the client)
 * brackets each call with its in-flight accounting.
 */
final class Copies {

    private final TransferEngine engine;
    private final StagingBuffer staging;
    private final DataPath data;
    private final MasterClient master;
    private final String endpoint;

    Copies(TransferEngine engine, StagingBuffer staging, DataPath data, MasterClient master, String endpoint) {
        this.engine = engine;
        this.staging = staging;
        this.data = data;
        this.master = master;
        this.endpoint = endpoint;
    }

    /** Registered memory for one copying call: a range of the local buffer, or a temporary registration. */
    final class Staged implements AutoCloseable {
        final long address;
        final long length;
        final MemorySegment segment;
        private final Arena temp;

        Staged(long length) {
            this.length = length;
            long a = staging.allocate(length);
            if (a >= 0) {
                address = a;
                temp = null;
                segment = MemorySegment.ofAddress(a).reinterpret(Math.max(1, length));
            } else {
                temp = Arena.ofShared();
                segment = temp.allocate(Math.max(1, length), 4096);
                address = segment.address();
                int rc = engine.registerMemory(address, Math.max(1, length), "cpu:0");
                if (rc != 0) {
                    temp.close();
                    throw new StoreException(ErrorCode.INVALID_PARAMS.code(), String.format(Locale.ROOT,
                            "cannot register %d bytes of staging memory: transfer engine returned %d", length, rc), null);
                }
            }
        }

        @Override
        public void close() {
            if (temp == null) {
                staging.release(address, length);
            } else {
                engine.unregisterMemory(address);
                temp.close();
            }
        }
    }

    private static long total(List<byte[]> values) {
        long n = 0;
        for (byte[] v : values) {
            n += v.length;
        }
        return n;
    }

    private static List<byte[]> values(List<byte[]> values, String name) {
        Args.notNull(values, name);
        for (int i = 0; i < values.size(); i++) {
            if (values.get(i) == null) {
                throw Args.invalid("%s[%d] is null", name, i);
            }
        }
        return values;
    }

    /** Puts (or upserts) each key's value, the concatenation of its parts: one staging, one batch. */
    int[] put(List<String> keys, List<List<byte[]>> parts, ReplicateConfig config, boolean upsert) {
        Args.keys(keys);
        Args.notNull(parts, "values");
        if (parts.size() != keys.size()) {
            throw Args.invalid("%d keys but %d values", keys.size(), parts.size());
        }
        Args.notNull(config, "config");
        long sum = 0;
        for (List<byte[]> p : parts) {
            sum += total(values(p, "parts"));
        }
        try (Staged s = new Staged(sum)) {
            long[][] a = new long[keys.size()][];
            long[][] z = new long[keys.size()][];
            long off = 0;
            for (int i = 0; i < keys.size(); i++) {
                List<byte[]> p = parts.get(i);
                a[i] = new long[p.size()];
                z[i] = new long[p.size()];
                for (int j = 0; j < p.size(); j++) {
                    byte[] v = p.get(j);
                    MemorySegment.copy(v, 0, s.segment, ValueLayout.JAVA_BYTE, off, v.length);
                    a[i][j] = s.address + off;
                    z[i][j] = v.length;
                    off += v.length;
                }
            }
            return data.put(keys, a, z, config, upsert);
        }
    }

    /**
     * Reads keys into staging memory: one BatchGetReplicaList, one staging for all, the reads.
     *
     * @param keep whether the caller keeps the staging (get_buffer); otherwise it is copied and released
     */
    List<Result<?>> get(List<String> keys, boolean keep, Runnable enter, Runnable exit) {
        Args.keys(keys);
        int n = keys.size();
        List<Result<?>> out = new ArrayList<>(n);
        long t0 = System.nanoTime();
        List<Result<ReplicaList>> lists;
        try {
            lists = n == 1 ? List.of(master.getReplicaList(keys.getFirst())) : master.batchGetReplicaList(keys);
        } catch (StoreException e) {
            for (int i = 0; i < n; i++) {
                out.add(Result.error(e.errorCode()));
            }
            return out;
        }
        long[] size = new long[n];
        int[] early = new int[n];
        for (int i = 0; i < n; i++) {
            Result<ReplicaList> r = i < lists.size() ? lists.get(i) : Result.error(ErrorCode.RPC_FAIL.code());
            ReplicaDescriptor d = r.ok() ? DataPath.choose(r.value(), endpoint) : null;
            early[i] = !r.ok() ? r.code() : d == null ? ErrorCode.REPLICA_IS_NOT_READY.code()
                    : !keep && d.size() > Integer.MAX_VALUE - 16 ? ErrorCode.BUFFER_OVERFLOW.code() : 0;
            size[i] = early[i] == 0 ? d.size() : 0;
        }
        // one staging per key: a buffer kept by the caller gives back its own range
        Staged[] staged = new Staged[n];
        try {
            long[][] a = new long[n][];
            long[][] z = new long[n][];
            for (int i = 0; i < n; i++) {
                staged[i] = early[i] == 0 ? new Staged(size[i]) : null;
                a[i] = new long[] {staged[i] == null ? 0 : staged[i].address};
                z[i] = new long[] {size[i]};
            }
            long[] got = data.get(keys, a, z, lists, t0);
            for (int i = 0; i < n; i++) {
                long code = early[i] != 0 ? early[i] : got[i];
                if (code < 0) {
                    out.add(Result.error((int) code));
                } else if (keep) {
                    Staged s = staged[i];
                    staged[i] = null;
                    enter.run();
                    out.add(Result.ok(new StoreBuffer(s.segment.asSlice(0, code), () -> {
                        s.close();
                        exit.run();
                    })));
                } else {
                    out.add(Result.ok(staged[i].segment.asSlice(0, code).toArray(ValueLayout.JAVA_BYTE)));
                }
            }
            return out;
        } finally {
            for (Staged s : staged) {
                if (s != null) {
                    s.close();
                }
            }
        }
    }
}
