package io.mooncake4j.store;

import io.mooncake4j.engine.TransferEngine;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The put and get of {@link MooncakeStoreClient}: the master's two-phase put (BatchPutStart, the
 * writes into the replicas' buffers, BatchPutEnd or BatchPutRevoke) and the get (BatchGetReplicaList,
 * reads from one complete memory replica per key, this client's own first, and from the next replica
 * when a read fails; the lease check). Writes and reads are grouped
 * per target endpoint into one synchronous engine batch each; groups of different endpoints run
 * at once. One key of a single-key call uses the single-key RPCs.
 */
final class DataPath {

    private static final Logger LOG = LoggerFactory.getLogger(DataPath.class);

    private final TransferEngine engine;
    private final MasterClient master;
    private final Uuid clientId;
    private final String endpoint;
    private final AtomicLong backpressure;

    DataPath(TransferEngine engine, MasterClient master, Uuid clientId, String endpoint, AtomicLong backpressure) {
        this.engine = engine;
        this.master = master;
        this.clientId = clientId;
        this.endpoint = endpoint;
        this.backpressure = backpressure;
    }

    /** Transfers of one call, grouped by target endpoint. */
    private static final class Groups {
        final Map<String, Group> byEndpoint = new LinkedHashMap<>();

        void add(String endpoint, int key, long local, long remote, long len) {
            byEndpoint.computeIfAbsent(endpoint, e -> new Group()).add(key, local, remote, len);
        }
    }

    private static final class Group {
        long[] local = new long[4];
        long[] remote = new long[4];
        long[] len = new long[4];
        final List<Integer> keys = new ArrayList<>();
        int n;

        void add(int key, long l, long r, long length) {
            if (n == local.length) {
                local = Arrays.copyOf(local, n * 2);
                remote = Arrays.copyOf(remote, n * 2);
                len = Arrays.copyOf(len, n * 2);
            }
            local[n] = l;
            remote[n] = r;
            len[n] = length;
            n++;
            if (keys.isEmpty() || keys.getLast() != key) {
                keys.add(key);
            }
        }
    }

