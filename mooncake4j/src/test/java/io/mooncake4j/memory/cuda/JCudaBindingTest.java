package io.mooncake4j.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every bound JCuda call, exercised where JCuda's library loads but no driver exists: each must
 * come back as {@code cudaErrorInsufficientDriver} through its method handle (which checks the
 * handle types and the argument adaptation) instead of throwing. The pointer plumbing is checked
 * the same way.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JCudaBindingTest {

    private static final int NO_DRIVER = CudaError.INSUFFICIENT_DRIVER;

    @BeforeEach
    void onlyWithJCudaLoadedAndNoDriver() {
        assumeTrue(CudaAvailability.reason() == CudaAvailability.Reason.INSUFFICIENT_DRIVER,
                () -> "needs JCuda loaded without a driver; here: " + CudaAvailability.summary());
    }

    @Test
    void pointersCarryRawAddressesBothWays() {
        Object p = JCudaBinding.pointer(0x7f00_1234_5000L);
        assertEquals(0x7f00_1234_5000L, JCudaBinding.address(p));
        JCudaBinding.setAddress(p, 42);
        assertEquals(42, JCudaBinding.address(p));
        assertEquals(0, JCudaBinding.address(JCudaBinding.newPointer()));
        assertEquals(0, JCudaBinding.address(JCudaBinding.newStream()));
    }

    @Test
    void everyBoundCallReturnsTheDriverErrorWithoutThrowing() {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            HostMemoryStorage a = alloc.allocate(4096);
            HostMemoryStorage b = alloc.allocate(4096);
            Object pa = JCudaBinding.pointer(a.address());
            Object pb = JCudaBinding.pointer(b.address());
            int[] count = {-1};
            assertEquals(NO_DRIVER, JCudaBinding.getDeviceCount(count));
            assertEquals(NO_DRIVER, JCudaBinding.setDevice(0));
            assertEquals(NO_DRIVER, JCudaBinding.malloc(JCudaBinding.newPointer(), 4096));
            assertEquals(NO_DRIVER, JCudaBinding.hostRegister(pa, 4096, JCudaBinding.HOST_REGISTER_PORTABLE));
            assertEquals(NO_DRIVER, JCudaBinding.hostUnregister(pa));
            assertEquals(NO_DRIVER, JCudaBinding.memcpy(pb, pa, 16, CudaCopyKind.HOST_TO_DEVICE.code()));
            Object stream = JCudaBinding.newStream();
            assertEquals(NO_DRIVER, JCudaBinding.streamCreate(stream, JCudaBinding.STREAM_NON_BLOCKING));
            assertEquals(NO_DRIVER, JCudaBinding.memcpyAsync(pb, pa, 16, CudaCopyKind.HOST_TO_DEVICE.code(), stream));
            Object event = JCudaBinding.newEvent();
            assertEquals(NO_DRIVER, JCudaBinding.eventCreate(event, JCudaBinding.EVENT_DISABLE_TIMING));
            int[] typeAndDevice = {-1, -1};
            assertEquals(NO_DRIVER, JCudaBinding.pointerAttributes(a.address(), typeAndDevice));
            assertEquals(-1, typeAndDevice[0]);
            assertEquals(NO_DRIVER, JCudaBinding.memGetInfo(new long[1], new long[1]));
            assertEquals("device 0 (cudaErrorInsufficientDriver)", JCudaBinding.deviceName(0));
            // (cudaMemcpyDefault, 4, is refused by JCuda itself with cudaErrorInvalidMemcpyDirection
            // and a line on the native stdout, which would corrupt surefire's channel: not called here)
        }
    }
}
