package io.mooncake4j.examples;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.worker.KvRegistration;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Start-up of one tensor-parallel rank: configuration, KV-cache tensors, worker, registration. */
public final class WorkerStartup implements AutoCloseable {

    // The model: 4 layers, 4 KV heads of 64 fp16 values per token on this rank, 16 tokens per block.
    static final int NUM_LAYERS = 4;
    static final int KV_HEADS_PER_RANK = 4;
    static final int BLOCK_SIZE = 16;
    static final long PAGE_BYTES = 2L * BLOCK_SIZE * KV_HEADS_PER_RANK * 64 * 2; // K and V of one block

    final TransferEngine engine;
    final HostMemoryAllocator memory = new HostMemoryAllocator();
    final Map<String, List<KvCacheTensor>> kvCaches = new LinkedHashMap<>();
    KvCacheConfig kvCacheConfig;
    MooncakeConnectorWorker worker;
    KvRegistration registration;

    /**
     * Allocates {@code numBlocks} blocks per layer in host memory and registers them through a worker
     * over {@code engine} (not yet initialised: the worker initialises it), which this then owns.
     */
    public WorkerStartup(MooncakeConnectorConfig config, TransferEngine engine, int numBlocks) {
        this.engine = engine;
        try {
            start(config, numBlocks);
        } catch (RuntimeException | Error e) {
            close(); // a failed start-up leaves no thread, registration or memory behind
            throw e;
        }
    }

    private void start(MooncakeConnectorConfig config, int numBlocks) {
        // 1. The KV caches: one tensor per layer here (a layer may also have separate K and V tensors).
        List<String> layers = new ArrayList<>();
        for (int i = 0; i < NUM_LAYERS; i++) {
            String layer = "model.layers." + i + ".self_attn.attn";
            HostMemoryStorage storage = memory.allocate(PAGE_BYTES * numBlocks);
            kvCaches.put(layer, List.of(KvCacheTensor.contiguous(storage, storage.address(), numBlocks, PAGE_BYTES)));
            layers.add(layer);
        }
        // 2. What vLLM calls the KV cache config: groups of layers sharing a spec (block size, page bytes).
        kvCacheConfig = KvCacheConfig.of(new KvCacheGroup(layers, KvCacheSpec.fullAttention(BLOCK_SIZE, PAGE_BYTES)));
        // 3. The worker initialises the engine; the model facts matter for heterogeneous TP (P and D of
        //    different TP sizes): MLA or not, and the model's total KV-head count (not derivable from
        //    one rank's tensors once heads are replicated, so it is passed here).
        worker = MooncakeConnectorWorker.builder(config, engine, kvCacheConfig)
                .model(false, KV_HEADS_PER_RANK * config.tpSize())
                .build();
        // 4. One batch registration of every storage; a producer also starts its side channel and,
        //    on rank 0, the bootstrap server decode workers ask for its address.
        registration = worker.registerKvCaches(kvCaches);
    }

    /** Stops the worker's threads, then the engine (which drops the registrations), then frees the memory. */
    @Override
    public void close() {
        try {
            if (worker != null) {
                worker.close();
            }
        } finally {
            try {
                engine.close();
            } finally {
                memory.close();
            }
        }
    }

    /** Production start-up of a prefill (P) rank 0 of TP 1; run it and stop it with Ctrl-C. */
    public static void main(String[] args) throws InterruptedException {
        MooncakeConnectorConfig config = MooncakeConnectorConfig.builder()
                .kvRole(KvRole.KV_PRODUCER)
                .engineId("prefill-0")
                .protocol("tcp")
                .hostname("127.0.0.1")   // the address peers reach this worker at
                .tp(0, 1)
                .environment(System.getenv()) // VLLM_MOONCAKE_BOOTSTRAP_PORT (default 8998), ...
                .build();
        try (WorkerStartup rank = new WorkerStartup(config, TransferEngines.create(config.protocol()), 256)) {
            System.out.printf("registered %d storages; bootstrap server %s%n",
                    rank.registration.storages().size(), rank.worker.bootstrapServerUrl().orElse("none"));
            if (args.length > 0 && args[0].equals("--exit")) {
                return;
            }
            Thread.currentThread().join(); // serve until killed
        }
    }
}
