package io.mooncake4j.engine.rdma;

import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaDmaBuf;
import io.mooncake4j.memory.cuda.CudaPointers;
import io.mooncake4j.memory.cuda.CudaUnavailableException;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** {@link GpuDirectSupport} over CUDA: {@link CudaAvailability}, {@link CudaPointers}, {@link CudaDmaBuf}. Stateless. */
final class CudaGpuDirect implements GpuDirectSupport {

    private static final Logger LOG = LoggerFactory.getLogger(CudaGpuDirect.class);

    static final CudaGpuDirect INSTANCE = new CudaGpuDirect();

    private CudaGpuDirect() {}

    @Override
    public Optional<String> unavailability() {
        CudaUnavailableException c = CudaAvailability.unavailabilityCause();
        return c == null ? Optional.empty() : Optional.of(c.getMessage());
    }

    @Override
    public void checkLocation(String location) {
        CudaAvailability.checkLocation(location);
    }

    @Override
    public int deviceOf(long address) {
        return CudaPointers.deviceOf(address);
    }

    @Override
    public Optional<String> dmaBufUnsupported(int device) {
        return CudaDmaBuf.deviceUnsupported(device);
    }

    @Override
    public DmaBuf exportDmaBuf(int device, long address, long length) {
        CudaDmaBuf.Export e = CudaDmaBuf.exportRange(device, address, length);
        return new DmaBuf(e.fd(), e.offset());
    }

    @Override
    public void closeDmaBuf(int fd) {
        if (CudaDmaBuf.closeFd(fd) != 0) {
            LOG.warn("closing dma-buf descriptor {} failed", fd);
        }
    }

    @Override
    public int deviceCount() {
        return unavailability().isPresent() ? 0 : CudaAvailability.deviceCount();
    }

    /** {@code cudaDeviceGetPCIBusId}, lower-cased as sysfs names PCI functions. */
    @Override
    public Optional<String> pciBusId(int device) {
        if (unavailability().isPresent()) {
            return Optional.empty();
        }
        try { // JCuda is reached reflectively, as in memory.cuda (no module dependency on it)
            Class<?> jcuda = Class.forName("jcuda.runtime.JCuda", true, CudaGpuDirect.class.getClassLoader());
            String[] id = new String[1];
            int rc = (int) jcuda.getMethod("cudaDeviceGetPCIBusId", String[].class, int.class, int.class)
                    .invoke(null, id, 64, device);
            return rc == 0 && id[0] != null && !id[0].isBlank()
                    ? Optional.of(id[0].strip().toLowerCase(java.util.Locale.ROOT)) : Optional.empty();
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            LOG.debug("cudaDeviceGetPCIBusId({}) failed: {}", device, e.toString());
            return Optional.empty();
        }
    }

    @Override
    public String toString() {
        return "CudaGpuDirect";
    }
}
