package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Data-path scaling with many endpoints: the poller leaves idle endpoints alone (its cost follows the
 * busy ones), and the slice pool stays consistent under load.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaPollerScalingTest {

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine busy;
    private CoreEngine quiet;
    private CoreEngine initiator;

    @AfterEach
    void tearDown() {
        for (CoreEngine e : new CoreEngine[] {initiator, busy, quiet}) {
            if (e != null) {
                e.close();
            }
        }
        alloc.close();
    }

    @Test
    void completionsDoNotPumpEndpointsThatHaveNothingQueued() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        // small QPs, so the busy endpoint runs out of room and the poller must pump it
        Map<String, String> env = Map.of("MC_MAX_WR", "8", "MC_NUM_QP_PER_EP", "1", "MC_SLICE_SIZE", "4096");
        busy = EmulatedEngines.started(fabric, "emu0", EmulatedEngines.config(env));
        quiet = EmulatedEngines.started(fabric, "emu1", EmulatedEngines.config(env));
        initiator = EmulatedEngines.started(fabric, "emu2", EmulatedEngines.config(env));
        HostMemoryStorage local = alloc.allocate(1L << 20);
        HostMemoryStorage a = alloc.allocate(1L << 20);
        HostMemoryStorage b = alloc.allocate(4096);
        assertEquals(0, initiator.registerMemory(local.address(), 1L << 20, "cpu:0"));
        assertEquals(0, busy.registerMemory(a.address(), 1L << 20, "cpu:0"));
        assertEquals(0, quiet.registerMemory(b.address(), 4096, "cpu:0"));
        assertEquals(0, initiator.batchTransferSyncWrite(quiet.getLocalSegmentName(), new long[] {local.address()},
                new long[] {b.address()}, new long[] {4096}));
        RdmaEndpoint idle = RdmaTransport.in(initiator).endpoints().stream().filter(e -> e.peerNicPath.endsWith("@emu1")).findFirst()
                .orElse(null);
        assertNotNull(idle);
        int before = idle.pumpCount();
        fabric.autoProgress(false); // completions arrive only when the "NIC" progresses: room runs out
        Thread nic = Thread.ofPlatform().daemon(true).start(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                fabric.progress();
                Thread.onSpinWait();
            }
        });
        try {
            local.segment().fill((byte) 7);
            assertEquals(0, initiator.batchTransferSyncWrite(busy.getLocalSegmentName(), new long[] {local.address()},
                    new long[] {a.address()}, new long[] {1L << 20}), "256 slices through 8 send-queue slots");
        } finally {
            nic.interrupt();
        }
        assertArrayEquals(local.segment().toArray(ValueLayout.JAVA_BYTE), a.segment().toArray(ValueLayout.JAVA_BYTE));
        assertEquals(before, idle.pumpCount(), "the idle endpoint was not locked by the poller");
        RdmaEndpoint hot = RdmaTransport.in(initiator).endpoints().stream().filter(e -> e.peerNicPath.endsWith("@emu0")).findFirst()
                .orElseThrow();
        assertTrue(hot.pumpCount() > 1 + 256 / 8 / 2, "the busy endpoint was pumped after completions: "
                + hot.pumpCount());
    }

    @Test
    void concurrentPostersOnOneContextNeverOverrunItsCq() throws Exception {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        // a CQ of 8 entries shared by two endpoints whose QPs could take 64 each
        Map<String, String> env = Map.of("MC_MAX_CQE_PER_CTX", "8", "MC_NUM_QP_PER_EP", "2", "MC_SLICE_SIZE", "4096");
        busy = EmulatedEngines.started(fabric, "emu0", EmulatedEngines.config(env));
        quiet = EmulatedEngines.started(fabric, "emu1", EmulatedEngines.config(env));
        initiator = EmulatedEngines.started(fabric, "emu2", EmulatedEngines.config(env));
        HostMemoryStorage local = alloc.allocate(1L << 20);
        HostMemoryStorage a = alloc.allocate(1L << 20);
        HostMemoryStorage b = alloc.allocate(1L << 20);
        assertEquals(0, initiator.registerMemory(local.address(), 1L << 20, "cpu:0"));
        assertEquals(0, busy.registerMemory(a.address(), 1L << 20, "cpu:0"));
        assertEquals(0, quiet.registerMemory(b.address(), 1L << 20, "cpu:0"));
        fabric.autoProgress(false);
        Thread nic = Thread.ofPlatform().daemon(true).start(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                fabric.progress();
                Thread.onSpinWait();
            }
        });
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<Integer>> results = new java.util.ArrayList<>();
            for (int t = 0; t < 8; t++) {
                CoreEngine to = t % 2 == 0 ? busy : quiet;
                long dst = (t % 2 == 0 ? a : b).address() + (t / 2) * (256L << 10);
                long src = local.address() + (t / 2) * (256L << 10);
                results.add(pool.submit(() -> {
                    int rc = 0;
                    for (int r = 0; r < 10 && rc == 0; r++) {
                        rc = initiator.batchTransferSyncWrite(to.getLocalSegmentName(), new long[] {src},
                                new long[] {dst}, new long[] {256L << 10});
                    }
                    return rc;
                }));
            }
            for (Future<Integer> f : results) {
                assertEquals(0, f.get(50, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
            nic.interrupt();
        }
        assertEquals(0, RdmaTransport.in(initiator).failedCompletions(), "no CQ overrun, no flushed work");
        assertEquals(0, RdmaTransport.in(initiator).liveSlices());
    }

    @Test
    void theSlicePoolHandsOutEachSliceOnceAcrossThreads() throws Exception {
        Slice.Pool pool = new Slice.Pool();
        Set<Integer> holding = java.util.concurrent.ConcurrentHashMap.newKeySet();
        ExecutorService platform = Executors.newFixedThreadPool(4);
        ExecutorService virtual = Executors.newVirtualThreadPerTaskExecutor();
        try {
            List<Future<Set<Integer>>> rounds = new java.util.ArrayList<>();
            for (int t = 0; t < 8; t++) {
                ExecutorService ex = t % 2 == 0 ? platform : virtual;
                rounds.add(ex.submit(() -> {
                    Set<Integer> seen = new HashSet<>();
                    for (int r = 0; r < 200; r++) {
                        Slice[] held = new Slice[100];
                        for (int i = 0; i < held.length; i++) {
                            held[i] = pool.acquire();
                            assertTrue(holding.add(held[i].id), "slice " + held[i].id + " handed out twice");
                            assertTrue(held[i].batch == null, "a released slice carries no references");
                            held[i].task = i;
                        }
                        for (Slice s : held) {
                            seen.add(s.id);
                            holding.remove(s.id);
                            pool.release(s);
                        }
                    }
                    return seen;
                }));
            }
            for (Future<Set<Integer>> f : rounds) {
                assertTrue(!f.get(30, TimeUnit.SECONDS).isEmpty());
            }
        } finally {
            platform.shutdownNow();
            virtual.shutdownNow();
        }
        assertEquals(0, pool.live());
    }
}
