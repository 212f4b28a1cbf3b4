package io.mooncake4j.engine.cudaipc;

import io.mooncake4j.engine.spi.FixedPeer;
import io.mooncake4j.engine.spi.RecordedSlices;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.ExtensionDescriptors;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.TransportException;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * {@link CudaIpcTransport} driven directly over {@link FakeIpcDriver}: two "processes" on one fake
 * machine with two fake GPUs. Adverts, open-once caching, teardown with copies in flight, the cap,
 * refusals and malformed adverts; no GPU needed.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class CudaIpcTransportTest {

    private static final long ALLOC = 256 << 10;

    private FakeDeviceMemory gpus;
    private FakeIpcDriver targetDriver;
    private FakeIpcDriver initiatorDriver;
    private FakeDeviceMemory.DeviceBuffer remoteMem;
    private FakeDeviceMemory.DeviceBuffer localMem;
    private CudaIpcTransport target;
    private CudaIpcTransport initiator;

    @BeforeEach
    void setUp() throws Exception {
        gpus = new FakeDeviceMemory(2);
        FakeIpcDriver.Machine machine = new FakeIpcDriver.Machine(gpus, 2);
        remoteMem = gpus.allocate(1, ALLOC);
        localMem = gpus.allocate(0, ALLOC);
        targetDriver = new FakeIpcDriver(machine, "target").own(remoteMem);
        initiatorDriver = new FakeIpcDriver(machine, "initiator").own(localMem);
        target = new CudaIpcTransport(targetDriver);
        target.install(null);
        initiator = new CudaIpcTransport(initiatorDriver);
        initiator.install(null);
    }

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.uninstall();
            target.uninstall();
        }
        if (gpus != null) {
            gpus.close();
        }
    }

    private LocalBuffer remoteBuffer(long offset, long length) {
        return LocalBuffer.of(remoteMem.address() + offset, length, "cuda:1");
    }

    private LocalBuffer local() {
        return LocalBuffer.of(localMem.address(), ALLOC, "cuda:0");
    }

    private static SegmentDescriptor describe(List<LocalBuffer> buffers, CudaIpcTransport t) throws Exception {
        List<long[]> bufs = new ArrayList<>();
        for (LocalBuffer b : buffers) {
            bufs.add(new long[] {b.address(), b.length()});
        }
        return SegmentDescriptor.parse(ExtensionDescriptors.describe("h:1", 1, bufs, t).toJson());
    }

    private static void fill(java.lang.foreign.MemorySegment s, int seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + seed));
        }
    }

    @Test
    void advertisesHandleOffsetSizeAndGpuAndKeepsTheDescriptorMooncakes() throws Exception {
        LocalBuffer rb = remoteBuffer(4096, 64 << 10);
        assertEquals(0, target.registerBuffers(List.of(rb)));
        SegmentDescriptor d = describe(List.of(rb), target);
        CudaIpcAdvert.Parsed p = CudaIpcAdvert.bufferOf(d.buffers().get(0));
        assertNull(p.error());
        assertEquals(4096, p.buffer().offset(), "IPC handles cover whole allocations: base + offset");
        assertEquals(ALLOC, p.buffer().size());
        assertEquals(FakeIpcDriver.Machine.uuid(1), p.buffer().device());
        assertEquals(targetDriver.processToken(), CudaIpcAdvert.peerOf(d).process());

        Map<String, Object> json = Json.parseObject(d.toJson());
        Map<String, Object> plain = Json.parseObject(SegmentDescriptor.tcp("h:1", 1, List.of(
                SegmentDescriptor.Buffer.tcp("h:1", rb.address(), rb.length()))).toJson());
        json.keySet().removeIf(k -> k.startsWith("mc4j_"));
        @SuppressWarnings("unchecked")
        Map<String, Object> buf0 = (Map<String, Object>) ((List<Object>) json.get("buffers")).get(0);
        assertNotNull(buf0.remove(CudaIpcAdvert.KEY));
        json.remove("timestamp");
        plain.remove("timestamp");
        assertEquals(plain, json, "a C++ decoder sees exactly the TCP descriptor");
    }

    @Test
    void hostBuffersAndMemoryTheDriverCannotExportAreNotAdvertisedButStillRegister() throws Exception {
        try (FakeDeviceMemory.DeviceBuffer foreign = gpus.allocate(0, 4096)) {
            LocalBuffer host = LocalBuffer.of(0x1000, 4096, "cpu:0");
            LocalBuffer notOwned = LocalBuffer.of(foreign.address(), 4096, "cuda:0"); // e.g. a VMM or pool allocation
            assertEquals(0, target.registerBuffers(List.of(host, notOwned)));
            assertEquals(0, target.advertisedBuffers());
            SegmentDescriptor d = describe(List.of(host, notOwned), target);
            assertFalse(d.extensions().containsKey(CudaIpcAdvert.KEY), "nothing to open: no peer-level advert either");
        }
    }

    @Test
    void copiesBothWaysAtOffsetsOpeningTheAllocationOnceForTwoBuffersInIt() throws Exception {
        LocalBuffer a = remoteBuffer(0, 64 << 10);
        LocalBuffer b = remoteBuffer(128 << 10, 64 << 10);
        assertEquals(0, target.registerBuffers(List.of(a, b)));
        FixedPeer peer = FixedPeer.asCore(1, describe(List.of(a, b), target));
        SegmentDescriptor.Buffer ra = peer.descriptor().buffers().get(0);
        SegmentDescriptor.Buffer rb = peer.descriptor().buffers().get(1);
        assertEquals(CudaIpcAdvert.bufferOf(ra).buffer().handleHex(), CudaIpcAdvert.bufferOf(rb).buffer().handleHex(),
                "one allocation, one handle");
        assertTrue(initiator.canTransfer(peer, local(), ra));
        fill(localMem.contents(), 7);

        RecordedSlices s = RecordedSlices.device().add(true, localMem.address(), b.address() + 777, 1000)
                .add(true, localMem.address() + 1000, a.address() + 5, 3000);
        initiator.submit(peer, s);
        assertTrue(s.allDone(), s.outcome::toString);
        assertArrayEquals(localMem.contents().asSlice(0, 1000).toArray(ValueLayout.JAVA_BYTE),
                remoteMem.contents().asSlice((128 << 10) + 777, 1000).toArray(ValueLayout.JAVA_BYTE));
        assertArrayEquals(localMem.contents().asSlice(1000, 3000).toArray(ValueLayout.JAVA_BYTE),
                remoteMem.contents().asSlice(5, 3000).toArray(ValueLayout.JAVA_BYTE));
        assertEquals(0, remoteMem.contents().get(ValueLayout.JAVA_BYTE, (128 << 10) + 776), "nothing before the slice");

        fill(remoteMem.contents(), 99);
        RecordedSlices r = RecordedSlices.device().add(false, localMem.address() + 4096, b.address() + 10, 2048);
        initiator.submit(peer, r);
        assertTrue(r.allDone(), r.outcome::toString);
        assertArrayEquals(remoteMem.contents().asSlice((128 << 10) + 10, 2048).toArray(ValueLayout.JAVA_BYTE),
                localMem.contents().asSlice(4096, 2048).toArray(ValueLayout.JAVA_BYTE));

        assertEquals(1, initiatorDriver.opens(), "opened once for three slices over two buffers");
        assertEquals(1, initiator.openHandles(1));
        assertEquals(List.of(), initiatorDriver.violations());
    }

    @Test
    void forgetAndUninstallCloseTheHandlesOnlyAfterTheCopyHoldingThemEnded() throws Exception {
        LocalBuffer a = remoteBuffer(0, ALLOC);
        assertEquals(0, target.registerBuffers(List.of(a)));
        FixedPeer peer = FixedPeer.asCore(2, describe(List.of(a), target));
        RecordedSlices first = RecordedSlices.device().add(true, localMem.address(), a.address(), 64);
        initiator.submit(peer, first);
        assertTrue(first.allDone(), first.outcome::toString);

        AtomicInteger closesSeenDuringCopy = new AtomicInteger(-1);
        initiatorDriver.duringCopy(() -> {
            initiator.forget(peer); // a descriptor refresh while the copy runs
            closesSeenDuringCopy.set(initiatorDriver.closes());
        });
        RecordedSlices during = RecordedSlices.device().add(true, localMem.address(), a.address() + 64, 64);
        initiator.submit(peer, during);
        assertTrue(during.allDone(), during.outcome::toString);
        assertEquals(0, closesSeenDuringCopy.get(), "not unmapped under the copy");
        assertEquals(1, initiatorDriver.closes(), "unmapped when the copy ended");
        assertEquals(0, initiatorDriver.liveAliases());

        initiatorDriver.duringCopy(null);
        RecordedSlices again = RecordedSlices.device().add(true, localMem.address(), a.address(), 64);
        initiator.submit(peer, again); // opens afresh for the peer's (re-fetched) descriptor
        assertTrue(again.allDone(), again.outcome::toString);
        assertEquals(2, initiatorDriver.opens());
        initiator.uninstall();
        assertEquals(2, initiatorDriver.closes(), "uninstall closes what is open");
        assertEquals(0, initiatorDriver.liveAliases());
        assertTrue(initiatorDriver.shutDown());
        assertEquals(List.of(), initiatorDriver.violations());
    }

    @Test
    void aHandleThatWillNotOpenFailsItsSliceAsUnreachableAndIsNotOfferedAgain() throws Exception {
        LocalBuffer a = remoteBuffer(0, ALLOC);
        assertEquals(0, target.registerBuffers(List.of(a)));
        FixedPeer peer = FixedPeer.asCore(3, describe(List.of(a), target));
        SegmentDescriptor.Buffer ra = peer.descriptor().buffers().get(0);
        initiatorDriver.refuseOpens("CUDA_ERROR_MAP_FAILED (another container?)");
        assertTrue(initiator.canTransfer(peer, local(), ra), "not known before trying");
        RecordedSlices s = RecordedSlices.device().add(true, localMem.address(), a.address(), 64);
        initiator.submit(peer, s);
        assertEquals(SliceFailure.UNREACHABLE, s.failures.get(0));
        assertTrue(s.outcome.get(0).contains("CUDA_ERROR_MAP_FAILED"), s.outcome.get(0));
        assertFalse(initiator.canTransfer(peer, local(), ra), "remembered: the next slice goes elsewhere directly");
        assertEquals(0, initiatorDriver.opens());
    }

    @Test
    void theCapOnOpenHandlesPerPeerSendsFurtherAllocationsToTheNextTransport() throws Exception {
        try (FakeDeviceMemory.DeviceBuffer second = gpus.allocate(1, 8192)) {
            targetDriver.own(second);
            LocalBuffer a = remoteBuffer(0, ALLOC);
            LocalBuffer b = LocalBuffer.of(second.address(), 8192, "cuda:1");
            assertEquals(0, target.registerBuffers(List.of(a, b)));
            CudaIpcTransport capped = new CudaIpcTransport(initiatorDriver,
                    CudaIpcConfig.fromEnvironment(Map.of(CudaIpcTransport.MAX_HANDLES_ENV, "1")));
            capped.install(context());
            try {
                FixedPeer peer = FixedPeer.asCore(4, describe(List.of(a, b), target));
                RecordedSlices s = RecordedSlices.device().add(true, localMem.address(), a.address(), 64);
                capped.submit(peer, s);
                assertTrue(s.allDone(), s.outcome::toString);
                assertFalse(capped.canTransfer(peer, local(), peer.descriptor().buffers().get(1)), "cap reached");
                assertTrue(capped.canTransfer(peer, local(), peer.descriptor().buffers().get(0)), "the open one stays");
                RecordedSlices t = RecordedSlices.device().add(true, localMem.address(), b.address(), 64);
                capped.submit(peer, t); // a race past canTransfer: retryable, one slice only
                assertEquals(SliceFailure.TRANSIENT, t.failures.get(0));
                assertTrue(t.outcome.get(0).contains(CudaIpcTransport.MAX_HANDLES_ENV), t.outcome.get(0));
                assertEquals(1, capped.openHandles(4));
            } finally {
                capped.uninstall();
            }
        }
        TransportException e = assertThrows(TransportException.class, () -> new CudaIpcTransport(initiatorDriver,
                CudaIpcConfig.fromEnvironment(Map.of(CudaIpcTransport.MAX_HANDLES_ENV, "lots"))).install(context()));
        assertTrue(e.getMessage().contains("positive number"), e.getMessage());
    }

    @Test
    void malformedAdvertsAreRefusedWithTheReasonAndLoggedOncePerPeer() throws Exception {
        LocalBuffer a = remoteBuffer(0, 64 << 10);
        assertEquals(0, target.registerBuffers(List.of(a)));
        SegmentDescriptor d = describe(List.of(a), target);
        SegmentDescriptor.Buffer real = d.buffers().get(0);
        @SuppressWarnings("unchecked")
        Map<String, Object> good = (Map<String, Object>) real.extensions().get(CudaIpcAdvert.KEY);
        Map<String, Object[]> cases = new LinkedHashMap<>();
        cases.put("hex digits", new Object[] {"handle", "zz"});
        cases.put("not hexadecimal", new Object[] {"handle", "g".repeat(128)});
        cases.put("\"offset\"", new Object[] {"offset", -1L});
        cases.put("does not fit", new Object[] {"offset", ALLOC});
        cases.put("\"size\"", new Object[] {"size", "big"});
        cases.put("\"device\"", new Object[] {"device", 7L});
        try (LogCapture logs = LogCapture.start(CudaIpcTransport.class)) {
            long id = 10;
            for (Map.Entry<String, Object[]> c : cases.entrySet()) {
                Map<String, Object> bad = new LinkedHashMap<>(good);
                bad.put((String) c.getValue()[0], c.getValue()[1]);
                SegmentDescriptor.Buffer forged = real.withExtension(CudaIpcAdvert.KEY, bad);
                String err = CudaIpcAdvert.bufferOf(forged).error();
                assertTrue(err != null && err.contains(c.getKey()), c.getKey() + ": " + err);
                FixedPeer peer = FixedPeer.asCore(id++, withBuffer(d, forged));
                assertFalse(initiator.canTransfer(peer, local(), forged), c.getKey());
                assertFalse(initiator.canTransfer(peer, local(), forged), c.getKey());
                RecordedSlices s = RecordedSlices.device().add(true, localMem.address(), forged.addr(), 64);
                initiator.submit(peer, s);
                assertEquals(SliceFailure.UNREACHABLE, s.failures.get(0));
            }
            SegmentDescriptor.Buffer notAMap = real.withExtension(CudaIpcAdvert.KEY, "garbage");
            assertTrue(CudaIpcAdvert.bufferOf(notAMap).error().contains("not an object"));
            assertEquals(cases.size(), logs.matching(Level.WARN, "advertises its buffer").size(), "once per peer");
        }
        assertEquals(0, initiatorDriver.opens(), "nothing malformed reached the driver");
    }

    @Test
    void notOfferedToOtherMachinesCppPeersItsOwnProcessOrHostMemory() throws Exception {
        LocalBuffer a = remoteBuffer(0, 64 << 10);
        assertEquals(0, target.registerBuffers(List.of(a)));
        SegmentDescriptor d = describe(List.of(a), target);
        SegmentDescriptor.Buffer ra = d.buffers().get(0);
        assertTrue(initiator.canTransfer(FixedPeer.asCore(20, d), local(), ra));
        @SuppressWarnings("unchecked")
        Map<String, Object> top = new LinkedHashMap<>((Map<String, Object>) d.extensions().get(CudaIpcAdvert.KEY));
        top.put("machine", "another-host/another-boot");
        SegmentDescriptor elsewhere = d.withExtension(CudaIpcAdvert.KEY, top);
        assertFalse(initiator.canTransfer(FixedPeer.asCore(21, elsewhere), local(), ra), "another machine");
        assertFalse(initiator.reaches(FixedPeer.asCore(21, elsewhere)));
        SegmentDescriptor cpp = withBuffer(SegmentDescriptor.tcp("h:1", 1, List.of()),
                SegmentDescriptor.Buffer.tcp("h:1", ra.addr(), ra.length()));
        assertFalse(initiator.canTransfer(FixedPeer.asCore(22, cpp), local(), cpp.buffers().get(0)), "a C++ peer");
        assertFalse(initiator.canTransfer(FixedPeer.asCore(24, d), LocalBuffer.of(0x1000, 64, "cpu:0"), ra), "host memory");
        // the target's own descriptor, seen by the target itself (two engines in one process)
        try (FakeDeviceMemory.DeviceBuffer mine = gpus.allocate(1, 4096)) {
            targetDriver.own(mine);
            assertFalse(target.canTransfer(FixedPeer.asCore(23, d), LocalBuffer.of(mine.address(), 4096, "cuda:1"), ra),
                    "a process cannot open its own handles");
        }
        assertThrows(TransportException.class, () -> new CudaIpcTransport(
                new FakeIpcDriver(new FakeIpcDriver.Machine(gpus, 2), "nogpu").unavailable("no driver")).install(null));
    }

    @Test
    void locationsParse() {
        assertEquals(0, CudaIpcTransport.deviceIndex("cuda"));
        assertEquals(3, CudaIpcTransport.deviceIndex("cuda:3"));
        assertEquals(-1, CudaIpcTransport.deviceIndex("cuda:x"));
        assertEquals(-1, CudaIpcTransport.deviceIndex("cuda:-1"));
        assertEquals("GPU-00112233-4455-6677-8899-aabbccddeeff", CudaDriverIpc.uuidText(
                java.util.HexFormat.of().parseHex("00112233445566778899aabbccddeeff")));
    }

    // ------------------------------------------------------------------ fixtures

    private static SegmentDescriptor withBuffer(SegmentDescriptor d, SegmentDescriptor.Buffer b) {
        return new SegmentDescriptor(d.name(), d.protocol(), d.tcpDataPort(), d.tcpProtoVersion(), d.timestamp(), null,
                List.of(b), List.of(), Map.of(), d.extensions());
    }

    private static io.mooncake4j.engine.spi.TransportContext context() {
        return new io.mooncake4j.engine.spi.TransportContext() {
            @Override
            public String hostname() {
                return "127.0.0.1";
            }

            @Override
            public String segmentName() {
                return "127.0.0.1:1";
            }

            @Override
            public String deviceFilter() {
                return "";
            }

            @Override
            public String machineId() {
                return io.mooncake4j.engine.spi.MachineIdentity.local();
            }

            @Override
            public List<LocalBuffer> registeredBuffers() {
                return List.of();
            }

            @Override
            public java.util.concurrent.ThreadFactory threads(String component) {
                return Thread::new;
            }

            @Override
            public void serveHandshake(int type, java.util.function.Function<Object, String> handler) {}

            @Override
            public String handshake(String peer, int type, String body) {
                throw new UnsupportedOperationException();
            }
        };
    }
}
