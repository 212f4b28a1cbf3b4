package io.mooncake4j.engine.cudaipc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaCopies;
import io.mooncake4j.memory.cuda.CudaCopyKind;
import io.mooncake4j.memory.cuda.CudaDeviceStorage;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link CudaDriverIpc} on a real GPU, in one process: the allocation range of an interior
 * pointer, exporting a handle, the device identity, and its device-to-device copy. Opening a handle
 * needs a second process: {@code scripts/gpu-check.sh} runs {@code bench} as target and initiator
 * with {@code MC_TRANSPORTS=cuda-ipc,tcp} for that. Skipped with the probe's cause where CUDA is
 * unavailable.
 */
@Tag("gpu")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CudaDriverIpcGpuTest {

    private static final long MIB = 1L << 20;

    private CudaDriverIpc driver;
    private CudaDeviceStorage a;
    private CudaDeviceStorage b;
    private HostMemoryAllocator host;

    @BeforeEach
    void setUp() {
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
        driver = new CudaDriverIpc();
        a = CudaDeviceStorage.allocate(0, 8 * MIB);
        b = CudaDeviceStorage.allocate(0, 8 * MIB);
        host = new HostMemoryAllocator();
    }

    @AfterEach
    void tearDown() {
        if (driver != null) {
            driver.shutdown();
            a.close();
            b.close();
            host.close();
        }
    }

    @Test
    void findsTheAllocationOfAnInteriorPointerAndExportsItsHandle() throws Exception {
        assertNull(driver.unavailability());
        IpcDriver.Range r = driver.allocation(0, a.address() + 4096);
        assertEquals(a.address(), r.base(), "the base of the cudaMalloc allocation");
        assertTrue(r.bytes() >= 8 * MIB, "size " + r.bytes());
        byte[] h = driver.exportHandle(0, r.base());
        assertEquals(IpcDriver.HANDLE_BYTES, h.length);
        boolean nonZero = false;
        for (byte x : h) {
            nonZero |= x != 0;
        }
        assertTrue(nonZero, "a handle of zeros");
        assertThrows(IpcDriver.Failure.class, () -> driver.allocation(0, host.allocate(4096).address()),
                "host memory is no device allocation");
    }

    @Test
    void namesTheDeviceByUuidAndPciBusId() throws Exception {
        IpcDriver.DeviceId id = driver.device(0);
        assertTrue(id.uuid().matches("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), id.uuid());
        assertTrue(id.pciBusId().matches("[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\\.[0-9]"), id.pciBusId());
    }

    @Test
    void copiesDeviceToDeviceAndWaits() throws Exception {
        HostMemoryStorage src = host.allocate(MIB);
        HostMemoryStorage back = host.allocate(MIB);
        for (long i = 0; i < MIB; i += 8) {
            src.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
        }
        assertEquals(0, CudaCopies.copy(a.address(), src.address(), MIB, CudaCopyKind.HOST_TO_DEVICE));
        driver.copy(0, b.address() + 4096, a.address(), MIB);
        assertEquals(0, CudaCopies.copy(back.address(), b.address() + 4096, MIB, CudaCopyKind.DEVICE_TO_HOST));
        assertArrayEquals(src.segment().toArray(ValueLayout.JAVA_BYTE), back.segment().toArray(ValueLayout.JAVA_BYTE));
    }
}
