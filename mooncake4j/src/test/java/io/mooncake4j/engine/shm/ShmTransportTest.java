package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.spi.FixedPeer;
import io.mooncake4j.engine.spi.RecordedSlices;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.TransportException;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.sys.SharedMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link ShmTransport} in one JVM: the peer is this process, reached through its own /proc entries. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ShmTransportTest {

    private HostMemoryAllocator alloc;
    private ShmTransport target;
    private ShmTransport initiator;
    private HostMemoryStorage remoteMem;
    private LocalBuffer remoteBuf;

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(SharedMemory.available(), () -> "no memfd here: " + SharedMemory.unavailableReason());
        assumeTrue(MachineIdentity.local() != null, "no /proc machine identity");
        alloc = new HostMemoryAllocator();
        remoteMem = alloc.allocateShareable(256 << 10);
        // register a range that starts one page into the allocation: the advert carries the offset
        remoteBuf = LocalBuffer.of(remoteMem.address() + 4096, 128 << 10, "cpu:0");
        target = new ShmTransport();
        target.install(null);
        assertEquals(0, target.registerBuffers(List.of(remoteBuf)));
        initiator = new ShmTransport();
        initiator.install(null);
    }

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.uninstall();
            target.uninstall();
            alloc.close();
        }
    }

    @Test
    void machineIdentityReadsBootIdAndPidNamespaceAndRoundTrips() {
        MachineIdentity id = MachineIdentity.local();
        assertTrue(id.bootId().matches("[0-9a-f-]{36}"), id.bootId());
        assertTrue(id.pidNamespace().startsWith("pid:["), id.pidNamespace());
        assertEquals(id, MachineIdentity.parse(id.toString()));
        assertNull(MachineIdentity.parse("no-slash"));
        assertNull(MachineIdentity.read(Path.of("/nonexistent-proc")));
    }

    @Test
    void descriptorKeepsEveryMooncakeFieldAndAddsOnlyMc4jKeys() throws Exception {
        SegmentDescriptor d = ShmFixtures.describe("h:1", List.of(remoteBuf), target);
        Map<String, Object> json = Json.parseObject(d.toJson());
        SegmentDescriptor plain = SegmentDescriptor.tcp("h:1", 1, List.of(
                SegmentDescriptor.Buffer.tcp("h:1", remoteBuf.address(), remoteBuf.length())));
        Map<String, Object> plainJson = Json.parseObject(plain.toJson());
        json.keySet().removeIf(k -> k.startsWith("mc4j_"));
        json.remove("timestamp");
        plainJson.remove("timestamp");
        @SuppressWarnings("unchecked")
        Map<String, Object> buf0 = (Map<String, Object>) ((List<Object>) json.get("buffers")).get(0);
        assertTrue(buf0.containsKey("mc4j_shm"));
        buf0.remove("mc4j_shm");
        assertEquals(plainJson, json); // a C++ decoder sees exactly the TCP descriptor
        ShmAdvert.Buffer adv = ShmAdvert.bufferOf(d.buffers().get(0));
        assertEquals(4096, adv.offset());
        assertEquals(remoteMem.shareable().orElseThrow().fd(), adv.fd());
    }

    @Test
    void copiesIntoAnUnalignedOffsetOfTheRemoteBuffer() throws Exception {
        FixedPeer peer = FixedPeer.sameMachine(1, ShmFixtures.describe("h:1", List.of(remoteBuf), target));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment local = a.allocate(1000);
            ShmFixtures.fill(local, 5);
            SegmentDescriptor.Buffer rb = peer.descriptor().buffers().get(0);
            assertTrue(initiator.canTransfer(peer, LocalBuffer.of(local.address(), 1000, "cpu:0"), rb));
            RecordedSlices s = RecordedSlices.host().add(true, local.address(), rb.addr() + 777, 1000);
            initiator.submit(peer, s);
            assertTrue(s.allDone(), s.outcome::toString);
            assertEquals(-1, ShmFixtures.firstMismatch(remoteMem.segment().asSlice(4096 + 777, 1000), 5));
            assertEquals(0, remoteMem.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 4096 + 776));
        }
    }

    @Test
    void aMemfdNameThatDoesNotMatchTheFdIsRefusedAndFallsToTheNextTransport() throws Exception {
        SegmentDescriptor d = ShmFixtures.describe("h:1", List.of(remoteBuf), target);
        SegmentDescriptor.Buffer real = d.buffers().get(0);
        @SuppressWarnings("unchecked")
        Map<String, Object> adv = new java.util.LinkedHashMap<>((Map<String, Object>) real.extensions().get("mc4j_shm"));
        adv.put("memfd", "someone-else");
        SegmentDescriptor.Buffer forged = real.withExtension("mc4j_shm", adv);
        SegmentDescriptor bad = new SegmentDescriptor(d.name(), d.protocol(), d.tcpDataPort(), d.tcpProtoVersion(),
                d.timestamp(), null, List.of(forged), List.of(), Map.of(), d.extensions());
        FixedPeer peer = FixedPeer.sameMachine(2, bad);
        assertFalse(initiator.canTransfer(peer, LocalBuffer.of(remoteMem.address(), 8, "cpu:0"), forged));
        RecordedSlices s = RecordedSlices.host().add(true, remoteMem.address(), forged.addr(), 8);
        initiator.submit(peer, s);
        assertEquals(SliceFailure.UNREACHABLE, s.failures.get(0));
        assertTrue(s.outcome.get(0).contains("someone-else"), s.outcome.get(0));
    }

    @Test
    void aDescriptorRefreshUnmapsTheOldMappings() throws Exception {
        SegmentDescriptor d1 = ShmFixtures.describe("h:1", List.of(remoteBuf), target);
        FixedPeer peer = FixedPeer.sameMachine(3, d1);
        LocalBuffer local = LocalBuffer.of(remoteMem.address(), 8, "cpu:0");
        assertTrue(initiator.canTransfer(peer, local, d1.buffers().get(0)));
        assertEquals(1, initiator.mappedBuffers(3));
        SegmentDescriptor d2 = ShmFixtures.describe("h:1", List.of(), target);
        FixedPeer refreshed = FixedPeer.sameMachine(3, d2);
        assertNull(refreshed.buffer(remoteBuf.address(), 8));
        RecordedSlices s = RecordedSlices.host().add(true, remoteMem.address(), remoteBuf.address(), 8);
        initiator.submit(refreshed, s);
        assertEquals(SliceFailure.UNREACHABLE, s.failures.get(0));
        assertEquals(0, initiator.mappedBuffers(3));
    }

    @Test
    void declinesGpuBuffersCppPeersAndAbortedBatches() throws Exception {
        SegmentDescriptor d = ShmFixtures.describe("h:1", List.of(remoteBuf), target);
        FixedPeer peer = FixedPeer.sameMachine(4, d);
        SegmentDescriptor.Buffer rb = d.buffers().get(0);
        assertFalse(initiator.canTransfer(peer, new LocalBuffer(0x1000, 8, "cuda:0", MemoryKind.CUDA), rb));
        SegmentDescriptor cpp = SegmentDescriptor.tcp("cpp:1", 5, List.of(
                SegmentDescriptor.Buffer.tcp("cpp:1", rb.addr(), rb.length())));
        FixedPeer cppPeer = FixedPeer.sameMachine(5, SegmentDescriptor.parse(cpp.toJson()));
        assertFalse(initiator.canTransfer(cppPeer, LocalBuffer.of(remoteMem.address(), 8, "cpu:0"),
                cppPeer.descriptor().buffers().get(0)));
        RecordedSlices s = RecordedSlices.host().add(true, remoteMem.address(), rb.addr(), 8);
        s.aborted = true;
        initiator.submit(peer, s);
        assertEquals(SliceFailure.TIMEOUT, s.failures.get(0));
        // GPU buffers are not advertised at all
        target.registerBuffers(List.of(new LocalBuffer(0x7000_0000_0000L, 4096, "cuda:0", MemoryKind.CUDA)));
        SegmentDescriptor withGpu = ShmFixtures.describe("h:1", List.of(remoteBuf), target);
        assertEquals(1, withGpu.buffers().stream().filter(b -> ShmAdvert.bufferOf(b) != null).count());
    }

    @Test
    void malformedAdvertsReadAsAbsent() {
        SegmentDescriptor.Buffer b = SegmentDescriptor.Buffer.tcp("h:1", 4096, 4096);
        assertNull(ShmAdvert.bufferOf(b.withExtension("mc4j_shm", Map.of("fd", 3L))));
        assertNull(ShmAdvert.bufferOf(b.withExtension("mc4j_shm", Map.of("fd", -1L, "offset", 0L, "memfd", "x"))));
        assertNull(ShmAdvert.bufferOf(b.withExtension("mc4j_shm", Map.of("fd", 3L, "offset", 0L, "memfd", "../x"))));
        assertNull(ShmAdvert.bufferOf(b.withExtension("mc4j_shm", "yes")));
        SegmentDescriptor d = SegmentDescriptor.tcp("h:1", 1, List.of(b));
        assertNull(ShmAdvert.peerOf(d.withExtension("mc4j_shm", Map.of("machine", "x/y", "pid", 0L))));
        assertNull(ShmAdvert.peerOf(d.withExtension("mc4j_shm", Map.of("machine", "noslash", "pid", 5L))));
    }

    @Test
    void installWithoutMachineIdentityFailsWithTheFix() {
        TransportException e = assertThrows(TransportException.class, () -> new ShmTransport(null).install(null));
        assertTrue(e.getMessage().contains("use protocol tcp"), e.getMessage());
    }
}
