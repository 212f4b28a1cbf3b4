package io.mooncake4j.store;

import io.mooncake4j.engine.TransferEngine;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
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

    /** The fewest keys in one chunk of a pipelined put. */
    static final int PUT_CHUNK_MIN_KEYS = Integer.getInteger("mooncake4j.store.putChunkMinKeys", 16);

    /** The most chunks one put is cut into. */
    static final int PUT_CHUNKS = Integer.getInteger("mooncake4j.store.putChunks", 4);

    /** {@return how many chunks a put of {@code n} keys is cut into: 1 below two chunks' worth of keys} */
    static int putChunks(int n) {
        return n < 2 * PUT_CHUNK_MIN_KEYS ? 1 : Math.min(PUT_CHUNKS, n / PUT_CHUNK_MIN_KEYS);
    }

    /**
     * Puts (or with {@code upsert} overwrites) keys from their parts: the Put* or the Upsert* RPCs.
     * A batch of {@code 2 * PUT_CHUNK_MIN_KEYS} keys or more is cut into chunks (at most {@code PUT_CHUNKS})
     * pipelined on the master's connection: every chunk's BatchPutStart is sent at once, and while
     * the engine writes one chunk the master answers the next chunk's start and ends the chunk before
     * it, so that only the first chunk's start and the last chunk's end wait in line with the writes.
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
        int chunks = putChunks(n);
        int[] from = new int[chunks + 1];
        for (int c = 0; c <= chunks; c++) {
            from[c] = (int) ((long) n * c / chunks);
        }
        List<CompletableFuture<List<Result<List<ReplicaDescriptor>>>>> starts = new ArrayList<>(chunks);
        for (int c = 0; c < chunks; c++) {
            starts.add(start(keys.subList(from[c], from[c + 1]), Arrays.copyOfRange(totals, from[c], from[c + 1]), config,
                    upsert, n == 1));
        }
        Chunk[] done = new Chunk[chunks];
        if (chunks == 1) {
            done[0] = write(keys, addresses, sizes, totals, codes, 0, n, starts.getFirst(), upsert, n == 1);
        } else {
            // each chunk written as soon as its start is answered, the chunks' writes overlapping in the engine
            try (ExecutorService ex = Executors.newVirtualThreadPerTaskExecutor()) {
                List<Future<Chunk>> fs = new ArrayList<>(chunks);
                for (int c = 0; c < chunks; c++) {
                    int lo = from[c];
                    int hi = from[c + 1];
                    CompletableFuture<List<Result<List<ReplicaDescriptor>>>> st = starts.get(c);
                    fs.add(ex.submit(() -> write(keys, addresses, sizes, totals, codes, lo, hi, st, upsert, false)));
                }
                for (int c = 0; c < chunks; c++) {
                    done[c] = join(fs.get(c), codes, from[c], from[c + 1]);
                }
            }
        }
        for (Chunk ch : done) {
            if (ch == null) {
                continue;
            }
            if (ch.end != null) {
                try {
                    List<Result<Void>> e = MasterClient.await(ch.end);
                    for (int j = 0; j < ch.ended.length; j++) {
                        codes[ch.ended[j]] = j < e.size() ? e.get(j).code() : ErrorCode.RPC_FAIL.code();
                    }
                } catch (StoreException e) {
                    for (int i : ch.ended) {
                        codes[i] = e.errorCode();
                    }
                }
            }
            if (ch.revoke != null) {
                try {
                    List<Result<Void>> rv = MasterClient.await(ch.revoke);
                    for (int j = 0; j < rv.size(); j++) {
                        if (!rv.get(j).ok()) {
                            LOG.warn("PutRevoke of {} answered {}", ch.revoked.get(j), rv.get(j));
                        }
                    }
                } catch (StoreException e) {
                    // the master discards unfinished puts itself (put_start_discard_timeout_sec)
                    LOG.warn("PutRevoke of {} key(s) failed: {}", ch.revoked.size(), e.getMessage());
                }
            }
        }
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = (int) codes[i];
        }
        return out;
    }

    /** A written chunk's calls in flight: the end of its written keys, the revoke of the others. */
    private record Chunk(CompletableFuture<List<Result<Void>>> end, int[] ended, CompletableFuture<List<Result<Void>>> revoke,
            List<String> revoked) {}

    /** {@return a chunk's calls; a chunk whose writer failed unexpectedly fails its keys with TRANSFER_FAIL} */
    private static Chunk join(Future<Chunk> f, long[] codes, int lo, int hi) {
        try {
            return f.get();
        } catch (ExecutionException e) {
            LOG.warn("put of keys {}..{} failed", lo, hi - 1, e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (int i = lo; i < hi; i++) {
            if (codes[i] >= 0) {
                codes[i] = ErrorCode.TRANSFER_FAIL.code();
            }
        }
        return null;
    }

    /**
     * Writes keys {@code [lo, hi)} once their start is answered, and sends the end of the written ones
     * and the revoke of the others (not waiting for the answers). Touches only {@code codes[lo, hi)}.
     */
    private Chunk write(List<String> keys, long[][] addresses, long[][] sizes, long[] totals, long[] codes, int lo, int hi,
            CompletableFuture<List<Result<List<ReplicaDescriptor>>>> start, boolean upsert, boolean single) {
        List<Result<List<ReplicaDescriptor>>> st;
        try {
            st = MasterClient.await(start);
        } catch (StoreException e) {
            Arrays.fill(codes, lo, hi, e.errorCode());
            return null;
        }
        boolean[] started = new boolean[hi - lo];
        Groups g = new Groups();
        for (int i = lo; i < hi; i++) {
            Result<List<ReplicaDescriptor>> r = i - lo < st.size() ? st.get(i - lo) : Result.error(ErrorCode.RPC_FAIL.code());
            if (!r.ok()) {
                // another client put the key first: the value is there, which is what the caller wanted
                codes[i] = r.code() == ErrorCode.OBJECT_ALREADY_EXISTS.code() ? 0 : r.code();
                if (r.code() == ErrorCode.NO_AVAILABLE_HANDLE.code()) {
                    backpressure.incrementAndGet();
                }
                continue;
            }
            started[i - lo] = true;
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
        int[] idx = new int[hi - lo];
        List<String> revokes = new ArrayList<>();
        for (int i = lo; i < hi; i++) {
            if (started[i - lo] && codes[i] == 0) {
                idx[ends.size()] = i;
                ends.add(keys.get(i));
            } else if (started[i - lo]) {
                revokes.add(keys.get(i));
            }
        }
        return new Chunk(ends.isEmpty() ? null : end(ends, upsert, single && ends.size() == 1), Arrays.copyOf(idx, ends.size()),
                revokes.isEmpty() ? null : revoke(revokes, upsert, single && revokes.size() == 1), revokes);
    }

    /** The start of a chunk: sent now (a single key's RPC is answered before this returns). */
    private CompletableFuture<List<Result<List<ReplicaDescriptor>>>> start(List<String> keys, long[] totals,
            ReplicateConfig config, boolean upsert, boolean single) {
        try {
            if (single) {
                return CompletableFuture.completedFuture(List.of(upsert ? master.upsertStart(clientId, keys.getFirst(), totals[0], config)
                        : master.putStart(clientId, keys.getFirst(), totals[0], config)));
            }
            return upsert ? master.batchUpsertStartAsync(clientId, keys, totals, config)
                    : master.batchPutStartAsync(clientId, keys, totals, config);
        } catch (StoreException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** The end of a chunk's written keys: sent now (a single key's RPC is answered before this returns). */
    private CompletableFuture<List<Result<Void>>> end(List<String> keys, boolean upsert, boolean single) {
        try {
            if (single) {
                return CompletableFuture.completedFuture(List.of(upsert ? master.upsertEnd(clientId, keys.getFirst())
                        : master.putEnd(clientId, keys.getFirst(), null)));
            }
            return upsert ? master.batchUpsertEndAsync(clientId, keys) : master.batchPutEndAsync(clientId, keys);
        } catch (StoreException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** The revoke of a chunk's started keys that were not written: sent now. */
    private CompletableFuture<List<Result<Void>>> revoke(List<String> keys, boolean upsert, boolean single) {
        try {
            if (single) {
                return CompletableFuture.completedFuture(List.of(upsert ? master.upsertRevoke(clientId, keys.getFirst())
                        : master.putRevoke(clientId, keys.getFirst())));
            }
            return upsert ? master.batchUpsertRevokeAsync(clientId, keys) : master.batchPutRevokeAsync(clientId, keys);
        } catch (StoreException e) {
            return CompletableFuture.failedFuture(e);
        }
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
