package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Drives {@link IbvQp#postSend} and {@link IbvCq#poll} through {@code ibv_context.ops} function
 * pointers into {@code native/verbs_fake_ops.c}, which reads the work requests and writes the
 * completions with the C compiler's view of {@code verbs.h}: the data path's dispatch, argument
 * passing, chain walking, {@code bad_wr} and completion layout, without an RDMA device.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
class OpsDispatchTest {

    private Arena arena;
    private MethodHandle logField;
    private MethodHandle logged;
    private IbvQp qp;
    private IbvCq cq;

    @BeforeEach
    void loadFake() throws Throwable {
        Optional<String> whyNot = NativeLayoutProbe.whyNotLive();
        assumeTrue(whyNot.isEmpty(), () -> "cannot build native/verbs_fake_ops.c: " + whyNot.orElse(""));
        Path lib = NativeLayoutProbe.buildSharedLibrary("verbs_fake_ops");
        arena = Arena.ofShared();
        SymbolLookup fake = SymbolLookup.libraryLookup(lib, arena);
        Linker linker = Linker.nativeLinker();
        MethodHandle context = linker.downcallHandle(fake.find("fake_context").orElseThrow(), FunctionDescriptor.of(ADDRESS));
        MethodHandle qpFn = linker.downcallHandle(fake.find("fake_qp").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, JAVA_INT, JAVA_INT));
        MethodHandle cqFn = linker.downcallHandle(fake.find("fake_cq").orElseThrow(), FunctionDescriptor.of(ADDRESS, JAVA_INT));
        logged = linker.downcallHandle(fake.find("fake_logged").orElseThrow(), FunctionDescriptor.of(JAVA_INT));
        logField = linker.downcallHandle(fake.find("fake_log_field").orElseThrow(),
                FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_INT));

        MemorySegment ctx = ((MemorySegment) context.invokeExact()).reinterpret(VerbsLayouts.IBV_CONTEXT.byteSize());
        IbvContext c = new IbvContext(new DeviceInfo(0, "fake0", 0, ""), ctx);
        qp = new IbvQp(c, ((MemorySegment) qpFn.invokeExact(0, 0x12345)).reinterpret(VerbsLayouts.IBV_QP.byteSize()));
        cq = new IbvCq(c, ((MemorySegment) cqFn.invokeExact(128)).reinterpret(VerbsLayouts.IBV_CQ.byteSize()));
        // the fake objects are static C storage: nothing to destroy; the context is never closed
    }

    @AfterEach
    void unload() {
        if (arena != null) {
            arena.close();
        }
    }

    private long field(int i, int f) throws Throwable {
        return (long) logField.invokeExact(i, f);
    }

    @Test
    void qpAndCqFieldsShouldReadWhatCWrote() {
        assertEquals(0x12345, qp.qpNum());
        assertEquals(IbvQp.STATE_RTS, qp.state());
        assertEquals(128, cq.capacity());
    }

    @Test
    void postSendShouldHandTheWholeChainToTheProvider() throws Throwable {
        try (SendWorkRequests wrs = new SendWorkRequests(4)) {
            wrs.set(0, 2, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED,
                    0x7f00_0000_1000L, 65536, 0x1111, 0x7e00_0000_2000L, 0x2222);
            wrs.set(1, 3, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED,
                    0x7f00_0001_1000L, 4096, 0x1111, 0x7e00_0001_2000L, 0xfedc_ba98);
            wrs.set(2, 4, SendWorkRequests.OPCODE_RDMA_READ, 0, 0x7f00_0002_1000L, 17, 0x3333,
                    0x7e00_0002_2000L, 0x4444);
            wrs.chain(0, 3);
            assertEquals(0, qp.postSend(wrs, 0));
            assertEquals(3, (int) logged.invokeExact());
            for (int i = 0; i < 3; i++) {
                assertEquals(wrs.wrId(i), field(i, 0), "wr_id");
                assertEquals(wrs.opcode(i), field(i, 1), "opcode");
                assertEquals(wrs.sendFlags(i), field(i, 2), "send_flags");
                assertEquals(1, field(i, 3), "num_sge");
                assertEquals(wrs.localAddr(i), field(i, 4), "sg_list[0].addr");
                assertEquals(Integer.toUnsignedLong(wrs.length(i)), field(i, 5), "sg_list[0].length");
                assertEquals(Integer.toUnsignedLong(wrs.lkey(i)), field(i, 6), "sg_list[0].lkey");
                assertEquals(wrs.remoteAddr(i), field(i, 7), "wr.rdma.remote_addr");
                assertEquals(Integer.toUnsignedLong(wrs.rkey(i)), field(i, 8), "wr.rdma.rkey");
                assertEquals(0x12345, field(i, 9), "qp->qp_num");
            }
        }
    }

    @Test
    void refusedPostShouldReturnTheErrnoAndPointBadWrAtTheFirstUnposted() throws Throwable {
        try (SendWorkRequests wrs = new SendWorkRequests(4)) {
            wrs.set(0, 10, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, 1, 1, 1, 1, 1);
            wrs.set(1, 0xBAD, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, 1, 1, 1, 1, 1);
            wrs.set(2, 12, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, 1, 1, 1, 1, 1);
            wrs.chain(0, 3);
            assertEquals(Verbs.ENOMEM, qp.postSend(wrs, 0));
            assertEquals(1, wrs.badIndex());
            assertEquals(1, (int) logged.invokeExact());
        }
    }

    @Test
    void pollShouldReadCompletionsTheProviderWrote() {
        try (SendWorkRequests wrs = new SendWorkRequests(3); WorkCompletions wc = new WorkCompletions(2)) {
            wrs.set(0, 20, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED, 1, 4096, 1, 1, 1);
            wrs.set(1, 21, SendWorkRequests.OPCODE_RDMA_READ, SendWorkRequests.SEND_SIGNALED, 1, 8192, 1, 1, 1);
            wrs.set(2, 22, SendWorkRequests.OPCODE_RDMA_READ, SendWorkRequests.SEND_SIGNALED, 1, 512, 1, 1, 1);
            wrs.chain(0, 3);
            assertEquals(0, qp.postSend(wrs, 0));
            assertEquals(2, cq.poll(wc), "bounded by the WorkCompletions capacity");
            assertEquals(20, wc.wrId(0));
            assertEquals(WorkCompletions.SUCCESS, wc.status(0));
            assertEquals(WorkCompletions.OPCODE_RDMA_WRITE, wc.opcode(0));
            assertEquals(4096, wc.byteLen(0));
            assertEquals(0x12345, wc.qpNum(0));
            assertEquals(21, wc.wrId(1));
            assertEquals(WorkCompletions.REM_ACCESS_ERR, wc.status(1));
            assertEquals(0x88, wc.vendorErr(1));
            assertEquals(1, cq.poll(wc));
            assertEquals(22, wc.wrId(0));
            assertEquals(WorkCompletions.OPCODE_RDMA_READ, wc.opcode(0));
            assertEquals(0, cq.poll(wc));
        }
    }
}
