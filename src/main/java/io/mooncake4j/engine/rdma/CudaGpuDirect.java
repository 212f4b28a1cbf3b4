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
    public String toString() {
        return "CudaGpuDirect";
    }
}
