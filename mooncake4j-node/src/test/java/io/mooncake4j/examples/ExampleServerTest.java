package io.mooncake4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.scheduler.RequestStatus;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.KvCacheTensor;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A unit test of {@link ExampleServer}: a prefill (P) and a decode (D) server in this JVM, each over
 * a {@link ScriptedTransferEngine} that copies bytes between the engines of the JVM, every port on
 * 127.0.0.1 chosen by the OS ({@link MooncakeConnectorConfig#forTesting}).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ExampleServerTest {

    static final int BLOCKS = 32;

    /** Writes a pattern of (layer, position in the request) into every layer's blocks. */
    static void writePattern(WorkerStartup rank, int[] blocks) {
        int layer = 0;
        for (List<KvCacheTensor> tensors : rank.kvCaches.values()) {
            for (int k = 0; k < blocks.length; k++) {
                block(tensors.getFirst(), blocks[k]).fill((byte) (layer * 31 + k + 1));
            }
            layer++;
        }
    }

    /** The number of bytes of the blocks that do not hold the pattern. */
    static long patternMismatches(WorkerStartup rank, int[] blocks) {
        long bad = 0;
        int layer = 0;
        for (List<KvCacheTensor> tensors : rank.kvCaches.values()) {
            for (int k = 0; k < blocks.length; k++) {
                MemorySegment b = block(tensors.getFirst(), blocks[k]);
                for (long i = 0; i < b.byteSize(); i++) {
                    bad += b.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) == (byte) (layer * 31 + k + 1) ? 0 : 1;
                }
            }
            layer++;
        }
        return bad;
    }

    static MemorySegment block(KvCacheTensor t, int block) {
        MemorySegment all = t.storage().hostSegment().orElseThrow();
        return all.asSlice(t.blockAddress(block) - t.storage().address(), t.blockBytes());
    }

    /** Steps both servers until {@code done}, failing after 20 s. */
    static void stepUntil(BooleanSupplier done, ExampleServer... servers) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "the servers did not finish within 20 s");
            for (ExampleServer s : servers) {
                s.step();
            }
            Thread.yield();
        }
    }

    @Test
    void aRequestsKvGoesFromPrefillToDecodeByteForByte() {
        MooncakeConnectorConfig pConfig = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        MooncakeConnectorConfig dConfig = MooncakeConnectorConfig.forTesting(KvRole.KV_CONSUMER).build();
        Map<String, Long> mismatches = new ConcurrentHashMap<>();
        try (WorkerStartup p = new WorkerStartup(pConfig, new ScriptedTransferEngine().copyData(true), BLOCKS);
             WorkerStartup d = new WorkerStartup(dConfig, new ScriptedTransferEngine().copyData(true), BLOCKS)) {
            ExampleServer prefill = new ExampleServer(pConfig, p, BLOCKS, (id, blocks) -> writePattern(p, blocks));
            ExampleServer decode = new ExampleServer(dConfig, d, BLOCKS,
                    (id, blocks) -> mismatches.put(id, patternMismatches(d, blocks)));
            // what a proxy does: the same transfer id to both, D told where P's bootstrap server is
            String bootstrap = p.worker.bootstrapServerUrl().orElseThrow();
            prefill.submit("req-1", 40, KvTransferParams.forRemoteDecode("xfer-1").asMap());
            decode.submit("req-1", 40,
                    KvTransferParams.forRemotePrefill("xfer-1", pConfig.engineId(), bootstrap).asMap());

            stepUntil(() -> decode.finished().containsKey("req-1") && prefill.freeBlockCount() == BLOCKS,
                    prefill, decode);

            assertEquals(RequestStatus.FINISHED_LENGTH_CAPPED, decode.finished().get("req-1"));
            assertEquals(0L, mismatches.get("req-1"), "bytes of D's blocks that differ from what P wrote");
        }
    }

    @Test
    void aTransferTheEngineFailsEndsTheDecodeRequestWithAnError() {
        MooncakeConnectorConfig pConfig = MooncakeConnectorConfig.forTesting(KvRole.KV_PRODUCER).build();
        MooncakeConnectorConfig dConfig = MooncakeConnectorConfig.forTesting(KvRole.KV_CONSUMER).build();
        ScriptedTransferEngine pEngine = new ScriptedTransferEngine().copyData(true);
        pEngine.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).alwaysReturn(ErrorCodes.SOCKET);
        try (WorkerStartup p = new WorkerStartup(pConfig, pEngine, BLOCKS);
             WorkerStartup d = new WorkerStartup(dConfig, new ScriptedTransferEngine().copyData(true), BLOCKS)) {
            ExampleServer prefill = new ExampleServer(pConfig, p, BLOCKS, (id, blocks) -> writePattern(p, blocks));
            ExampleServer decode = new ExampleServer(dConfig, d, BLOCKS, (id, blocks) -> { });
            String bootstrap = p.worker.bootstrapServerUrl().orElseThrow();
            prefill.submit("req-1", 40, KvTransferParams.forRemoteDecode("xfer-1").asMap());
            decode.submit("req-1", 40,
                    KvTransferParams.forRemotePrefill("xfer-1", pConfig.engineId(), bootstrap).asMap());

            stepUntil(() -> decode.finished().containsKey("req-1"), prefill, decode);

            assertEquals(RequestStatus.FINISHED_ERROR, decode.finished().get("req-1"));
            assertEquals(BLOCKS, decode.freeBlockCount(), "D frees the blocks of a failed load");
            assertTrue(pEngine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE) >= 1);
        }
    }
}
