package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The RDMA side of the handshake runs its blocking verbs calls on platform threads. (That
 * openSegment holds no engine-wide lock across a fetch is the core's, checked for every transport by
 * {@code TransferEngineContractTest.anUnresponsivePeerStallsOnlyItsOwnOpeners}.)
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaOpenSegmentTest {

    private CoreEngine target;
    private CoreEngine initiator;
    private final ExecutorService pool = Executors.newCachedThreadPool();

    @AfterEach
    void tearDown() throws Exception {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
    }

    @Test
    void blockingVerbsCallsOfBothHandshakeSidesRunOnPlatformThreads() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        target = EmulatedEngines.started(fabric, "emu0");
        initiator = EmulatedEngines.started(fabric, "emu1");
        try (io.mooncake4j.memory.HostMemoryAllocator alloc = new io.mooncake4j.memory.HostMemoryAllocator()) {
            io.mooncake4j.memory.HostMemoryStorage l = alloc.allocate(65536);
            io.mooncake4j.memory.HostMemoryStorage r = alloc.allocate(65536);
            assertEquals(0, initiator.registerMemory(l.address(), 65536, "cpu:0"));
            assertEquals(0, target.registerMemory(r.address(), 65536, "cpu:0"));
            // the active side connects on its connector thread, the passive side answers on the handshake server
            assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {l.address()},
                    new long[] {r.address()}, new long[] {65536}));
        }
        assertEquals(0, fabric.virtualControlCalls(), "ibv_create_qp / ibv_modify_qp never on a virtual thread");
    }
}
