package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaDeviceStorage;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The RDMA engine's GPUDirect registration with the real CUDA side ({@link GpuDirectSupport#cuda()}:
 * the probe, pointer attributes, a real dma-buf export) on the emulated fabric, so it runs on a GPU
 * host without a NIC: {@code *} GPU memory resolves to {@code cuda:0}, the dma-buf path is taken
 * when the GPU can export, and the descriptor handed to {@code ibv_reg_dmabuf_mr} is a real one.
 */
@Tag("gpu")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GpuDirectCudaGpuTest {

    @Test
    void realGpuMemoryIsRegisteredThroughDmaBufOnTheEmulatedFabric() {
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
        GpuDirectSupport cuda = GpuDirectSupport.cuda();
        Optional<String> dmaBuf = cuda.unavailability().or(() -> cuda.dmaBufUnsupported(0));
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0").dmabuf(true);
        try (CudaDeviceStorage gpu = CudaDeviceStorage.allocate(0, 8L << 20);
                CoreEngine e = EmulatedEngines.alone(fabric, EmulatedEngines.config(), Optional::empty, cuda)) {
            assertEquals(0, e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "emu0"), e::lastError);
            DeviceMemoryAccess access = e.deviceMemoryAccess("cuda:0");
            System.out.println("deviceMemoryAccess(cuda:0) = " + access);
            assertEquals(DeviceMemoryAccess.Kind.DIRECT, access.kind());

            assertEquals(0, e.registerMemory(gpu.address(), gpu.byteSize(), "*"), e::lastError);
            List<String> paths = RdmaTransport.in(e).registrationPaths(gpu.address());
            System.out.println("registration paths: " + paths + "; fabric: " + fabric.registrationLog()
                    + "; dma-buf: " + dmaBuf.orElse("supported"));
            assertEquals(dmaBuf.isEmpty() ? List.of("dma-buf") : List.of("peer-memory"), paths);
            assertTrue(e.localDescriptor().buffers().stream().anyMatch(b -> b.name().equals("cuda:0")));
            assertEquals(0, e.unregisterMemory(gpu.address()));
        }
    }
}
