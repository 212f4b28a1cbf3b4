package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.memory.MemoryLocation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * GPUDirect RDMA registration of GPU memory ({@code cuda:N}) for the RDMA engine: a dma-buf
 * ({@code cuMemGetHandleForAddressRange} + {@code ibv_reg_dmabuf_mr}) where both exist, otherwise
 * the device pointer ({@code ibv_reg_mr}, which works with {@code nvidia_peermem}); and the
 * engine's {@code deviceMemoryAccess} answer. Stateless apart from its collaborators;
 * thread-safe as they are.
 */
final class GpuDirectRegistration {

    private static final Logger LOG = LoggerFactory.getLogger(GpuDirectRegistration.class);
    /** GPU memory registered as a dma-buf ({@code ibv_reg_dmabuf_mr}). */
    static final String PATH_DMA_BUF = "dma-buf";
    /** GPU memory registered by its device pointer ({@code ibv_reg_mr}, needs nvidia_peermem). */
    static final String PATH_PEER_MEMORY = "peer-memory";

    private final RdmaProvider provider;
    private final GpuDirectSupport gpu;
    private final Path sysfsRoot;

    GpuDirectRegistration(RdmaProvider provider, GpuDirectSupport gpu, Path sysfsRoot) {
        this.provider = provider;
        this.gpu = gpu;
        this.sysfsRoot = sysfsRoot;
    }

    /**
     * GPUDirect registration of GPU {@code gpuIndex}'s memory on every context, filling
     * {@code mrs}/{@code paths}: the range is exported once as a dma-buf (when the library has
     * {@code ibv_reg_dmabuf_mr} and the GPU can export), registered with it on each device
     * (offset within the export, iova = the device address), and the descriptor closed
     * afterwards; a device that refuses it, or no dma-buf at all, falls back to {@code ibv_reg_mr}
     * on the device pointer (the peer-memory path). Throws with both causes and the fixes when a
     * device can do neither; then nothing stays registered.
     */
    void register(Device[] devices, long address, long length, int gpuIndex, int access, MemoryRegion[] mrs,
            String[] paths) {
        String dmaBufProblem = dmaBufProblem(gpuIndex);
        GpuDirectSupport.DmaBuf buf = null;
        if (dmaBufProblem == null) {
            try {
                buf = gpu.exportDmaBuf(gpuIndex, address, length);
            } catch (RuntimeException e) {
                dmaBufProblem = "dma-buf export failed: " + e.getMessage();
            }
        }
        try {
            for (int i = 0; i < devices.length; i++) {
                Device d = devices[i];
                String deviceProblem = dmaBufProblem;
                if (buf != null) {
                    try {
                        mrs[i] = d.registerDmabuf(buf.offset(), length, address, buf.fd(), access);
                        paths[i] = PATH_DMA_BUF;
                        continue;
                    } catch (RuntimeException e) {
                        deviceProblem = e.getMessage();
                    }
                }
                try {
                    mrs[i] = d.register(address, length, access);
                    paths[i] = PATH_PEER_MEMORY;
                    if (buf != null) {
                        LOG.warn("{}: ibv_reg_dmabuf_mr refused GPU memory at 0x{} ({}); registered through the"
                                + " peer-memory path instead", d.name(), Long.toHexString(address), deviceProblem);
                    }
                } catch (RuntimeException e) {
                    throw new TransferEngineException(String.format(Locale.ROOT,
                            "cannot register GPU memory cuda:%d at 0x%x (%d bytes) on %s for GPUDirect RDMA."
                                    + " dma-buf path: %s. Peer-memory path (ibv_reg_mr on the device pointer): %s."
                                    + " Fix one of: load the peer-memory module (modprobe nvidia_peermem); use a"
                                    + " kernel >= 5.12 with an NVIDIA driver that exports dma-bufs and rdma-core >= 34"
                                    + " (ibv_reg_dmabuf_mr); or use protocol \"tcp\", which stages GPU memory through"
                                    + " pinned host buffers", gpuIndex, address, length, d.name(), deviceProblem,
                            e.getMessage()), e);
                }
            }
        } catch (RuntimeException e) {
            RdmaMemory.closeMrs(mrs);
            Arrays.fill(mrs, null);
            throw e;
        } finally {
            if (buf != null) {
                gpu.closeDmaBuf(buf.fd());
            }
        }
        LOG.info("registered GPU memory cuda:{} at 0x{} ({} bytes) for GPUDirect RDMA on {}: {}", gpuIndex,
                Long.toHexString(address), length, Arrays.stream(devices).map(Device::name).toList(), List.of(paths));
        if (buf == null) {
            LOG.info("dma-buf registration not used for cuda:{}: {}", gpuIndex, dmaBufProblem);
        }
    }

    /** Why the dma-buf path cannot be tried for GPU {@code gpuIndex}, or null when it can. */
    String dmaBufProblem(int gpuIndex) {
        if (!provider.supportsDmabuf()) {
            return "libibverbs has no ibv_reg_dmabuf_mr (rdma-core >= 34 needed)";
        }
        try {
            return gpu.dmaBufUnsupported(gpuIndex).orElse(null);
        } catch (RuntimeException e) {
            return e.getMessage();
        }
    }

    /** Whether sysfs shows a peer-memory module ({@code nvidia_peermem}, or the older {@code nv_peer_mem}). */
    static boolean peerMemoryModuleLoaded(Path sysfsRoot) {
        return Files.isDirectory(sysfsRoot.resolve("module/nvidia_peermem"))
                || Files.isDirectory(sysfsRoot.resolve("module/nv_peer_mem"));
    }

    /**
     * {@link DeviceMemoryAccess.Kind#DIRECT} for {@code cuda:N} when GPU memory is usable here: the
     * description says whether dma-buf registration will be used or the peer-memory path (and
     * whether {@code nvidia_peermem} is seen in sysfs; registration reports it if it is missing).
     * {@link DeviceMemoryAccess.Kind#UNSUPPORTED} with the cause and the fix when CUDA (or GPU N)
     * is unavailable. Other locations: {@link DeviceMemoryAccess.Kind#UNKNOWN}.
     */
    /** {@link RdmaTransport#deviceMemoryAccess}. */
    DeviceMemoryAccess access(String location) {
        if (!MemoryLocation.isCuda(location)) {
            return DeviceMemoryAccess.unknown();
        }
        try {
            gpu.checkLocation(location);
        } catch (RuntimeException e) {
            return DeviceMemoryAccess.unsupported(String.format(Locale.ROOT,
                    "the RDMA transport reaches GPU memory at %s directly (GPUDirect RDMA), but: %s", location,
                    e.getMessage()));
        }
        int dev = MemoryLocation.index(location);
        String dmaBuf = dmaBufProblem(dev);
        boolean peer = peerMemoryModuleLoaded(sysfsRoot);
        if (dmaBuf == null) {
            return DeviceMemoryAccess.direct("GPUDirect RDMA: registered as a dma-buf (cuMemGetHandleForAddressRange"
                    + " + ibv_reg_dmabuf_mr)" + (peer ? "; the peer-memory path (nvidia_peermem) as fallback" : ""));
        }
        return DeviceMemoryAccess.direct("GPUDirect RDMA through the peer-memory path (ibv_reg_mr on the device"
                + " pointer; " + (peer ? "nvidia_peermem is loaded" : "needs nvidia_peermem, which sysfs does not show"
                + " loaded: registration fails with the fix if it is missing") + "); dma-buf not used: " + dmaBuf);
    }
}
