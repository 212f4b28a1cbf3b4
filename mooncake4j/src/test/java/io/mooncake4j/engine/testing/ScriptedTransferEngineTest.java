package io.mooncake4j.engine.testing;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ScriptedTransferEngineTest {

    /** Initialises {@code e} on loopback and registers a new 4 KiB host buffer with it. */
    private static HostMemoryStorage initialisedWith(ScriptedTransferEngine e, HostMemoryAllocator alloc) {
        HostMemoryStorage buf = alloc.allocate(4096);
        assertEquals(0, e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""));
        assertEquals(0, e.registerMemory(buf.address(), 4096));
        return buf;
    }

    @Test
    void recordsCallsWithCopiedArguments() {
        try (ScriptedTransferEngine e = new ScriptedTransferEngine()) {
            assertEquals(0, e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""));
            long[] addrs = {0x1000, 0x3000};
            long[] lens = {0x1000, 0x1000};
            assertEquals(0, e.batchRegisterMemory(addrs, lens));
            addrs[0] = 42; // must not change the record
            EngineCall c = e.calls(EngineMethod.BATCH_REGISTER_MEMORY).getFirst();
            assertArrayEquals(new long[] {0x1000, 0x3000}, c.longs(0));
            assertEquals(0, c.result());
            assertEquals(2, e.registeredBuffers().size());
        }
    }

    @Test
    void withRecordingOffKeepsCountsAndScriptsButNoCalls() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
             ScriptedTransferEngine p = new ScriptedTransferEngine().copyData(true).recordCalls(false);
             ScriptedTransferEngine d = new ScriptedTransferEngine().copyData(true)) {
            HostMemoryStorage src = initialisedWith(p, alloc);
            HostMemoryStorage dst = initialisedWith(d, alloc);
            p.script(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).failNthCall(3, -1);
            List<Integer> seen = new java.util.ArrayList<>();
            p.beforeEach(c -> seen.add(c.ordinal()));
            for (int i = 0; i < 5; i++) {
                src.segment().set(ValueLayout.JAVA_LONG, 0, 100 + i);
                int rc = p.batchTransferSyncWrite(d.getLocalSegmentName(),
                        new long[] {src.address()}, new long[] {dst.address() + 8L * i}, new long[] {8});
                assertEquals(i == 2 ? -1 : 0, rc, "call " + (i + 1));
                assertEquals(i == 2 ? 0 : 100 + i, dst.segment().get(ValueLayout.JAVA_LONG, 8L * i), "call " + (i + 1));
            }
            assertEquals(5, p.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE));
            assertEquals(1, p.callCount(EngineMethod.INITIALIZE));
            assertEquals(List.of(), p.calls(), "nothing kept per call");
            assertEquals(List.of(1, 2, 3, 4, 5), seen, "ordinals still count every call");
            // switched back on, the engine records again, ordinals continuing the count
            p.recordCalls(true);
            p.batchTransferSyncWrite(d.getLocalSegmentName(),
                    new long[] {src.address()}, new long[] {dst.address()}, new long[] {8});
            assertEquals(6, p.calls(EngineMethod.BATCH_TRANSFER_SYNC_WRITE).getFirst().ordinal());
            assertEquals(6, p.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE));
        }
    }

    @Test
    void failsTheScriptedCallOnly() {
        try (ScriptedTransferEngine e = new ScriptedTransferEngine()) {
            e.script(EngineMethod.BATCH_REGISTER_MEMORY).failNthCall(2, -1);
            assertEquals(0, e.batchRegisterMemory(new long[] {0x1000}, new long[] {16}));
            assertEquals(-1, e.batchRegisterMemory(new long[] {0x2000}, new long[] {16}));
            assertEquals(0, e.batchRegisterMemory(new long[] {0x3000}, new long[] {16}));
            e.script(EngineMethod.INITIALIZE).alwaysReturn(-1);
            assertEquals(-1, e.initialize("h", "P2PHANDSHAKE", "tcp", ""));
            assertEquals(List.of(0, -1, 0),
                    e.calls(EngineMethod.BATCH_REGISTER_MEMORY).stream().map(EngineCall::result).toList());
        }
    }

    @Test
    void copyModeMovesBytesBetweenEnginesAndRejectsUnregisteredTargets() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
             ScriptedTransferEngine p = new ScriptedTransferEngine().copyData(true);
             ScriptedTransferEngine d = new ScriptedTransferEngine().copyData(true)) {
            HostMemoryStorage src = initialisedWith(p, alloc);
            HostMemoryStorage dst = initialisedWith(d, alloc);
            src.segment().set(ValueLayout.JAVA_LONG, 64, 0x1122334455667788L);
            assertEquals(0, p.batchTransferSyncWrite(d.getLocalSegmentName(),
                    new long[] {src.address() + 64}, new long[] {dst.address() + 128}, new long[] {8}));
            assertEquals(0x1122334455667788L, dst.segment().get(ValueLayout.JAVA_LONG, 128));
            assertNotEquals(0, p.batchTransferSyncWrite(d.getLocalSegmentName(),
                    new long[] {src.address()}, new long[] {dst.address() + 4090}, new long[] {8}));
            assertNotEquals(0, p.batchTransferSyncWrite("127.0.0.1:1",
                    new long[] {src.address()}, new long[] {dst.address()}, new long[] {8}));

            long seg = p.openSegment(d.getLocalSegmentName());
            long batch = p.allocateBatchId(2);
            assertEquals(StatusCodes.OK, p.submitTransfer(batch,
                    List.of(TransferRequest.read(src.address(), seg, dst.address() + 128, 8))));
            assertEquals(StatusCodes.BATCH_BUSY, p.freeBatchId(batch));
            assertEquals(TransferStatus.State.COMPLETED, p.getTransferStatus(batch, 0).state());
            assertEquals(StatusCodes.OK, p.freeBatchId(batch));
            assertEquals(0x1122334455667788L, src.segment().get(ValueLayout.JAVA_LONG, 0));
        }
    }

    @Test
    void scriptsTheAnswersThatAreNotReturnCodes() {
        try (ScriptedTransferEngine e = new ScriptedTransferEngine()) {
            assertEquals(DeviceMemoryAccess.Kind.UNKNOWN, e.deviceMemoryAccess("cuda:0").kind());
            e.scriptDeviceMemoryAccess(l -> l.startsWith("cuda:") ? DeviceMemoryAccess.staged("test staging")
                    : DeviceMemoryAccess.unknown());
            assertEquals(DeviceMemoryAccess.Kind.STAGED, e.deviceMemoryAccess("cuda:1").kind());
            assertEquals("test staging", e.deviceMemoryAccess("cuda:1").description());
            assertEquals(DeviceMemoryAccess.Kind.UNKNOWN, e.deviceMemoryAccess("cpu:0").kind());

            assertEquals(-1, e.getFirstBufferAddress("peer:1"));
            e.scriptFirstBufferAddress((segment, actual) -> segment.equals("peer:1") ? 0x4000 : actual);
            assertEquals(0x4000, e.getFirstBufferAddress("peer:1"));
            assertEquals(-1, e.getFirstBufferAddress("peer:2"));

            e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "");
            long batch = e.allocateBatchId(1);
            assertEquals(StatusCodes.OK, e.submitTransfer(batch, List.of(
                    new TransferRequest(TransferRequest.Opcode.WRITE, 0x1000, 0, 0x2000, 16))));
            int[] polls = {0};
            e.scriptTransferStatus((b, task, actual) -> ++polls[0] < 3
                    ? new TransferStatus(0, TransferStatus.State.PENDING, 0) : actual);
            assertEquals(TransferStatus.State.PENDING, e.getTransferStatus(batch, 0).state());
            assertEquals(TransferStatus.State.PENDING, e.getTransferStatus(batch, 0).state());
            assertEquals(TransferStatus.State.COMPLETED, e.getTransferStatus(batch, 0).state());
        }
    }
}
