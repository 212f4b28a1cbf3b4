package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.cuda.CudaAvailability;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * GPUDirect registration in the RDMA engine, without a GPU or a NIC: the emulated fabric plus a
 * fake "CUDA driver" ({@link FakeGpuDirect}) whose GPU memory is a host range. Which path is
 * chosen (dma-buf, peer memory, neither), what {@code ibv_reg_dmabuf_mr} receives, that the
 * dma-buf descriptor is closed, what {@code deviceMemoryAccess} answers, and that host memory is
 * registered as before.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class GpuDirectRegistrationTest {

    private static final long BUF = 1L << 20;

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private final List<CoreEngine> engines = new ArrayList<>();
    private EmulatedRdmaProvider fabric;
    private HostMemoryStorage gpuMemory;
    private FakeGpuDirect gpu;

    @BeforeEach
    void setUp() {
        fabric = new EmulatedRdmaProvider("emu0", "emu1").dmabuf(true);
        gpuMemory = alloc.allocate(BUF);
        gpu = new FakeGpuDirect(gpuMemory.address(), BUF);
    }

    @AfterEach
    void tearDown() {
        for (CoreEngine e : engines) {
            e.close();
        }
        alloc.close();
    }

    private CoreEngine engine(String devices, GpuDirectSupport g) {
        CoreEngine e = EmulatedEngines.alone(fabric, EmulatedEngines.config(), Optional::empty, g);
        engines.add(e);
        assertEquals(0, e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", devices), e::lastError);
        return e;
    }

    private CoreEngine engine() {
        return engine("emu0,emu1", gpu);
    }

    private static String location(CoreEngine e, long address) {
        for (SegmentDescriptor.Buffer b : e.localDescriptor().buffers()) {
            if (b.addr() == address) {
                return b.name();
            }
        }
        return null;
    }

    @Test
    void dmaBufPathIsChosenWhenLibraryAndGpuSupportItAndTheDescriptorIsClosedAfterwards() {
        CoreEngine e = engine();
        long a = gpuMemory.address();
        assertEquals(0, e.registerMemory(a, BUF, "cuda:0"), e::lastError);

        assertEquals(List.of("dma-buf", "dma-buf"), RdmaTransport.in(e).registrationPaths(a));
        assertEquals(List.of(100), gpu.exported(), "one export for all devices");
        assertEquals(List.of(100), gpu.closed(), "the dma-buf fd is closed after registration");
        long offset = a & (FakeGpuDirect.PAGE - 1);
        assertEquals(List.of(
                String.format(Locale.ROOT, "dmabuf emu0 offset=%d len=%d iova=0x%x fd=100", offset, BUF, a),
                String.format(Locale.ROOT, "dmabuf emu1 offset=%d len=%d iova=0x%x fd=100", offset, BUF, a)),
                fabric.registrationLog());
        assertEquals("cuda:0", location(e, a));
    }

    @Test
    void dmaBufOffsetIsTheAddressWithinTheExportedPage() {
        CoreEngine e = engine("emu0", gpu);
        long a = (gpuMemory.address() & -FakeGpuDirect.PAGE) + FakeGpuDirect.PAGE + 100; // inside the buffer, unaligned
        assertEquals(0, e.registerMemory(a, 4096, "cuda:0"), e::lastError);
        assertEquals(List.of(String.format(Locale.ROOT, "dmabuf emu0 offset=100 len=4096 iova=0x%x fd=100", a)),
                fabric.registrationLog());
    }

    @Test
    void wildcardGpuMemoryIsRegisteredAsCudaThroughDmaBuf() {
        CoreEngine e = engine();
        HostMemoryStorage host = alloc.allocate(BUF);
        assertEquals(0, e.batchRegisterMemory(new long[] {gpuMemory.address(), host.address()},
                new long[] {BUF, BUF}), e::lastError);
        assertEquals("cuda:0", location(e, gpuMemory.address()));
        assertEquals("*", location(e, host.address()));
        assertEquals(List.of("dma-buf", "dma-buf"), RdmaTransport.in(e).registrationPaths(gpuMemory.address()));
        assertEquals(List.of("host", "host"), RdmaTransport.in(e).registrationPaths(host.address()));
    }

    @Test
    void exportFailureFallsBackToPeerMemory() {
        gpu.failExport("cuMemGetHandleForAddressRange failed: CUDA_ERROR_NOT_SUPPORTED (801)");
        CoreEngine e = engine();
        long a = gpuMemory.address();
        assertEquals(0, e.registerMemory(a, BUF, "cuda:0"), e::lastError);
        assertEquals(List.of("peer-memory", "peer-memory"), RdmaTransport.in(e).registrationPaths(a));
        assertEquals(1, gpu.exports().size());
        assertEquals(List.of(), gpu.exported());
        assertEquals(List.of(String.format(Locale.ROOT, "reg emu0 0x%x %d", a, BUF),
                String.format(Locale.ROOT, "reg emu1 0x%x %d", a, BUF)), fabric.registrationLog());
    }

    @Test
    void libraryWithoutRegDmabufMrUsesPeerMemoryWithoutExporting() {
        fabric.dmabuf(false);
        CoreEngine e = engine();
        assertEquals(0, e.registerMemory(gpuMemory.address(), BUF, "cuda:0"), e::lastError);
        assertEquals(List.of("peer-memory", "peer-memory"), RdmaTransport.in(e).registrationPaths(gpuMemory.address()));
        assertEquals(List.of(), gpu.exports(), "no export when ibv_reg_dmabuf_mr is absent");
    }

    @Test
    void gpuWithoutDmaBufSupportUsesPeerMemoryWithoutExporting() {
        gpu.dmaBufUnsupported("GPU 0 does not support dma-buf export");
        CoreEngine e = engine();
        assertEquals(0, e.registerMemory(gpuMemory.address(), BUF, "cuda:0"), e::lastError);
        assertEquals(List.of("peer-memory", "peer-memory"), RdmaTransport.in(e).registrationPaths(gpuMemory.address()));
        assertEquals(List.of(), gpu.exports());
    }

    @Test
    void driverRefusingDmaBufFallsBackToPeerMemoryAndStillClosesTheDescriptor() {
        fabric.failDmabuf(EmulatedRdmaProvider.EOPNOTSUPP);
        CoreEngine e = engine();
        assertEquals(0, e.registerMemory(gpuMemory.address(), BUF, "cuda:0"), e::lastError);
        assertEquals(List.of("peer-memory", "peer-memory"), RdmaTransport.in(e).registrationPaths(gpuMemory.address()));
        assertEquals(gpu.exported(), gpu.closed());
        assertEquals(1, gpu.closed().size());
    }

    @Test
    void bothPathsFailingIsAClearErrorAndLeavesNothingRegistered() {
        fabric.failDmabuf(EmulatedRdmaProvider.EOPNOTSUPP)
                .failPlainRegistration(gpuMemory.address(), gpuMemory.address() + BUF, EmulatedRdmaProvider.EFAULT);
        CoreEngine e = engine();
        int before = fabric.liveMemoryRegions();
        int rc = e.registerMemory(gpuMemory.address(), BUF, "cuda:0");

        assertTrue(rc < 0, "rc " + rc);
        String why = e.lastError();
        assertTrue(why.contains("cuda:0") && why.contains("ibv_reg_dmabuf_mr") && why.contains("ibv_reg_mr"), why);
        assertTrue(why.contains("modprobe nvidia_peermem") && why.contains("5.12") && why.contains("\"tcp\""), why);
        assertEquals(before, fabric.liveMemoryRegions(), "no MR left behind");
        assertEquals(List.of(), RdmaTransport.in(e).registrationPaths(gpuMemory.address()));
        assertEquals(ErrorCodes.ADDRESS_NOT_REGISTERED, e.unregisterMemory(gpuMemory.address()));
        assertEquals(gpu.exported(), gpu.closed(), "the descriptor is closed on failure too");
        // the engine still registers host memory
        HostMemoryStorage host = alloc.allocate(4096);
        assertEquals(0, e.registerMemory(host.address(), 4096, "cpu:0"), e::lastError);
    }

    @Test
    void cudaLocationWithoutCudaIsRefusedWithTheCause() {
        gpu.unavailable("no CUDA driver (libcuda.so.1 not found); install the NVIDIA driver");
        CoreEngine e = engine();
        assertEquals(ErrorCodes.DEVICE_NOT_FOUND, e.registerMemory(gpuMemory.address(), BUF, "cuda:0"));
        assertTrue(e.lastError().contains("libcuda.so.1 not found"), e.lastError());
        assertEquals(List.of(), fabric.registrationLog());
        // '*' on such a host is host memory
        assertEquals(0, e.registerMemory(gpuMemory.address(), BUF, "*"), e::lastError);
        assertEquals(List.of("host", "host"), RdmaTransport.in(e).registrationPaths(gpuMemory.address()));
    }

    @Test
    void deviceMemoryAccessAnswersDirectOrUnsupported() {
        CoreEngine e = engine();
        DeviceMemoryAccess dma = e.deviceMemoryAccess("cuda:0");
        assertEquals(DeviceMemoryAccess.Kind.DIRECT, dma.kind());
        assertTrue(dma.description().contains("dma-buf"), dma.description());

        gpu.dmaBufUnsupported("GPU 0 does not support dma-buf export");
        DeviceMemoryAccess peer = e.deviceMemoryAccess("cuda:0");
        assertEquals(DeviceMemoryAccess.Kind.DIRECT, peer.kind());
        assertTrue(peer.description().contains("peer-memory") && peer.description().contains("nvidia_peermem")
                && peer.description().contains("does not support dma-buf"), peer.description());

        DeviceMemoryAccess missing = e.deviceMemoryAccess("cuda:3");
        assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, missing.kind());
        assertTrue(missing.description().contains("does not exist"), missing.description());

        gpu.unavailable("no CUDA driver; install the NVIDIA driver");
        DeviceMemoryAccess none = e.deviceMemoryAccess("cuda:0");
        assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, none.kind());
        assertTrue(none.description().contains("GPUDirect") && none.description().contains("no CUDA driver"),
                none.description());

        assertEquals(DeviceMemoryAccess.Kind.UNKNOWN, e.deviceMemoryAccess("cpu:0").kind());
    }

    @Test
    void realCudaSupportAnswersUnsupportedOnAHostWithoutCuda() {
        assumeFalse(CudaAvailability.isAvailable(), "CUDA is available here; the gpu-tagged test covers this host");
        CoreEngine e = engine("emu0", GpuDirectSupport.cuda());
        DeviceMemoryAccess a = e.deviceMemoryAccess("cuda:0");
        assertEquals(DeviceMemoryAccess.Kind.UNSUPPORTED, a.kind());
        assertTrue(a.description().contains(CudaAvailability.unavailabilityCause().getMessage()), a.description());
        assertEquals(ErrorCodes.DEVICE_NOT_FOUND, e.registerMemory(gpuMemory.address(), BUF, "cuda:0"));
    }

    @Test
    void hostMemoryIsRegisteredAsBeforeWhenGpuDirectIsAvailable() {
        CoreEngine e = engine();
        HostMemoryStorage host = alloc.allocate(BUF);
        assertEquals(0, e.registerMemory(host.address(), BUF, "cpu:0"), e::lastError);
        assertEquals(List.of("host", "host"), RdmaTransport.in(e).registrationPaths(host.address()));
        assertEquals(List.of(String.format(Locale.ROOT, "reg emu0 0x%x %d", host.address(), BUF),
                String.format(Locale.ROOT, "reg emu1 0x%x %d", host.address(), BUF)),
                fabric.registrationLog().stream().sorted().toList(), "one per device (registered in parallel)");
        assertEquals(List.of(), gpu.exports());
    }

    @Test
    void bytesWrittenIntoDmaBufRegisteredMemoryArrive() {
        CoreEngine target = engine("emu0", gpu);
        CoreEngine initiator = engine("emu1", new FakeGpuDirect(0, 0));
        HostMemoryStorage src = alloc.allocate(BUF);
        for (long i = 0; i < BUF; i += 8) {
            src.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 31 + 7);
        }
        assertEquals(0, target.registerMemory(gpuMemory.address(), BUF, "cuda:0"), target::lastError);
        assertEquals(List.of("dma-buf"), RdmaTransport.in(target).registrationPaths(gpuMemory.address()));
        assertEquals(0, initiator.registerMemory(src.address(), BUF, "cpu:0"), initiator::lastError);

        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {src.address()},
                new long[] {gpuMemory.address()}, new long[] {BUF}));
        assertArrayEquals(src.segment().toArray(ValueLayout.JAVA_BYTE),
                gpuMemory.segment().toArray(ValueLayout.JAVA_BYTE));
    }
}
