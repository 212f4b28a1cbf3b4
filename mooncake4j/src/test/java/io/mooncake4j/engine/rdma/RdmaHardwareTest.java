package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.rdma.RdmaProvider.CompletionQueue;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.engine.rdma.RdmaProvider.QueuePair;
import io.mooncake4j.engine.rdma.verbs.DeviceAttributes;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.IbvPd;
import io.mooncake4j.engine.rdma.verbs.IbvQp;
import io.mooncake4j.engine.rdma.verbs.PortAttributes;
import io.mooncake4j.engine.rdma.verbs.SendWorkRequests;
import io.mooncake4j.engine.rdma.verbs.VerbsException;
import io.mooncake4j.engine.rdma.verbs.VerbsLibrary;
import io.mooncake4j.engine.rdma.verbs.WorkCompletions;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The libibverbs bindings on a real RDMA device (RoCE or InfiniBand): queries, registration,
 * RC QP bring-up with Mooncake's attributes, RDMA WRITE/READ through {@code ibv_context.ops}, and
 * teardown with work outstanding. Loopback: two QPs on one port connected to each other.
 *
 * <p>Run: {@code mvn -B test -Dgroups=rdma -DexcludedTestGroups=gpu}. Device from
 * {@code MC_TEST_RDMA_DEVICE} (else the first listed), GID index from {@code MC_GID_INDEX}
 * (else {@link GidSelection}'s automatic choice on port {@code MC_IB_PORT}).
 */
@Tag("rdma")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaHardwareTest {

    private static final int ALL_ACCESS = IbvPd.ACCESS_LOCAL_WRITE | IbvPd.ACCESS_REMOTE_WRITE | IbvPd.ACCESS_REMOTE_READ;
    private static final long POLL_DEADLINE_NANOS = TimeUnit.SECONDS.toNanos(10);

    private static final RdmaSettings SETTINGS = RdmaSettings.from(EngineSettings.processEnvironment());
    private static String deviceName;

    @BeforeEach
    void requireDevice() {
        assumeTrue(RdmaAvailability.isAvailable(),
                () -> RdmaAvailability.unavailabilityCause().map(RdmaAvailability.Cause::message).orElse(""));
        List<String> names = new VerbsRdmaProvider().deviceNames();
        String wanted = System.getenv("MC_TEST_RDMA_DEVICE");
        deviceName = wanted != null && !wanted.isBlank() ? wanted : names.getFirst();
    }

    private static int gidIndex(Device d) {
        if (!SETTINGS.autoGid()) {
            return SETTINGS.gidIndex();
        }
        int len = d.port(SETTINGS.ibPort()).gidTblLen();
        GidSelection.Choice choice = GidSelection.best(GidSelection.probe(d, SETTINGS.ibPort(), len, NicSelection.SYSFS))
                .orElseThrow(() -> new AssertionError("port " + SETTINGS.ibPort() + " of " + d.name() + " has no usable GID"));
        System.out.printf(Locale.ROOT, "%s: automatic GID index %d (%s, %s)%n", d.name(), choice.index(), choice.gid(),
                choice.gidClass());
        return choice.index();
    }

    private static int pollUntil(CompletionQueue cq, WorkCompletions wc, int wanted, int[] statuses) {
        long deadline = System.nanoTime() + POLL_DEADLINE_NANOS;
        int got = 0;
        while (got < wanted) {
            int n = cq.poll(wc);
            assertTrue(n >= 0, "ibv_poll_cq failed: " + n);
            for (int i = 0; i < n; i++) {
                statuses[got + i] = wc.status(i);
            }
            got += n;
            if (n == 0) {
                assertTrue(System.nanoTime() < deadline, "completions: " + got + " of " + wanted + " within 10 s");
                Thread.onSpinWait();
            }
        }
        return got;
    }

    @Test
    void deviceShouldReportAnActivePortAndUsableLimits() {
        try (Device d = new VerbsRdmaProvider().open(deviceName)) {
            DeviceAttributes attr = d.attributes();
            PortAttributes port = d.port(SETTINGS.ibPort());
            System.out.printf(Locale.ROOT, "%s: fw %s, max_mr_size %d, max_qp_wr %d, max_sge %d, max_cqe %d,"
                            + " ports %d; port %d state %d active_mtu %d lid %d link_layer %d gid_tbl_len %d; caps %s%n",
                    d.name(), attr.fwVer(), attr.maxMrSize(), attr.maxQpWr(), attr.maxSge(), attr.maxCqe(),
                    attr.physPortCnt(), SETTINGS.ibPort(), port.state(), port.activeMtu(), port.lid(), port.linkLayer(),
                    port.gidTblLen(), VerbsLibrary.capabilities());
            assertTrue(attr.physPortCnt() >= 1);
            assertTrue(port.isActive(), "port " + SETTINGS.ibPort() + " must be ACTIVE (state 4), is " + port.state());
            assertTrue(attr.maxQpWr() >= SETTINGS.maxWr() || attr.maxQpWr() > 0);
            Gid gid = d.gid(SETTINGS.ibPort(), gidIndex(d));
            assertEquals(47, gid.toString().length());
        }
    }

    @Test
    void loopbackRcPairShouldWriteAndReadBackThroughOpsPointers() {
        int len = 1 << 20;
        int slice = SETTINGS.sliceSize();
        int slices = len / slice;
        try (Device d = new VerbsRdmaProvider().open(deviceName);
                Arena arena = Arena.ofShared();
                SendWorkRequests wrs = new SendWorkRequests(slices);
                WorkCompletions wc = new WorkCompletions(64)) {
            MemorySegment src = arena.allocate(len, 4096);
            MemorySegment dst = arena.allocate(len, 4096);
            MemorySegment back = arena.allocate(len, 4096);
            for (int i = 0; i < len; i += 8) {
                src.set(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            MemoryRegion srcMr = d.register(src.address(), len, ALL_ACCESS | IbvPd.ACCESS_RELAXED_ORDERING);
            MemoryRegion dstMr = d.register(dst.address(), len, ALL_ACCESS);
            MemoryRegion backMr = d.register(back.address(), len, ALL_ACCESS);
            CompletionQueue cq = d.createCq(SETTINGS.maxCqePerCtx());
            QueuePair qa = d.createRcQp(cq, SETTINGS.qpCapabilities());
            QueuePair qb = d.createRcQp(cq, SETTINGS.qpCapabilities());
            int gidIndex = gidIndex(d);
            PortAttributes port = d.port(SETTINGS.ibPort());
            Gid gid = d.gid(SETTINGS.ibPort(), gidIndex);
            QpBringUp.connect(qa, new QpBringUp.Peer(gid, port.lid(), qb.qpNum()), port.activeMtu(), gidIndex, SETTINGS);
            QpBringUp.connect(qb, new QpBringUp.Peer(gid, port.lid(), qa.qpNum()), port.activeMtu(), gidIndex, SETTINGS);
            assertEquals(IbvQp.STATE_RTS, qa.state());

            for (int i = 0; i < slices; i++) {
                wrs.set(i, i, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED,
                        src.address() + (long) i * slice, slice, srcMr.lkey(), dst.address() + (long) i * slice, dstMr.rkey());
            }
            wrs.chain(0, slices);
            assertEquals(0, qa.postSend(wrs, 0), "ibv_post_send");
            int[] statuses = new int[slices];
            pollUntil(cq, wc, slices, statuses);
            for (int s : statuses) {
                assertEquals(WorkCompletions.SUCCESS, s, WorkCompletions.statusName(s));
            }
            assertEquals(-1, MemorySegment.mismatch(src, 0, len, dst, 0, len));

            for (int i = 0; i < slices; i++) {
                wrs.set(i, 1000 + i, SendWorkRequests.OPCODE_RDMA_READ, SendWorkRequests.SEND_SIGNALED,
                        back.address() + (long) i * slice, slice, backMr.lkey(), dst.address() + (long) i * slice, dstMr.rkey());
            }
            wrs.chain(0, slices);
            assertEquals(0, qb.postSend(wrs, 0), "ibv_post_send (read)");
            pollUntil(cq, wc, slices, statuses);
            for (int s : statuses) {
                assertEquals(WorkCompletions.SUCCESS, s, WorkCompletions.statusName(s));
            }
            assertEquals(-1, MemorySegment.mismatch(src, 0, len, back, 0, len));
        }
    }

    @Test
    void wrongRkeyShouldCompleteWithRemoteAccessError() {
        try (Device d = new VerbsRdmaProvider().open(deviceName);
                Arena arena = Arena.ofShared();
                SendWorkRequests wrs = new SendWorkRequests(1);
                WorkCompletions wc = new WorkCompletions(4)) {
            MemorySegment buf = arena.allocate(8192, 4096);
            MemoryRegion mr = d.register(buf.address(), 8192, ALL_ACCESS);
            CompletionQueue cq = d.createCq(64);
            QueuePair qa = d.createRcQp(cq, SETTINGS.qpCapabilities());
            QueuePair qb = d.createRcQp(cq, SETTINGS.qpCapabilities());
            int gidIndex = gidIndex(d);
            PortAttributes port = d.port(SETTINGS.ibPort());
            Gid gid = d.gid(SETTINGS.ibPort(), gidIndex);
            QpBringUp.connect(qa, new QpBringUp.Peer(gid, port.lid(), qb.qpNum()), port.activeMtu(), gidIndex, SETTINGS);
            QpBringUp.connect(qb, new QpBringUp.Peer(gid, port.lid(), qa.qpNum()), port.activeMtu(), gidIndex, SETTINGS);
            wrs.set(0, 42, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, buf.address(), 64,
                    mr.lkey(), buf.address() + 4096, mr.rkey() ^ 0x5a5a00);
            wrs.chain(0, 1);
            assertEquals(0, qa.postSend(wrs, 0));
            int[] statuses = new int[1];
            pollUntil(cq, wc, 1, statuses);
            assertEquals(42, wc.wrId(0));
            assertEquals(WorkCompletions.REM_ACCESS_ERR, statuses[0], WorkCompletions.statusName(statuses[0]));
        }
    }

    @Test
    void registeringUnmappedMemoryShouldFailWithErrno() {
        try (Device d = new VerbsRdmaProvider().open(deviceName)) {
            VerbsException e = assertThrows(VerbsException.class, () -> d.register(0x10000L, 4096, ALL_ACCESS));
            assertTrue(e.errno() != 0, e.getMessage());
        }
    }

    @Test
    void closingWithWorkOutstandingShouldFlushAndReleaseEverything() {
        int len = 64 << 20;
        try (Arena arena = Arena.ofShared(); SendWorkRequests wrs = new SendWorkRequests(64)) {
            MemorySegment buf = arena.allocate(2L * len, 4096);
            Device d = new VerbsRdmaProvider().open(deviceName);
            MemoryRegion mr = d.register(buf.address(), 2L * len, ALL_ACCESS);
            CompletionQueue cq = d.createCq(256);
            QueuePair qa = d.createRcQp(cq, SETTINGS.qpCapabilities());
            QueuePair qb = d.createRcQp(cq, SETTINGS.qpCapabilities());
            int gidIndex = gidIndex(d);
            PortAttributes port = d.port(SETTINGS.ibPort());
            Gid gid = d.gid(SETTINGS.ibPort(), gidIndex);
            QpBringUp.connect(qa, new QpBringUp.Peer(gid, port.lid(), qb.qpNum()), port.activeMtu(), gidIndex, SETTINGS);
            QpBringUp.connect(qb, new QpBringUp.Peer(gid, port.lid(), qa.qpNum()), port.activeMtu(), gidIndex, SETTINGS);
            int slice = len / 64;
            for (int i = 0; i < 64; i++) {
                wrs.set(i, i, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED,
                        buf.address() + (long) i * slice, slice, mr.lkey(), buf.address() + len + (long) i * slice, mr.rkey());
            }
            wrs.chain(0, 64);
            assertEquals(0, qa.postSend(wrs, 0));
            d.close(); // QPs to ERR, CQ drained, then QPs, CQ, MR, PD, context
            d.close(); // idempotent
        }
    }
}
