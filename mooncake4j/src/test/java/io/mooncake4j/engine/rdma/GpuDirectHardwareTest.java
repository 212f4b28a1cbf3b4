package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaCopies;
import io.mooncake4j.memory.cuda.CudaDeviceStorage;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * GPUDirect RDMA on real hardware: an RDMA NIC and a GPU in one host. The engine registers GPU
 * memory (dma-buf or peer memory, whichever the host supports), RDMA-writes host bytes into it
 * through its own segment (loopback QPs) and the bytes are copied back with CUDA and compared.
 * Skipped with the cause unless both RDMA and CUDA are available. Run with
 * {@code mvn test -Dgroups=rdma -DexcludedTestGroups=} on such a host.
 */
@Tag("rdma")
@Tag("gpu")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class GpuDirectHardwareTest {

    private static final long BUF = 4L << 20;

    @Test
    void hostBytesRdmaWrittenIntoGpuMemoryArrive() {
        assumeTrue(RdmaAvailability.isAvailable(),
                () -> RdmaAvailability.unavailabilityCause().map(RdmaAvailability.Cause::message).orElse(""));
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CudaDeviceStorage gpu = CudaDeviceStorage.allocate(0, BUF);
                CoreEngine e = EngineBuilder.only("rdma")) {
            String devices = System.getenv("MC_TEST_RDMA_DEVICE");
            assertEquals(0, e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", devices == null ? "" : devices),
                    e::lastError);
            DeviceMemoryAccess access = e.deviceMemoryAccess("cuda:0");
            System.out.println("deviceMemoryAccess(cuda:0) = " + access);
            assertEquals(DeviceMemoryAccess.Kind.DIRECT, access.kind());
            assertEquals(0, e.registerMemory(gpu.address(), BUF, "cuda:0"), e::lastError);
            List<String> paths = RdmaTransport.in(e).registrationPaths(gpu.address());
            System.out.println("GPUDirect registration paths: " + paths);

            HostMemoryStorage src = alloc.allocate(BUF);
            HostMemoryStorage back = alloc.allocate(BUF);
            for (long i = 0; i < BUF; i += 8) {
                src.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            assertEquals(0, e.registerMemory(src.address(), BUF, "cpu:0"), e::lastError);
            assertEquals(0, e.batchTransferSyncWrite(e.getLocalSegmentName(), new long[] {src.address()},
                    new long[] {gpu.address()}, new long[] {BUF}));
            CudaCopies.copy(back, 0, gpu, 0, BUF);
            assertArrayEquals(src.segment().toArray(ValueLayout.JAVA_BYTE), back.segment().toArray(ValueLayout.JAVA_BYTE));
        }
    }
}
