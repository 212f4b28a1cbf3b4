package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An endpoint whose queue found no room must not be stranded when the completions that free room
 * all arrive between its room check and its registration with the poller (a lost wake-up: the
 * poller pumps waiting endpoints only after completions, and none come any more). The interleaving
 * is forced: the NIC holds the first work requests ({@code autoProgress(false)}), and at the moment
 * the submitter registers to wait for room (the QP is full by the engine's count, or the driver's
 * send queue refused the post with {@code ENOMEM}), the test lets them complete and waits until the
 * poller has handled them and gone idle.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaRoomWakeupTest {

    private static final int SLICE = 4096;
    /** Work requests the NIC (or the driver's send queue) holds before room runs out. */
    private static final int DEPTH = 4;

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine target;
    private CoreEngine initiator;

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        alloc.close();
    }

    @Test
    void completionsThatFreeRoomJustBeforeTheEndpointWaitsForRoomStillGetItPumped() {
        // one slice per task: the submitter posts DEPTH and queues DEPTH more, and its last pump finds the QP
        // full and registers; no later pump of its own follows (the batch is all dispatched)
        runWithCompletionsBeforeTheRegistration(DEPTH, 0, 2 * DEPTH);
    }

    @Test
    void aSendQueueFullOnPostIsRetriedWhenItsCompletionsCameBeforeTheRegistration() {
        // the driver's queue holds half of MC_MAX_WR: the post of the one chain of 2 × DEPTH fails with ENOMEM
        // after DEPTH, and the endpoint registers to wait for room
        runWithCompletionsBeforeTheRegistration(2 * DEPTH, DEPTH, 2 * DEPTH);
    }

    /**
     * Writes {@code tasks} one-slice tasks over one QP of {@code maxWr} work requests; the first
     * time the submitter is about to register to wait for room, the NIC completes everything held
     * and the poller handles it and goes idle. The write must still complete (before the fix it
     * stalled until MC_TRANSFER_TIMEOUT and returned -1).
     */
    private void runWithCompletionsBeforeTheRegistration(int maxWr, int sendQueueDepth, int tasks) {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        Map<String, String> env = Map.of("MC_SLICE_SIZE", Integer.toString(SLICE), "MC_MAX_WR",
                Integer.toString(maxWr), "MC_NUM_QP_PER_EP", "1", "MC_TRANSFER_TIMEOUT", "5");
        target = EmulatedEngines.started(fabric, "emu0", EmulatedEngines.config(env));
        initiator = EmulatedEngines.started(fabric, "emu1", EmulatedEngines.config(env));
        assertEquals(maxWr, RdmaTransport.in(initiator).settings().maxWr(), "no clamping: one QP of " + maxWr + " work requests");
        long bytes = (long) tasks * SLICE;
        HostMemoryStorage local = alloc.allocate(bytes);
        HostMemoryStorage remote = alloc.allocate(bytes);
        assertEquals(0, initiator.registerMemory(local.address(), bytes, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), bytes, "cpu:0"));
        long[] src = new long[tasks];
        long[] dst = new long[tasks];
        long[] len = new long[tasks];
        for (int i = 0; i < tasks; i++) {
            src[i] = local.address() + (long) i * SLICE;
            dst[i] = remote.address() + (long) i * SLICE;
            len[i] = SLICE;
        }
        String peer = target.getLocalSegmentName();
        assertEquals(0, initiator.batchTransferSyncWrite(peer, new long[] {src[0]}, new long[] {dst[0]},
                new long[] {SLICE}), "the endpoint is connected");
        List<RdmaEndpoint> eps = RdmaTransport.in(initiator).endpoints();
        assertEquals(1, eps.size());
        RdmaContext ctx = eps.get(0).ctx;
        for (int i = 0; i < tasks; i++) {
            local.segment().set(ValueLayout.JAVA_BYTE, (long) i * SLICE, (byte) (i + 1));
        }

        Thread submitter = Thread.currentThread();
        AtomicBoolean fired = new AtomicBoolean();
        AtomicReference<String> hookProblem = new AtomicReference<>();
        ctx.beforeAwaitRoom = () -> {
            if (Thread.currentThread() != submitter || !fired.compareAndSet(false, true)) {
                return;
            }
            // the submitter found no room (work held by the NIC) and is about to register: now the NIC completes
            // it all and the poller handles it and goes idle before the registration lands
            fabric.progress();
            if (!awaitTrue(() -> ctx.cqOutstanding() == 0)) {
                hookProblem.set("the poller did not handle the completions");
                return;
            }
            long idle = ctx.idleRounds();
            if (!awaitTrue(() -> ctx.idleRounds() > idle)) {
                hookProblem.set("the poller did not go idle");
            }
            fabric.autoProgress(true); // from here on work completes as it is posted
        };
        fabric.sendQueueDepth(sendQueueDepth).autoProgress(false);
        int rc = initiator.batchTransferSyncWrite(peer, src, dst, len);
        ctx.beforeAwaitRoom = null;
        assertTrue(fired.get(), "the submitter found no room and registered to wait for it");
        assertEquals(null, hookProblem.get());
        assertEquals(0, rc, "every slice was posted once room came back (no wait for MC_TRANSFER_TIMEOUT)");
        assertArrayEquals(local.segment().toArray(ValueLayout.JAVA_BYTE), remote.segment().toArray(
                ValueLayout.JAVA_BYTE));
        assertEquals(0, RdmaTransport.in(initiator).liveSlices(), "every slice returned to the pool");
    }

    /** Waits (at most 10 s) until {@code cond} holds. */
    private static boolean awaitTrue(BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.onSpinWait();
        }
        return true;
    }
}
