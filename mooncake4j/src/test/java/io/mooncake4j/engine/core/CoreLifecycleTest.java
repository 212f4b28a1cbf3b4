package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * The core's batches on {@link FaultTransport}s: task status of the asynchronous API (partial
 * failure, waiting tasks, Mooncake's free rule), the synchronous deadline and what giving a batch up
 * does (tasks TIMEOUT, every transport evicts it, a late completion touches no memory), and close
 * while slices are in flight (nothing hangs, every task ends). Deadlines are the events waited for;
 * nothing sleeps.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CoreLifecycleTest extends CoreFixture {

    /** A synchronous deadline short enough to reach in a test, long enough to route the slices first. */
    static final long SHORT_TIMEOUT_MS = 300;

    CoreEngine shortDeadlineInitiator(FaultTransport... transports) {
        CoreEngine e = engine(SHORT_TIMEOUT_MS, "", transports);
        assertEquals(0, e.registerMemory(local.address(), LEN, "cpu:0"));
        return e;
    }

    TransferStatus.State state(CoreEngine e, long batch, int task) {
        return e.getTransferStatus(batch, task).state();
    }

    // ------------------------------------------------------------------ batch status

    @Test
    void aBatchReportsEachTaskAndIsFreedOnlyOnceEveryTaskWasSeenTerminal() {
        FaultTransport tcp = new FaultTransport("far", 3).failSlice(2, SliceFailure.REJECTED);
        CoreEngine e = initiator(tcp);
        long batch = submitAsync(e);
        assertEquals(StatusCodes.BATCH_BUSY, e.freeBatchId(batch), "no task observed yet");
        for (int i = 0; i < N; i++) {
            TransferStatus s = e.getTransferStatus(batch, i);
            assertEquals(i == 2 ? TransferStatus.State.FAILED : TransferStatus.State.COMPLETED, s.state(), "task " + i);
            assertEquals(i == 2 ? 0 : Q, s.transferredBytes(), "task " + i);
        }
        assertEquals(StatusCodes.INVALID_ARGUMENT, e.getTransferStatus(batch, N).code(), "no such task");
        assertEquals(StatusCodes.INVALID_ARGUMENT, e.getTransferStatus(batch + 1000, 0).code(), "no such batch");
        assertEquals(StatusCodes.OK, e.freeBatchId(batch));
        assertEquals(StatusCodes.INVALID_ARGUMENT, e.freeBatchId(batch), "freed once");
        long next = e.allocateBatchId(1);
        assertTrue(next > batch, "ids are never reused");
    }

    @Test
    void aTaskATransportHoldsStaysWaitingAndKeepsItsBatch() {
        FaultTransport tcp = new FaultTransport("far", 3).dropSlice(1);
        CoreEngine e = initiator(tcp);
        long batch = submitAsync(e);
        assertEquals(TransferStatus.State.COMPLETED, state(e, batch, 0));
        assertEquals(TransferStatus.State.WAITING, state(e, batch, 1));
        for (int i = 2; i < N; i++) {
            assertEquals(TransferStatus.State.COMPLETED, state(e, batch, i));
        }
        assertEquals(StatusCodes.BATCH_BUSY, e.freeBatchId(batch), "a waiting task keeps its batch");
        assertEquals(StatusCodes.TOO_MANY_REQUESTS, e.submitTransfer(batch, List.of(new TransferRequest(
                TransferRequest.Opcode.WRITE, local.address(), 1, remote.address(), Q))), "capacity is fixed");
    }

    // ------------------------------------------------------------------ deadlines and giving up

    @Test
    void aSynchronousCallPastItsDeadlineTimesOutAndEveryTransportEvictsTheBatch() {
        FaultTransport shm = new FaultTransport("near", 1).refuseCanTransfer(true);
        FaultTransport tcp = new FaultTransport("far", 3).dropSlice(1);
        CoreEngine e = shortDeadlineInitiator(shm, tcp);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(-1, write(e));
            assertEquals(1, logs.matching(Level.WARN, "timed out (MC_TRANSFER_TIMEOUT)").size());
        }
        assertEquals(1, tcp.evictions().size(), "the transport holding the slice was told");
        assertEquals(1, shm.evictions().size(), "every transport is told, holding a slice or not");
        assertSame(tcp.evictions().get(0), shm.evictions().get(0), "the same batch");
        assertTrue(tcp.evictions().get(0).aborted(), "given up before eviction");
        assertEquals(1, tcp.abortedSlices(), "the dropped slice went with the eviction");
        assertEquals(0, tcp.droppedNow());
        assertEquals(0, write(e), "the thread's next call starts afresh");
        assertArrived();
    }

    @Test
    void aSliceHeldPastTheDeadlineNeverTouchesTheMemoryOfTheBatchGivenUp() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        FaultTransport tcp = new FaultTransport("far", 3).holdSlice(0, gate);
        CoreEngine e = shortDeadlineInitiator(tcp);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(-1, writeOne(e));
            assertEquals(1, logs.matching(Level.WARN, "timed out").size());
        }
        gate.countDown();
        assertTrue(tcp.awaitAbortedMove(30), "the held slice found its batch given up");
        assertEquals(0, tcp.completedSlices());
        assertEquals(0L, remote.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0), "no byte written after the abort");
    }

    // ------------------------------------------------------------------ close while in flight

    @Test
    void closeWhileSlicesAreInFlightEndsEveryTaskAndReleasesTheWaitingCaller() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        FaultTransport tcp = new FaultTransport("far", 3).holdSlice(0, gate).dropSlice(N);
        CoreEngine e = initiator(tcp); // ten-minute synchronous deadline: only close can end the call
        long batch = submitAsync(e);
        assertTrue(tcp.awaitHold(30), "slice 0 is held");
        CompletableFuture<Integer> sync = CompletableFuture.supplyAsync(() -> writeOne(e));
        assertTrue(tcp.awaitDrop(30), "the synchronous call's slice is dropped");
        assertEquals(TransferStatus.State.WAITING, state(e, batch, 0));

        e.close();
        assertEquals(-1, sync.get(30, TimeUnit.SECONDS), "the synchronous caller was released with a failure");
        assertTrue(tcp.isUninstalled());
        assertEquals(TransferStatus.State.FAILED, state(e, batch, 0), "the held task ended");
        for (int i = 1; i < N; i++) {
            assertEquals(TransferStatus.State.COMPLETED, state(e, batch, i), "task " + i + " kept its result");
        }
        gate.countDown();
        assertEquals(ErrorCodes.INVALID_ARGUMENT, e.allocateBatchId(1), "closed: no new batch");
        assertEquals(-1, writeOne(e), "closed: no new transfer");
        e.close(); // idempotent
    }

    @Test
    void closeEndsTheTasksOfATransportThatLosesItsSlices() {
        FaultTransport tcp = new FaultTransport("far", 3).dropEverySlice().loseOnUninstall();
        CoreEngine e = initiator(tcp);
        long batch = submitAsync(e);
        assertEquals(N, tcp.droppedNow());
        e.close();
        for (int i = 0; i < N; i++) {
            assertEquals(TransferStatus.State.FAILED, state(e, batch, i), "task " + i + " failed by the core itself");
        }
        assertEquals(StatusCodes.OK, e.freeBatchId(batch), "every task seen terminal: the batch can go");
    }
}