    /** Runs every group; a failed group fails its keys with TRANSFER_FAIL (codes still 0 only). */
    private void run(Groups g, boolean write, long[] codes) {
        if (g.byEndpoint.isEmpty()) {
            return;
        }
        List<Map.Entry<String, Group>> entries = new ArrayList<>(g.byEndpoint.entrySet());
        int[] rc = new int[entries.size()];
        if (entries.size() == 1) {
            rc[0] = transfer(entries.getFirst().getKey(), entries.getFirst().getValue(), write);
        } else {
            try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
                List<Future<Integer>> fs = new ArrayList<>();
                for (Map.Entry<String, Group> e : entries) {
                    fs.add(ex.submit(() -> transfer(e.getKey(), e.getValue(), write)));
                }
                for (int i = 0; i < fs.size(); i++) {
                    try {
                        rc[i] = fs.get(i).get();
                    } catch (ExecutionException e) {
                        LOG.warn("transfer to {} failed", entries.get(i).getKey(), e.getCause());
                        rc[i] = -1;
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        rc[i] = -1;
                    }
                }
            }
        }
        for (int i = 0; i < rc.length; i++) {
            if (rc[i] != 0) {
                for (int k : entries.get(i).getValue().keys) {
                    if (codes[k] >= 0) {
                        codes[k] = ErrorCode.TRANSFER_FAIL.code();
                    }
                }
            }
        }
    }

    private int transfer(String target, Group g, boolean write) {
        long[] l = Arrays.copyOf(g.local, g.n);
        long[] r = Arrays.copyOf(g.remote, g.n);
        long[] n = Arrays.copyOf(g.len, g.n);
        return write ? engine.batchTransferSyncWrite(target, l, r, n) : engine.batchTransferSyncRead(target, l, r, n);
    }

    int[] put(List<String> keys, long[][] addresses, long[][] sizes, ReplicateConfig config) {
        return put(keys, addresses, sizes, config, false);
    }

    /**
     * Puts (or with {@code upsert} overwrites) keys from their parts: the Put* or the Upsert* RPCs.
     *
     * @return per key 0 or a negative code
     */
    int[] put(List<String> keys, long[][] addresses, long[][] sizes, ReplicateConfig config, boolean upsert) {
        int n = keys.size();
        Args.parts(keys, addresses, sizes);
        long[] codes = new long[n];
        long[] totals = new long[n];
        for (int i = 0; i < n; i++) {
            for (long s : sizes[i]) {
                totals[i] += s;
            }
        }
        List<Result<List<ReplicaDescriptor>>> starts;
        try {
            if (upsert) {
                starts = n == 1 ? List.of(master.upsertStart(clientId, keys.getFirst(), totals[0], config))
                        : master.batchUpsertStart(clientId, keys, totals, config);
            } else {
                starts = n == 1 ? List.of(master.putStart(clientId, keys.getFirst(), totals[0], config))
                        : master.batchPutStart(clientId, keys, totals, config);
            }
        } catch (StoreException e) {
            int[] out = new int[n];
            Arrays.fill(out, e.errorCode());
            return out;
        }
        boolean[] started = new boolean[n];
        Groups g = new Groups();
        for (int i = 0; i < n; i++) {
            Result<List<ReplicaDescriptor>> r = i < starts.size() ? starts.get(i) : Result.error(ErrorCode.RPC_FAIL.code());
            if (!r.ok()) {
                // another client put the key first: the value is there, which is what the caller wanted
                codes[i] = r.code() == ErrorCode.OBJECT_ALREADY_EXISTS.code() ? 0 : r.code();
                if (r.code() == ErrorCode.NO_AVAILABLE_HANDLE.code()) {
                    backpressure.incrementAndGet();
                }
                continue;
            }
            started[i] = true;
            for (ReplicaDescriptor d : r.value()) {
                if (d.kind() != ReplicaDescriptor.Kind.MEMORY || d.size() < totals[i]) {
                    LOG.warn("PutStart of {} gave a replica this client cannot write: {}", keys.get(i), d);
                    codes[i] = ErrorCode.INVALID_REPLICA.code();
                    break;
                }
                long off = 0;
                for (int p = 0; p < sizes[i].length; p++) {
                    if (sizes[i][p] > 0) {
                        g.add(d.endpoint(), i, addresses[i][p], d.address() + off, sizes[i][p]);
                    }
                    off += sizes[i][p];
                }
            }
        }
        run(g, true, codes);
        List<String> ends = new ArrayList<>();
        List<Integer> endIdx = new ArrayList<>();
        List<String> revokes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            if (started[i] && codes[i] == 0) {
                ends.add(keys.get(i));
                endIdx.add(i);
            } else if (started[i]) {
                revokes.add(keys.get(i));
            }
        }
        try {
            if (!ends.isEmpty()) {
                boolean one = ends.size() == 1 && n == 1;
                List<Result<Void>> e = upsert ? (one ? List.of(master.upsertEnd(clientId, ends.getFirst()))
                        : master.batchUpsertEnd(clientId, ends))
                        : one ? List.of(master.putEnd(clientId, ends.getFirst(), null)) : master.batchPutEnd(clientId, ends);
                for (int j = 0; j < endIdx.size(); j++) {
                    codes[endIdx.get(j)] = j < e.size() ? e.get(j).code() : ErrorCode.RPC_FAIL.code();
                }
            }
        } catch (StoreException e) {
            for (int i : endIdx) {
                codes[i] = e.errorCode();
            }
        }
        if (!revokes.isEmpty()) {
            try {
                boolean one = revokes.size() == 1 && n == 1;
                List<Result<Void>> rv = upsert ? (one ? List.of(master.upsertRevoke(clientId, revokes.getFirst()))
                        : master.batchUpsertRevoke(clientId, revokes))
                        : one ? List.of(master.putRevoke(clientId, revokes.getFirst())) : master.batchPutRevoke(clientId, revokes);
                for (int j = 0; j < rv.size(); j++) {
                    if (!rv.get(j).ok()) {
                        LOG.warn("PutRevoke of {} answered {}", revokes.get(j), rv.get(j));
                    }
                }
            } catch (StoreException e) {
                // the master discards unfinished puts itself (put_start_discard_timeout_sec)
                LOG.warn("PutRevoke of {} key(s) failed: {}", revokes.size(), e.getMessage());
            }
        }
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = (int) codes[i];
        }
        return out;
    }

    /** {@return the complete memory replicas in the order to try them: this client's own first} */
    static List<ReplicaDescriptor> readable(ReplicaList list, String ownEndpoint) {
        List<ReplicaDescriptor> out = new ArrayList<>();
        for (ReplicaDescriptor d : list.replicas()) {
            if (d.readableMemory()) {
                if (d.endpoint().equals(ownEndpoint)) {
                    out.addFirst(d);
                } else {
                    out.add(d);
                }
            }
        }
        return out;
    }

    /** The replica to read: a complete memory replica, this client's own first. */
    static ReplicaDescriptor choose(ReplicaList list, String ownEndpoint) {
        ReplicaDescriptor any = null;
        for (ReplicaDescriptor d : list.replicas()) {
            if (d.readableMemory()) {
                if (d.endpoint().equals(ownEndpoint)) {
                    return d;
                }
                if (any == null) {
                    any = d;
                }
            }
        }
        return any;
    }

    /**
     * Gets keys into their parts.
     *
     * @param lists  replica lists already fetched (with {@code t0} the time before the fetch), or null
     * @return per key the bytes read or a negative code
     */
    long[] get(List<String> keys, long[][] addresses, long[][] sizes, List<Result<ReplicaList>> lists, long t0) {
        return get(keys, addresses, sizes, null, lists, t0);
    }

    /**
     * Gets keys into their parts; with {@code sourceOffsets}, part {@code p} of key {@code i} is the
     * object's bytes {@code [sourceOffsets[i][p], +sizes[i][p])} (ranges), else the parts take the
     * object's bytes in order from its start.
     *
     * @return per key the bytes read (ranges: the sum of the range sizes) or a negative code
     */
    long[] get(List<String> keys, long[][] addresses, long[][] sizes, long[][] sourceOffsets,
            List<Result<ReplicaList>> lists, long t0) {
        int n = keys.size();
        Args.parts(keys, addresses, sizes);
        if (sourceOffsets != null) {
            Args.parts(keys, sourceOffsets, sizes);
        }
        long[] codes = new long[n];
        if (lists == null) {
            t0 = System.nanoTime();
            try {
                lists = n == 1 ? List.of(master.getReplicaList(keys.getFirst())) : master.batchGetReplicaList(keys);
            } catch (StoreException e) {
                Arrays.fill(codes, e.errorCode());
                return codes;
            }
        }
        long[] result = new long[n];
        List<List<ReplicaDescriptor>> candidates = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            candidates.add(List.of());
            Result<ReplicaList> r = i < lists.size() ? lists.get(i) : Result.error(ErrorCode.RPC_FAIL.code());
            if (!r.ok()) {
                codes[i] = r.code();
                continue;
            }
            List<ReplicaDescriptor> c = readable(r.value(), endpoint);
            if (c.isEmpty()) {
                codes[i] = ErrorCode.REPLICA_IS_NOT_READY.code();
                continue;
            }
            long cap = 0;
            boolean inside = true;
            for (int p = 0; p < sizes[i].length; p++) {
                cap += sizes[i][p];
                if (sourceOffsets != null && (sourceOffsets[i][p] < 0 || sourceOffsets[i][p] + sizes[i][p] > c.getFirst().size())) {
                    inside = false;
                }
            }
            if (sourceOffsets == null ? c.getFirst().size() > cap : !inside) {
                codes[i] = ErrorCode.INVALID_PARAMS.code();
                continue;
            }
            candidates.set(i, c);
            result[i] = sourceOffsets == null ? c.getFirst().size() : cap;
        }
        // read each key from its first replica; a key whose read failed is read again from its next one
        int[] attempt = new int[n];
        boolean[] pending = new boolean[n];
        for (int i = 0; i < n; i++) {
            pending[i] = codes[i] == 0;
        }
        while (true) {
            Groups g = new Groups();
            for (int i = 0; i < n; i++) {
                if (!pending[i]) {
                    continue;
                }
                ReplicaDescriptor d = candidates.get(i).get(attempt[i]);
                if (sourceOffsets != null) {
                    for (int p = 0; p < sizes[i].length; p++) {
                        if (sizes[i][p] > 0) {
                            g.add(d.endpoint(), i, addresses[i][p], d.address() + sourceOffsets[i][p], sizes[i][p]);
                        }
                    }
                    continue;
                }
                long left = d.size();
                long off = 0;
                for (int p = 0; p < sizes[i].length && left > 0; p++) {
                    long len = Math.min(sizes[i][p], left);
                    if (len > 0) {
                        g.add(d.endpoint(), i, addresses[i][p], d.address() + off, len);
                    }
                    off += len;
                    left -= len;
                }
            }
            run(g, false, codes);
            boolean again = false;
            for (int i = 0; i < n; i++) {
                if (!pending[i]) {
                    continue;
                }
                pending[i] = false;
                if (codes[i] == ErrorCode.TRANSFER_FAIL.code() && attempt[i] + 1 < candidates.get(i).size()) {
                    LOG.debug("reading {} from {} failed; trying its replica at {}", keys.get(i),
                            candidates.get(i).get(attempt[i]).endpoint(), candidates.get(i).get(attempt[i] + 1).endpoint());
                    attempt[i]++;
                    codes[i] = 0;
                    pending[i] = true;
                    again = true;
                }
            }
            if (!again) {
                break;
            }
        }
        long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
        for (int i = 0; i < n; i++) {
            if (codes[i] == 0) {
                // the object may have been evicted and its space reused once the lease ran out
                codes[i] = elapsedMs > lists.get(i).value().leaseTtlMs() ? ErrorCode.LEASE_EXPIRED.code() : result[i];
            }
        }
        return codes;
    }
}
