package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.rdma.EmulatedRdmaProvider.Transition;
import io.mooncake4j.engine.rdma.RdmaProvider.CompletionQueue;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.engine.rdma.RdmaProvider.QueuePair;
import io.mooncake4j.engine.rdma.verbs.IbvPd;
import io.mooncake4j.engine.rdma.verbs.IbvQp;
import io.mooncake4j.engine.rdma.verbs.QpCapabilities;
import io.mooncake4j.engine.rdma.verbs.RtrAttributes;
import io.mooncake4j.engine.rdma.verbs.RtsAttributes;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.VerbsException;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The emulated verbs provider: RC state machine, data movement, completions and error
 * semantics, teardown order. The QPs are connected with {@link QpBringUp}, as the transport will.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class EmulatedVerbsTest {

    private static final int ALL_ACCESS = IbvPd.ACCESS_LOCAL_WRITE | IbvPd.ACCESS_REMOTE_WRITE | IbvPd.ACCESS_REMOTE_READ;
    private static final int SIZE = 1 << 16;

    private final RdmaSettings settings = RdmaSettings.defaults();
    private EmulatedRdmaProvider provider;
    private Arena arena;
    private MemorySegment srcMem;
    private MemorySegment dstMem;
    private Device a;
    private Device b;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private QueuePair qpA;
    private QueuePair qpB;
    private MemoryRegion srcMr;
    private MemoryRegion dstMr;
    private SendWorkRequests wrs;
    private WorkCompletions wc;

    @BeforeEach
    void setUp() {
        provider = new EmulatedRdmaProvider("emu0", "emu1");
        arena = Arena.ofConfined();
        srcMem = arena.allocate(SIZE, 4096);
        dstMem = arena.allocate(SIZE, 4096);
        for (int i = 0; i < SIZE; i++) {
            srcMem.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
        }
        a = provider.open("emu0");
        b = provider.open("emu1");
        cqA = a.createCq(64);
        cqB = b.createCq(64);
        qpA = a.createRcQp(cqA, new QpCapabilities(8, 8, 1, 1, 0));
        qpB = b.createRcQp(cqB, new QpCapabilities(8, 8, 1, 1, 0));
        srcMr = a.register(srcMem.address(), SIZE, ALL_ACCESS);
        dstMr = b.register(dstMem.address(), SIZE, ALL_ACCESS);
        wrs = new SendWorkRequests(16);
        wc = new WorkCompletions(16);
    }

    @AfterEach
    void tearDown() {
        a.close();
        b.close();
        wrs.close();
        wc.close();
        arena.close();
    }

    private void connect() {
        int mtuA = a.port(1).activeMtu();
        int mtuB = b.port(1).activeMtu();
        QpBringUp.connect(qpA, new QpBringUp.Peer(b.gid(1, 1), 0, qpB.qpNum()), mtuA, 1, settings);
        QpBringUp.connect(qpB, new QpBringUp.Peer(a.gid(1, 1), 0, qpA.qpNum()), mtuB, 1, settings);
    }

    private void write(int i, long wrId, long srcOff, int len, long dstOff, int rkey, int flags) {
        wrs.set(i, wrId, SendWorkRequests.OPCODE_RDMA_WRITE, flags, srcMem.address() + srcOff, len, srcMr.lkey(),
                dstMem.address() + dstOff, rkey);
    }

    private boolean sameBytes(long srcOff, long dstOff, int len) {
        return MemorySegment.mismatch(srcMem, srcOff, srcOff + len, dstMem, dstOff, dstOff + len) == -1;
    }

    @Test
    void connectedPairShouldMoveBytesWithSignalledRdmaWrites() {
        connect();
        assertEquals(IbvQp.STATE_RTS, qpA.state());
        assertEquals(IbvQp.STATE_RTS, qpB.state());
        write(0, 100, 0, 4096, 8192, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        write(1, 101, 4096, 4096, 12288, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        wrs.chain(0, 2);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(2, cqA.poll(wc));
        assertEquals(100, wc.wrId(0));
        assertEquals(101, wc.wrId(1));
        assertEquals(WorkCompletions.SUCCESS, wc.status(0));
        assertEquals(WorkCompletions.OPCODE_RDMA_WRITE, wc.opcode(1));
        assertEquals(4096, wc.byteLen(1));
        assertEquals(qpA.qpNum(), wc.qpNum(0));
        assertTrue(sameBytes(0, 8192, 8192));
        assertEquals(0, cqB.poll(wc), "RDMA WRITE without immediate produces no completion at the target");
    }

    @Test
    void rdmaReadShouldCopyRemoteBytesIntoLocalMemory() {
        connect();
        // qpB reads from srcMem (registered on emu0) into dstMem (registered on emu1)
        wrs.set(0, 7, SendWorkRequests.OPCODE_RDMA_READ, SendWorkRequests.SEND_SIGNALED, dstMem.address(), 1024,
                dstMr.lkey(), srcMem.address() + 2048, srcMr.rkey());
        wrs.chain(0, 1);
        assertEquals(0, qpB.postSend(wrs, 0));
        assertEquals(1, cqB.poll(wc));
        assertEquals(WorkCompletions.OPCODE_RDMA_READ, wc.opcode(0));
        assertTrue(sameBytes(2048, 0, 1024));
    }

    @Test
    void unsignalledSuccessShouldProduceNoCompletion() {
        connect();
        write(0, 1, 0, 64, 0, dstMr.rkey(), 0);
        write(1, 2, 64, 64, 64, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        wrs.chain(0, 2);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(1, cqA.poll(wc));
        assertEquals(2, wc.wrId(0));
        assertTrue(sameBytes(0, 0, 128));
    }

    @Test
    void transitionsOutOfOrderShouldBeRejectedWithEinval() {
        VerbsException rtr = assertThrows(VerbsException.class, () -> qpA.modifyToRts(
                RtsAttributes.mooncake()));
        assertEquals(EmulatedRdmaProvider.EINVAL, rtr.errno());
        assertEquals(IbvQp.STATE_RESET, qpA.state());
        qpA.modifyToInit(1, 0, IbvQp.MOONCAKE_QP_ACCESS);
        wrs.set(0, 1, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, srcMem.address(), 8,
                srcMr.lkey(), dstMem.address(), dstMr.rkey());
        wrs.chain(0, 1);
        assertEquals(EmulatedRdmaProvider.EINVAL, qpA.postSend(wrs, 0), "posting before RTS fails");
        assertEquals(0, wrs.badIndex());
    }

    @Test
    void rtrFailureShouldBeReportedAndAFreshQpShouldConnect() {
        provider.failTransition(Transition.RTR, EmulatedRdmaProvider.EINVAL, 1);
        VerbsException e = assertThrows(VerbsException.class, () -> QpBringUp.connect(qpA,
                new QpBringUp.Peer(b.gid(1, 1), 0, qpB.qpNum()), 5, 1, settings));
        assertEquals("ibv_modify_qp", e.operation());
        assertEquals(IbvQp.STATE_INIT, qpA.state());
        // Mooncake rebuilds fresh QPs after a failed setup; QP numbers are not reused
        QueuePair fresh = a.createRcQp(cqA, new QpCapabilities(8, 8, 1, 1, 0));
        assertTrue(fresh.qpNum() != qpA.qpNum());
        QpBringUp.connect(fresh, new QpBringUp.Peer(b.gid(1, 1), 0, qpB.qpNum()), 5, 1, settings);
        assertEquals(IbvQp.STATE_RTS, fresh.state());
    }

    @Test
    void pathMtuAboveTheActiveMtuShouldFailRtr() {
        provider.activeMtu(3); // 1024
        VerbsException e = assertThrows(VerbsException.class, () -> {
            qpA.modifyToInit(1, 0, IbvQp.MOONCAKE_QP_ACCESS);
            qpA.modifyToRtr(RtrAttributes.mooncake(5, 4096, b.gid(1, 1), 1, 0, 0, 0, 1,
                    qpB.qpNum()));
        });
        assertEquals(EmulatedRdmaProvider.EINVAL, e.errno());
        // QpBringUp clamps to the active MTU and succeeds
        QpBringUp.connect(qpA, new QpBringUp.Peer(b.gid(1, 1), 0, qpB.qpNum()), a.port(1).activeMtu(), 1, settings);
        assertEquals(IbvQp.STATE_RTS, qpA.state());
    }

    @Test
    void wrongRkeyShouldFailWithRemoteAccessErrorAndFlushTheRest() {
        connect();
        provider.autoProgress(false);
        write(0, 1, 0, 512, 0, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        write(1, 2, 512, 512, 512, dstMr.rkey() + 1000, SendWorkRequests.SEND_SIGNALED);
        write(2, 3, 1024, 512, 1024, dstMr.rkey(), 0);
        wrs.chain(0, 3);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(0, cqA.poll(wc), "nothing completes before the work executes");
        provider.progress();
        assertEquals(3, cqA.poll(wc));
        assertEquals(List.of(WorkCompletions.SUCCESS, WorkCompletions.REM_ACCESS_ERR, WorkCompletions.WR_FLUSH_ERR),
                List.of(wc.status(0), wc.status(1), wc.status(2)));
        assertEquals(3, wc.wrId(2), "flushed requests complete even when unsignalled");
        assertEquals(IbvQp.STATE_ERR, qpA.state());
        assertTrue(sameBytes(0, 0, 512));
        assertEquals(0, dstMem.get(ValueLayout.JAVA_BYTE, 1024), "flushed write did not land");
    }

    @Test
    void targetWithoutRemoteWriteAccessShouldRefuseTheWrite() {
        MemoryRegion readOnly = b.register(dstMem.address(), SIZE, IbvPd.ACCESS_LOCAL_WRITE | IbvPd.ACCESS_REMOTE_READ);
        connect();
        write(0, 9, 0, 64, 0, readOnly.rkey(), SendWorkRequests.SEND_SIGNALED);
        wrs.chain(0, 1);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(1, cqA.poll(wc));
        assertEquals(WorkCompletions.REM_ACCESS_ERR, wc.status(0));
    }

    @Test
    void localKeyOutsideItsRegionShouldFailWithLocalProtectionError() {
        connect();
        wrs.set(0, 5, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, srcMem.address() + SIZE - 8,
                64, srcMr.lkey(), dstMem.address(), dstMr.rkey());
        wrs.chain(0, 1);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(1, cqA.poll(wc));
        assertEquals(WorkCompletions.LOC_PROT_ERR, wc.status(0));
    }

    @Test
    void injectedTransportErrorShouldHitTheChosenRequest() {
        connect();
        provider.failWorkRequests(1, 1, WorkCompletions.RETRY_EXC_ERR);
        for (int i = 0; i < 3; i++) {
            write(i, 10 + i, i * 64L, 64, i * 64L, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        }
        wrs.chain(0, 3);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(3, cqA.poll(wc));
        assertEquals(WorkCompletions.SUCCESS, wc.status(0));
        assertEquals(WorkCompletions.RETRY_EXC_ERR, wc.status(1));
        assertTrue(wc.vendorErr(1) != 0);
        assertEquals(WorkCompletions.WR_FLUSH_ERR, wc.status(2));
    }

    @Test
    void peerThatIsNotConnectedShouldExhaustRetries() {
        QpBringUp.connect(qpA, new QpBringUp.Peer(b.gid(1, 1), 0, qpB.qpNum()), 5, 1, settings); // qpB stays RESET
        write(0, 1, 0, 64, 0, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        wrs.chain(0, 1);
        assertEquals(0, qpA.postSend(wrs, 0));
        assertEquals(1, cqA.poll(wc));
        assertEquals(WorkCompletions.RETRY_EXC_ERR, wc.status(0));
    }

    @Test
    void postingBeyondTheSendQueueDepthShouldFailWithEnomemAndNameTheBadRequest() {
        connect();
        provider.autoProgress(false);
        for (int i = 0; i < 10; i++) {
            write(i, i, 0, 8, 0, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        }
        wrs.chain(0, 10);
        assertEquals(EmulatedRdmaProvider.ENOMEM, qpA.postSend(wrs, 0));
        assertEquals(8, wrs.badIndex(), "max_send_wr is 8");
        provider.progress();
        assertEquals(8, cqA.poll(wc));
    }

    @Test
    void teardownWithWorkOutstandingShouldFlushDrainAndDestroyInOrder() {
        connect();
        provider.autoProgress(false);
        for (int i = 0; i < 5; i++) {
            write(i, i, i * 64L, 64, i * 64L, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        }
        wrs.chain(0, 5);
        assertEquals(0, qpA.postSend(wrs, 0));
        a.close();
        assertEquals(List.of("drained 5", "qp " + qpA.qpNum(), "cq", "mr", "pd", "context emu0"), provider.teardownLog());
        assertEquals(0, dstMem.get(ValueLayout.JAVA_BYTE, 0), "outstanding writes were flushed, not executed");
        assertEquals(0, provider.executedBytes());
    }

    @Test
    void destroyingACqStillUsedByAQpShouldFailWithEbusy() {
        VerbsException e = assertThrows(VerbsException.class, cqA::close);
        assertEquals(EmulatedRdmaProvider.EBUSY, e.errno());
        qpA.close();
        cqA.close();
        assertEquals(List.of("qp " + qpA.qpNum(), "cq"), provider.teardownLog());
    }

    @Test
    void cqOverrunShouldMakePollingFail() {
        CompletionQueue tiny = a.createCq(2);
        QueuePair q = a.createRcQp(tiny, new QpCapabilities(8, 8, 1, 1, 0));
        QpBringUp.connect(q, new QpBringUp.Peer(b.gid(1, 1), 0, qpB.qpNum()), 5, 1, settings);
        QpBringUp.connect(qpB, new QpBringUp.Peer(a.gid(1, 1), 0, q.qpNum()), 5, 1, settings);
        for (int i = 0; i < 3; i++) {
            write(i, i, 0, 8, 0, dstMr.rkey(), SendWorkRequests.SEND_SIGNALED);
        }
        wrs.chain(0, 3);
        assertEquals(0, q.postSend(wrs, 0));
        assertTrue(tiny.poll(wc) < 0);
    }
}
