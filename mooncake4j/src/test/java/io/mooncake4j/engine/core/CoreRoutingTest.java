package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.EngineCounters;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * The core's per-slice routing on {@link FaultTransport}s: the first capable transport in the
 * core's order takes a slice, a retryable failure moves it to the next one (at most one attempt per
 * transport), a final one ends it, UNREACHABLE takes a transport off the peer, and the counters say
 * so ({@link CoreFixture}: two engines in this JVM).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CoreRoutingTest extends CoreFixture {

    // ------------------------------------------------------------------ selection and fallback

    @Test
    void everySliceGoesToTheFirstTransportInTheCoresOrder() {
        FaultTransport shm = new FaultTransport("near", 1);
        FaultTransport tcp = new FaultTransport("far", 3);
        CoreEngine e = initiator(tcp, shm);
        assertEquals(List.of("near", "far"), e.transportNames(), "installed in the core's order, not the offer's");
        assertEquals(0, write(e));
        assertArrived();
        assertEquals(N, shm.submitted());
        assertEquals(0, tcp.submitted());
        assertEquals(Map.of("near", LEN, "far", 0L), e.bytesByTransport());
        assertEquals(0, e.fallbackSlices());
    }

    @Test
    void aRetryableFailureMovesTheSliceToTheNextTransportAndIsCounted() {
        for (SliceFailure kind : List.of(SliceFailure.TRANSIENT, SliceFailure.UNREACHABLE)) {
            FaultTransport shm = new FaultTransport("near", 1).failSlice(1, kind);
            FaultTransport tcp = new FaultTransport("far", 3);
            CoreEngine e = initiator(shm, tcp);
            remote.segment().fill((byte) 0);
            try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
                assertEquals(0, write(e), kind + ": the slice arrived over tcp");
                assertArrived();
                assertEquals(1, logs.matching(Level.WARN, "could not move a slice").size(), kind + ": logged once");
            }
            assertEquals(N, shm.submitted(), kind.name());
            assertEquals(1, tcp.submitted(), kind + ": only the failed slice moved on");
            assertEquals(1, e.fallbackSlices(), kind.name());
            assertEquals(1, e.counters().fallbackSlices(), kind + ": in the engine's counters too");
            assertEquals(Map.of("near", LEN, "far", Q), e.bytesByTransport(), kind + ": a fallback counts for both");
        }
    }

    @Test
    void aFailureReportedOnTheBatchGoesThroughTheCoresFallbackToo() {
        FaultTransport first = new FaultTransport("near", 1).failThroughBatch().failSlice(1, SliceFailure.TRANSIENT)
                .failSlice(2, SliceFailure.REJECTED);
        FaultTransport next = new FaultTransport("far", 3);
        CoreEngine e = initiator(first, next);
        remote.segment().fill((byte) 0);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(-1, write(e), "the rejected slice fails its transfer");
            assertEquals(1, logs.matching(Level.WARN, "could not move a slice").size());
        }
        assertEquals(1, next.submitted(), "only the retryable one moved on: no transport skips the fallback");
        assertEquals(1, e.fallbackSlices());
        TaskBatch b = new TaskBatch(7, 1);
        b.append(io.mooncake4j.engine.TransferRequest.Opcode.WRITE.wire(), 0, 0, 0, 1);
        assertTrue(b.fail(0, "near", SliceFailure.TRANSIENT, "x"), "a batch no router took still ends the task");
        assertEquals(TaskBatch.FAILED, b.state(0));
    }

    @Test
    void aFinalFailureEndsTheSliceWithoutFallback() {
        for (SliceFailure kind : List.of(SliceFailure.REJECTED, SliceFailure.TIMEOUT)) {
            FaultTransport shm = new FaultTransport("near", 1).failSlice(2, kind);
            FaultTransport tcp = new FaultTransport("far", 3);
            CoreEngine e = initiator(shm, tcp);
            long batch = submitAsync(e);
            TransferStatus.State expected = kind == SliceFailure.TIMEOUT ? TransferStatus.State.TIMEOUT
                    : TransferStatus.State.FAILED;
            for (int i = 0; i < N; i++) {
                TransferStatus s = e.getTransferStatus(batch, i);
                assertEquals(i == 2 ? expected : TransferStatus.State.COMPLETED, s.state(), kind + " task " + i);
                assertEquals(i == 2 ? 0 : Q, s.transferredBytes(), kind + " task " + i);
            }
            assertEquals(0, tcp.submitted(), kind + ": no other transport tried");
            assertEquals(0, e.fallbackSlices(), kind.name());
            shm.failSlice(N + 1, kind);
            assertEquals(-1, write(e), kind + ": the synchronous call fails as a whole");
            assertEquals(0, tcp.submitted(), kind + ": no other transport tried");
        }
    }

    @Test
    void aSliceIsTriedAtMostOncePerTransport() {
        FaultTransport shm = new FaultTransport("near", 1).failEverySlice(SliceFailure.TRANSIENT);
        FaultTransport rdma = new FaultTransport("middle", 2).failEverySlice(SliceFailure.TRANSIENT);
        FaultTransport tcp = new FaultTransport("far", 3).failEverySlice(SliceFailure.TRANSIENT);
        CoreEngine e = initiator(shm, rdma, tcp);
        assertEquals(-1, writeOne(e));
        assertEquals(1, shm.submitted());
        assertEquals(1, rdma.submitted());
        assertEquals(1, tcp.submitted(), "the last transport's failure is final");
        assertEquals(2, e.fallbackSlices());
    }

    @Test
    void unreachableTakesTheTransportOffThePeerTransientDoesNot() {
        FaultTransport shm = new FaultTransport("near", 1).failSlice(0, SliceFailure.TRANSIENT)
                .failSlice(1, SliceFailure.UNREACHABLE);
        FaultTransport tcp = new FaultTransport("far", 3);
        CoreEngine e = initiator(shm, tcp);
        assertEquals(0, writeOne(e));
        assertEquals(1, shm.submitted());
        assertEquals(0, writeOne(e), "after a transient failure the peer is offered shm again");
        assertEquals(2, shm.submitted());
        assertEquals(2, tcp.submitted());
        assertEquals(0, writeOne(e));
        assertEquals(2, shm.submitted(), "after UNREACHABLE shm is not offered this peer");
        assertEquals(3, tcp.submitted(), "tcp directly");
        assertEquals(2, e.fallbackSlices(), "routed directly: no third fallback");
        assertArrayEquals(local.segment().asSlice(0, Q).toArray(ValueLayout.JAVA_BYTE),
                remote.segment().asSlice(0, Q).toArray(ValueLayout.JAVA_BYTE));
    }

    @Test
    void aTransportThatRefusesCanTransferIsPassedOver() {
        FaultTransport shm = new FaultTransport("near", 1).refuseCanTransfer(true);
        FaultTransport tcp = new FaultTransport("far", 3);
        CoreEngine e = initiator(shm, tcp);
        assertEquals(0, write(e));
        assertArrived();
        assertEquals(0, shm.submitted());
        assertEquals(N, tcp.submitted());
        assertEquals(0, e.fallbackSlices(), "passed over at selection, not a fallback");
    }

    @Test
    void aSliceNoTransportTakesFailsAndIsCountedUnroutable() {
        FaultTransport tcp = new FaultTransport("far", 3).refuseCanTransfer(true);
        CoreEngine e = initiator(tcp);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(-1, writeOne(e));
            assertEquals(1, logs.matching(Level.WARN, "no installed transport reaches").size());
        }
        EngineCounters c = e.counters();
        assertEquals(1, c.unroutableSlices());
        assertEquals(0, c.fallbackSlices());
        assertEquals(0, tcp.submitted());
    }

    @Test
    void aPeerNoTransportReachesIsRefusedAtSubmission() {
        FaultTransport tcp = new FaultTransport("far", 3).unreachable(true);
        CoreEngine e = initiator(tcp);
        long seg = e.openSegment(target.getLocalSegmentName());
        long batch = e.allocateBatchId(1);
        assertEquals(StatusCodes.NOT_SUPPORTED_TRANSPORT, e.submitTransfer(batch, List.of(new TransferRequest(
                TransferRequest.Opcode.WRITE, local.address(), seg, remote.address(), Q))));
        assertEquals(0, tcp.submitted());
    }

    @Test
    void aRangeOutsideRegisteredMemoryFailsBeforeAnyTransport() {
        FaultTransport tcp = new FaultTransport("far", 3);
        CoreEngine e = initiator(tcp);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(-1, e.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                    new long[] {remote.address() + LEN - 8}, new long[] {Q}));
            assertEquals(-1, e.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address() + LEN - 8},
                    new long[] {remote.address()}, new long[] {Q}));
            assertEquals(1, logs.matching(Level.WARN, "not inside the peer's registered buffers").size());
            assertEquals(1, logs.matching(Level.WARN, "not inside registered memory").size());
        }
        assertEquals(0, tcp.submitted());
    }

    // ------------------------------------------------------------------ installation and registration

    @Test
    void anOptionalTransportThatCannotInstallIsSkippedARequiredOneFailsInitialize() {
        FaultTransport shm = new FaultTransport("near", 1).failInstall("no shared memory here");
        FaultTransport tcp = new FaultTransport("far", 3);
        CoreEngine e = initiator(shm, tcp);
        assertEquals(List.of("far"), e.transportNames());
        assertEquals(0, write(e));
        assertArrived();

        FaultTransport shm2 = new FaultTransport("near", 1).failInstall("no shared memory here");
        FaultTransport tcp2 = new FaultTransport("far", 3).companion();
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            CoreEngine required = engine(600_000, "near", shm2, tcp2);
            assertEquals(0, required.getRpcPort(), "initialize failed: no RPC port kept");
            assertTrue(required.lastError().contains("no shared memory here"), required.lastError());
            assertEquals(1, logs.matching(Level.ERROR, "no shared memory here").size());
        }
        assertFalse(tcp2.isInstalled(), "nothing installed after the required transport failed");
    }

    @Test
    void aRegistrationOneTransportRefusesIsUndoneEverywhere() {
        FaultTransport shm = new FaultTransport("near", 1);
        FaultTransport tcp = new FaultTransport("far", 3).failRegister(ErrorCodes.INVALID_ARGUMENT);
        CoreEngine e = engine(600_000, "", shm, tcp);
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            assertEquals(ErrorCodes.INVALID_ARGUMENT, e.registerMemory(local.address(), LEN, "cpu:0"));
            assertEquals(1, logs.matching(Level.ERROR, "transport far refused").size());
        }
        assertEquals(-1, writeOne(e), "the refused buffer is not registered");
        assertEquals(0, shm.submitted() + tcp.submitted());
        tcp.failRegister(0);
        assertEquals(0, e.registerMemory(local.address(), LEN, "cpu:0"), "nothing of the refused registration was kept");
        assertEquals(0, writeOne(e));
    }
}
