package io.mooncake4j.engine.rdma;

import java.util.Optional;

/**
 * What the RDMA transport asks the GPU side when it registers GPU memory (GPUDirect RDMA): is
 * GPU memory usable at all, which device an address belongs to, and can a device range be
 * exported as a dma-buf file descriptor for {@code ibv_reg_dmabuf_mr}.
 *
 * <p>{@link #cuda()} is the real one (JCuda's probe and pointer attributes, the driver API's
 * {@code cuMemGetHandleForAddressRange} through FFM); tests substitute a fake so that the
 * registration logic is verified without a GPU. Implementations are thread-safe; control path
 * only.
 */
public interface GpuDirectSupport {

    /**
     * A range exported as a dma-buf.
     *
     * @param fd     the dma-buf file descriptor
     * @param offset the requested address's offset within the exported range
     */
    record DmaBuf(int fd, long offset) {}

    /** Why GPU memory cannot be used in this process at all (with the fix); empty when it can. */
    Optional<String> unavailability();

    /**
     * Checks that {@code cuda:N} memory can be used here (CUDA present, device N exists); throws
     * a {@link RuntimeException} whose message names the cause and the fix.
     */
    void checkLocation(String location);

    /** The GPU whose memory {@code address} is, or -1 for host memory (and whenever GPUs are unavailable). */
    int deviceOf(long address);

    /** Why {@link #exportDmaBuf} cannot work for GPU {@code device}; empty when it can be tried. */
    Optional<String> dmaBufUnsupported(int device);

    /** Exports {@code [address, address + length)} of GPU {@code device} as a dma-buf; throws with the driver's error. */
    DmaBuf exportDmaBuf(int device, long address, long length);

    /** Closes a descriptor from {@link #exportDmaBuf}, once every registration using it is done. */
    void closeDmaBuf(int fd);

    /** GPUs visible to this process (0 when GPUs are unavailable); their ordinals are the {@code N} of {@code cuda:N}. */
    default int deviceCount() {
        return 0;
    }

    /** GPU {@code device}'s PCI bus id in sysfs form ({@code 0000:3b:00.0}, lower case), or empty when unknown. */
    default Optional<String> pciBusId(int device) {
        return Optional.empty();
    }

    /** The CUDA implementation (process-wide state, so one instance). */
    static GpuDirectSupport cuda() {
        return CudaGpuDirect.INSTANCE;
    }
}
