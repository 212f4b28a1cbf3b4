package io.mooncake4j.examples;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.scheduler.KvCacheBlocks;
import io.mooncake4j.connector.scheduler.MatchedTokens;
import io.mooncake4j.connector.scheduler.MooncakeConnectorScheduler;
import io.mooncake4j.connector.scheduler.Request;
import io.mooncake4j.connector.scheduler.RequestFinishedResult;
import io.mooncake4j.connector.scheduler.RequestStatus;
import io.mooncake4j.connector.worker.KvConnectorTransferResults;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;

/**
 * The part of an inference server that drives the Mooncake connector, for one engine of TP 1: a
 * waiting queue, a block pool, and a step loop calling the scheduler hooks and the worker in vLLM's
 * order. Every request is prefill-only on a producer (P, {@code max_tokens=1}) and one decode step
 * on a consumer (D). Confined to one thread, the step loop's (as vLLM's scheduler is).
 */
public final class ExampleServer {

    /** The model's forward pass over a request's blocks (a real server runs attention here). */
    @FunctionalInterface
    public interface Model {
        void forward(String requestId, int[] blockIds);
    }

    /** One request; the connector reads it through {@link Request}. */
    static final class Req implements Request {
        final String id;
        final int promptTokens;
        final Map<String, Object> params; // the request's own mutable map: the connector writes to it
        RequestStatus status = RequestStatus.WAITING;
        int[] blocks = new int[0];

        Req(String id, int promptTokens, Map<String, Object> params) {
            this.id = id;
            this.promptTokens = promptTokens;
            this.params = params;
        }

        @Override
        public String requestId() {
            return id;
        }

        @Override
        public int numPromptTokens() {
            return promptTokens;
        }

        @Override
        public Map<String, Object> kvTransferParams() {
            return params;
        }

        @Override
        public RequestStatus status() {
            return status;
        }
    }

    private final MooncakeConnectorScheduler scheduler;
    private final MooncakeConnectorWorker worker;
    private final Model model;
    private final int blockSize;
    private final Deque<Integer> freeBlocks = new ArrayDeque<>();
    private final Deque<Req> waiting = new ArrayDeque<>();
    private final List<Req> running = new ArrayList<>();
    private final Map<String, Req> loading = new HashMap<>();      // D: waiting for remote KV
    private final Set<Integer> loadErrorBlocks = new HashSet<>(); // D: blocks whose load failed
    private final Map<String, Req> sending = new HashMap<>();      // P: blocks kept until sent
    private final Map<String, RequestStatus> finished = new LinkedHashMap<>();
    private Consumer<MooncakeKvConnectorStats> statsSink = stats -> { };

    /** A server over a started rank ({@link WorkerStartup}) with {@code numBlocks} blocks. */
    public ExampleServer(MooncakeConnectorConfig config, WorkerStartup rank, int numBlocks, Model model) {
        this.worker = rank.worker;
        this.model = model;
        this.blockSize = WorkerStartup.BLOCK_SIZE;
        this.scheduler = new MooncakeConnectorScheduler(config, rank.kvCacheConfig, blockSize);
        for (int b = 0; b < numBlocks; b++) {
            freeBlocks.add(b);
        }
    }

    /** Where each step's transfer statistics go (logging, or Micrometer: {@code MooncakeConnectorMetrics::record}). */
    public void onStats(Consumer<MooncakeKvConnectorStats> sink) {
        this.statsSink = sink;
    }

    /** Queues a request with the {@code kv_transfer_params} the proxy gave it (a mutable map). */
    public void submit(String requestId, int promptTokens, Map<String, Object> kvTransferParams) {
        waiting.add(new Req(requestId, promptTokens, kvTransferParams));
    }

    /** One engine step: schedule, hand the connector metadata to the worker, run the model, collect. */
    public void step() {
        // 1. Schedule: ask the connector how many tokens come from the remote engine, allocate, tell it.
        while (!waiting.isEmpty() && freeBlocks.size() >= blocksFor(waiting.peek())) {
            Req r = waiting.poll();
            MatchedTokens matched = scheduler.getNumNewMatchedTokens(r, 0); // 0: no local prefix-cache hit
            r.blocks = allocate(blocksFor(r));
            scheduler.updateStateAfterAlloc(r, KvCacheBlocks.ofUnhashed(r.blocks), matched.numExternalTokens());
            if (matched.loadKvAsync()) {
                r.status = RequestStatus.WAITING_FOR_REMOTE_KVS; // D: the KV arrives from P
                loading.put(r.id, r);
            } else {
                r.status = RequestStatus.RUNNING;
                running.add(r);
            }
        }
        // 2. The step's connector metadata goes to the worker (to every TP rank's worker).
        worker.startLoadKv(scheduler.buildConnectorMeta());
        // 3. The forward pass; each request here is done after one step (P: max_tokens=1).
        for (Req r : running) {
            model.forward(r.id, r.blocks);
            r.status = RequestStatus.FINISHED_LENGTH_CAPPED;
            finish(r);
        }
        running.clear();
        // 4. What the worker finished since the last step.
        KvConnectorTransferResults results = worker.getTransferResults();
        for (String id : results.finishedSending()) {
            Req r = sending.remove(id);
            if (r != null) {
                free(r.blocks); // P: D has its copy now
            }
        }
        // Load errors may be reported a step before the request's finish: keep them until it arrives
        // (vLLM's scheduler marks the request that owns the blocks, whichever step that is).
        loadErrorBlocks.addAll(worker.getBlockIdsWithLoadErrors());
        for (String id : results.finishedRecving()) {
            Req r = loading.remove(id);
            if (r == null) {
                continue;
            }
            boolean badBlocks = false;
            for (int b : r.blocks) {
                badBlocks |= loadErrorBlocks.remove(b);
            }
            boolean failed = results.failedRecving().contains(id) || badBlocks;
            if (failed) {
                r.status = RequestStatus.FINISHED_ERROR; // a real server may recompute the prefill instead
                finish(r);
            } else {
                r.status = RequestStatus.RUNNING; // D decodes from the received KV in the next step
                running.add(r);
            }
        }
        // 5. The step's transfer statistics (drained: each transfer is reported once).
        worker.getKvConnectorStats().ifPresent(statsSink);
    }

    /** Tells the connector a request ended; P keeps its blocks until they are sent. */
    private void finish(Req r) {
        RequestFinishedResult f = scheduler.requestFinished(r, r.blocks);
        if (f.delayFreeBlocks()) {
            sending.put(r.id, r);
        } else {
            free(r.blocks);
        }
        finished.put(r.id, r.status);
    }

    /** The requests that ended, with their final status. */
    public Map<String, RequestStatus> finished() {
        return Map.copyOf(finished);
    }

    /** Blocks not held by any request (P frees a request's blocks once they were sent). */
    public int freeBlockCount() {
        return freeBlocks.size();
    }

    private int blocksFor(Req r) {
        return (r.promptTokens + blockSize - 1) / blockSize;
    }

    private int[] allocate(int n) {
        int[] ids = new int[n];
        for (int i = 0; i < n; i++) {
            ids[i] = freeBlocks.poll();
        }
        return ids;
    }

    private void free(int[] blocks) {
        for (int b : blocks) {
            freeBlocks.add(b);
        }
    }
}
