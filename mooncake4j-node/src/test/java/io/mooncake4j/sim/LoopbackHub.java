package io.mooncake4j.sim;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.PullReqMeta;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;

/**
 * A test stand-in for the connector's worker side and data plane: P and D workers of the same TP
 * rank meet here by transfer id, and the D worker's blocks receive P's tail blocks by a direct
 * memory copy. Equal TP sizes only. A transfer whose id matches {@link #failWhen} is reported as a
 * failed load (per block ids) and P is told it finished (as after expiry). Public for the CLI tests.
 */
public final class LoopbackHub {

    private record Side(String reqId, KvCaches caches, int[][] blocks) {}

    private final Map<String, Side> ready = new HashMap<>();   // key transferId#rank
    private final Map<String, Side> pulls = new HashMap<>();
    private final Map<String, LoopbackWorker> workers = new HashMap<>(); // engineId#rank
    private volatile Predicate<String> failWhen = t -> false;

    public void failWhen(Predicate<String> p) {
        failWhen = p;
    }

    public SimEngine.WorkerFactory factory() {
        return (cfg, caches) -> {
            LoopbackWorker w = new LoopbackWorker(cfg, caches);
            if (cfg.isProducer() && cfg.bootstrapServerAddress().isPresent()) {
                // what the real worker does at registration: make the P rank known to D's /query
                try (BootstrapClient c = new BootstrapClient()) {
                    c.register("http://" + cfg.bootstrapServerAddress().get(), new RegisterWorkerPayload(
                            cfg.engineId(), cfg.dpRank(), cfg.tpRank(), cfg.ppRank(), "tcp://127.0.0.1:1"),
                            Duration.ofSeconds(5));
                }
            }
            synchronized (this) {
                workers.put(cfg.engineId() + "#" + cfg.tpRank(), w);
            }
            return w;
        };
    }

    private synchronized void offer(LoopbackWorker from, MooncakeConnectorMetadata meta) {
        int rank = from.cfg.tpRank();
        meta.reqsToSend().forEach((pReqId, send) -> {
            if (send.localBlockIds().length > 0) {
                String key = send.transferId() + "#" + rank;
                ready.put(key, new Side(pReqId, from.caches, send.localBlockIds()));
                match(key, from);
            }
        });
        for (Map<String, PullReqMeta> byReq : meta.reqsToRecv().values()) {
            for (PullReqMeta pm : byReq.values()) {
                String key = pm.transferId() + "#" + rank;
                pulls.put(key, new Side(pm.dReqId(), from.caches, pm.localBlockIds()));
                from.remoteEngine.put(key, pm.remoteEngineId());
                match(key, from);
            }
        }
    }

    private void match(String key, LoopbackWorker any) {
        Side p = ready.get(key);
        Side d = pulls.get(key);
        if (p == null || d == null) {
            return;
        }
        ready.remove(key);
        pulls.remove(key);
        String tid = key.substring(0, key.lastIndexOf('#'));
        int rank = any.cfg.tpRank();
        LoopbackWorker dw = null;
        LoopbackWorker pw = null;
        for (LoopbackWorker w : workers.values()) {
            if (w.caches == d.caches) {
                dw = w;
            }
            if (w.caches == p.caches) {
                pw = w;
            }
        }
        if (dw == null || pw == null || pw.cfg.tpRank() != rank) {
            throw new IllegalStateException("no worker pair for " + key);
        }
        if (failWhen.test(tid)) {
            Set<Integer> bad = new HashSet<>();
            for (int[] g : d.blocks) {
                for (int b : g) {
                    bad.add(b);
                }
            }
            dw.invalid.addAll(bad);
            dw.recving.add(d.reqId);
            dw.stats.recordFailedRecv();
            pw.sending.add(p.reqId);
            return;
        }
        long bytes = 0;
        for (int g = 0; g < d.blocks.length; g++) {
            int[] dst = d.blocks[g];
            int[] src = p.blocks[g];
            int off = src.length - dst.length;
            for (Map.Entry<String, List<KvCacheTensor>> e : d.caches.tensorsByLayer().entrySet()) {
                KvCacheTensor dt = e.getValue().getFirst();
                KvCacheTensor st = p.caches.tensorsByLayer().get(e.getKey()).getFirst();
                MemorySegment ds = dt.storage().hostSegment().orElseThrow();
                MemorySegment ss = st.storage().hostSegment().orElseThrow();
                for (int i = 0; i < dst.length; i++) {
                    long so = st.blockAddress(src[off + i]) - st.storage().address();
                    long dof = dt.blockAddress(dst[i]) - dt.storage().address();
                    MemorySegment.copy(ss, so, ds, dof, st.blockBytes());
                    bytes += st.blockBytes();
                }
            }
        }
        pw.stats.recordTransfer(0.001, bytes, 1);
        pw.sending.add(p.reqId);
        dw.recving.add(d.reqId);
    }

    /** Pending entries (both maps), for leak checks. */
    synchronized int pending() {
        return ready.size() + pulls.size();
    }

    final class LoopbackWorker implements SimWorker {
        final MooncakeConnectorConfig cfg;
        final KvCaches caches;
        final Map<String, String> remoteEngine = new HashMap<>();
        final Set<String> sending = new HashSet<>();
        final Set<String> recving = new HashSet<>();
        final Set<Integer> invalid = new HashSet<>();
        final MooncakeKvConnectorStats stats = new MooncakeKvConnectorStats();
        boolean closed;

        LoopbackWorker(MooncakeConnectorConfig cfg, KvCaches caches) {
            this.cfg = cfg;
            this.caches = caches;
        }

        @Override
        public void startLoadKv(MooncakeConnectorMetadata metadata) {
            offer(this, metadata);
        }

        @Override
        public TransferResults getTransferResults() {
            synchronized (LoopbackHub.this) {
                TransferResults r = new TransferResults(sending, recving, Set.of());
                sending.clear();
                recving.clear();
                return r;
            }
        }

        @Override
        public Set<Integer> getBlockIdsWithLoadErrors() {
            synchronized (LoopbackHub.this) {
                Set<Integer> r = Set.copyOf(invalid);
                invalid.clear();
                return r;
            }
        }

        @Override
        public Optional<MooncakeKvConnectorStats> getKvConnectorStats() {
            return stats.isEmpty() ? Optional.empty() : Optional.of(stats.cloneAndReset());
        }

        @Override
        public void close() {
            closed = true;
        }
    }
}
