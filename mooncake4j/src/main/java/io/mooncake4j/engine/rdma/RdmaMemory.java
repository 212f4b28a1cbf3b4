package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.rdma.RdmaProvider.Device;
import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.engine.rdma.verbs.IbvPd;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.memory.MemoryLocation;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The RDMA transport's registered memory: each buffer's memory regions on every open device (split
 * into pieces of at most {@code max_mr_size}), the bytes pinned against {@code RLIMIT_MEMLOCK},
 * GPU memory through GPUDirect ({@link GpuDirectRegistration}), and the published location of
 * {@code "*"} host memory. Owned by one {@link RdmaTransport}.
 *
 * <p>Thread-safe: registration and release serialise on this object's lock and replace
 * {@link #current()} as a whole; the data path reads it without a lock. Failures are reported
 * through the transport's {@code fail} (its last error, logged at ERROR) and a return code.
 */
final class RdmaMemory {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaMemory.class);

    /** Host memory ({@code ibv_reg_mr}); the GPU paths are {@link GpuDirectRegistration}'s. */
    static final String PATH_HOST = "host";

    private final GpuDirectSupport gpu;
    private final GpuDirectRegistration gpuRegistration;
    private final RdmaEngineConfig config;
    private final Consumer<String> fail;
    private final Object lock = new Object();
    /** Replaced as a whole under {@link #lock}; read lock-free by the data path. */
    private volatile LocalRegistrations regs = LocalRegistrations.EMPTY;
    /** Host bytes registered (GPU memory is not pinned host memory); under {@link #lock}. */
    private long registeredBytes;

    RdmaMemory(GpuDirectSupport gpu, GpuDirectRegistration gpuRegistration, RdmaEngineConfig config,
            Consumer<String> fail) {
        this.gpu = gpu;
        this.gpuRegistration = gpuRegistration;
        this.config = config;
        this.fail = fail;
    }

    /** The registrations now (lock-free; replaced as a whole on change). */
    LocalRegistrations current() {
        return regs;
    }

    /** {@code cuda:N} when {@code address} is GPU memory, else null. */
    String detectLocation(long address) {
        int dev = gpu.deviceOf(address);
        return dev >= 0 ? MemoryLocation.cuda(dev) : null;
    }

    /**
     * Registers on every device. {@code cuda:N} memory goes through GPUDirect RDMA: as a dma-buf
     * ({@code cuMemGetHandleForAddressRange} + {@code ibv_reg_dmabuf_mr}) where both exist,
     * otherwise by its device pointer ({@code ibv_reg_mr}, which works when {@code nvidia_peermem}
     * is loaded); when neither works the error names the fixes. Without CUDA, {@code cuda:N} fails
     * with {@link ErrorCodes#DEVICE_NOT_FOUND} and the probe's cause. GPU memory is not counted
     * against {@code RLIMIT_MEMLOCK}. {@code "*"} host memory is published as
     * {@code cpu:<node of its first page>}.
     */
    int register(RdmaContext[] ctxs, RdmaSettings settings, Map<String, List<List<String>>> priorityMatrix,
            List<LocalBuffer> buffers) {
        synchronized (lock) {
            int n = buffers.size();
            long[] addresses = new long[n];
            long[] lengths = new long[n];
            String[] locations = new String[n];
            for (int i = 0; i < n; i++) {
                LocalBuffer b = buffers.get(i);
                addresses[i] = b.address();
                lengths[i] = b.length();
                locations[i] = b.location();
                if (MemoryLocation.isCuda(locations[i])) {
                    try {
                        gpu.checkLocation(locations[i]);
                    } catch (RuntimeException e) {
                        fail.accept(String.format(Locale.ROOT, "registerMemory(0x%x, %s): %s", addresses[i], locations[i],
                                e.getMessage()));
                        return ErrorCodes.DEVICE_NOT_FOUND;
                    }
                }
            }
            long total = 0;
            for (int i = 0; i < n; i++) {
                if (!MemoryLocation.isCuda(locations[i])) {
                    total += lengths[i];
                }
            }
            OptionalLong limit = config.memlockLimit().get();
            Optional<String> problem = MemlockCheck.check(total, registeredBytes, ctxs.length, limit);
            String memlockHint = null;
            if (problem.isPresent()) {
                if (!config.ipcLock().getAsBoolean()) {
                    fail.accept("registerMemory: " + problem.get());
                    return ErrorCodes.MEMORY;
                }
                // the kernel does not apply RLIMIT_MEMLOCK to a process with CAP_IPC_LOCK (as C++ Mooncake, go ahead)
                memlockHint = problem.get();
                LOG.info("registerMemory: above RLIMIT_MEMLOCK, but the process has CAP_IPC_LOCK, so the limit does"
                        + " not apply; registering");
            }
            int access = IbvPd.ACCESS_LOCAL_WRITE | IbvPd.ACCESS_REMOTE_WRITE | IbvPd.ACCESS_REMOTE_READ
                    | (settings.relaxedOrdering() ? IbvPd.ACCESS_RELAXED_ORDERING : 0);
            List<LocalRegistration> added = new ArrayList<>();
            try {
                long maxMr = settings.maxMrSize();
                for (int i = 0; i < n; i++) {
                    if (lengths[i] > maxMr) { // more than one MR may hold: one MR (and published buffer) per piece
                        LOG.warn("registerMemory: splitting 0x{} ({} bytes) into {} pieces of at most {} bytes"
                                + " (MC_MAX_MR_SIZE / the device's max_mr_size)", Long.toHexString(addresses[i]),
                                lengths[i], (lengths[i] + maxMr - 1) / maxMr, maxMr);
                    }
                    int first = added.size();
                    for (long off = 0; off < lengths[i]; off += maxMr) {
                        added.add(registerOne(ctxs, addresses[i], addresses[i] + off,
                                Math.min(maxMr, lengths[i] - off), locations[i], access, priorityMatrix));
                    }
                    if (MemoryLocation.WILDCARD.equals(locations[i])) {
                        // as Mooncake: "*" host memory is published as cpu:<node of its first page>, read
                        // after pinning (the pages are mapped then), for all pieces of the buffer
                        int node = config.numaNodeOf().applyAsInt(addresses[i]);
                        if (node >= 0) {
                            List<String> names = Arrays.stream(ctxs).map(c -> c.name).toList();
                            for (int k = first; k < added.size(); k++) {
                                added.set(k, added.get(k).relocated(MemoryLocation.cpu(node), priorityMatrix, names));
                            }
                        }
                    }
                }
            } catch (RuntimeException e) {
                for (LocalRegistration r : added) {
                    closeMrs(r.mrs());
                }
                fail.accept("registerMemory: " + e.getMessage() + (memlockHint == null ? "" : " (note: " + memlockHint
                        + "; CAP_IPC_LOCK should have lifted it)"));
                return ErrorCodes.CONTEXT;
            }
            regs = regs.plus(added);
            registeredBytes += total;
            return ErrorCodes.OK;
        }
    }

    private LocalRegistration registerOne(RdmaContext[] ctxs, long owner, long address, long length, String location,
            int access, Map<String, List<List<String>>> priorityMatrix) {
        MemoryRegion[] mrs = new MemoryRegion[ctxs.length];
        int[] lkeys = new int[ctxs.length];
        String[] paths = new String[ctxs.length];
        if (MemoryLocation.isCuda(location)) {
            Device[] devices = new Device[ctxs.length];
            for (int i = 0; i < ctxs.length; i++) {
                devices[i] = ctxs[i].device;
            }
            gpuRegistration.register(devices, address, length, MemoryLocation.index(location), access, mrs, paths);
            for (int i = 0; i < ctxs.length; i++) {
                lkeys[i] = mrs[i].lkey();
            }
        } else {
            Device[] devices = new Device[ctxs.length];
            for (int i = 0; i < ctxs.length; i++) {
                devices[i] = ctxs[i].device;
            }
            MemoryRegion[] made = ParallelRegistration.register(devices, address, length, access);
            for (int i = 0; i < ctxs.length; i++) {
                mrs[i] = made[i];
                lkeys[i] = mrs[i].lkey();
                paths[i] = PATH_HOST;
            }
        }
        return LocalRegistration.of(owner, address, length, location, mrs, lkeys, paths, priorityMatrix,
                Arrays.stream(ctxs).map(c -> c.name).toList());
    }

    /**
     * {@link DeviceMemoryAccess.Kind#DIRECT} for {@code cuda:N} when GPU memory is usable here: the
     * description says whether dma-buf registration will be used or the peer-memory path (and
     * whether {@code nvidia_peermem} is seen in sysfs; registration reports it if it is missing).
     * {@link DeviceMemoryAccess.Kind#UNSUPPORTED} with the cause and the fix when CUDA (or GPU N)
     * is unavailable. Other locations: {@link DeviceMemoryAccess.Kind#UNKNOWN}.
     */
    DeviceMemoryAccess access(String location) {
        return gpuRegistration.access(location);
    }

    /** How each device registered the buffer at {@code address} ({@code "host"}, {@code "dma-buf"}, {@code "peer-memory"}), or empty. */
    List<String> paths(long address) {
        for (LocalRegistration r : regs.all()) {
            if (r.address() == address) {
                return List.of(r.paths());
            }
        }
        return List.of();
    }

    static void closeMrs(MemoryRegion[] mrs) {
        for (MemoryRegion mr : mrs) {
            if (mr != null) {
                try {
                    mr.close();
                } catch (RuntimeException e) {
                    LOG.warn("deregistering memory at 0x{} failed: {}", Long.toHexString(mr.address()), e.getMessage());
                }
            }
        }
    }

    /** Deregisters these buffers' regions on every device (every piece of each). */
    void unregister(List<LocalBuffer> buffers) {
        synchronized (lock) {
            for (LocalBuffer b : buffers) {
                List<LocalRegistration> pieces = regs.ownedBy(b.address());
                regs = regs.minusOwner(b.address());
                for (LocalRegistration r : pieces) {
                    if (!MemoryLocation.isCuda(r.location())) {
                        registeredBytes -= r.length();
                    }
                    closeMrs(r.mrs());
                }
            }
        }
    }

    /** Deregisters everything (the transport is uninstalling). */
    void releaseAll() {
        synchronized (lock) {
            for (LocalRegistration reg : regs.all()) {
                closeMrs(reg.mrs());
            }
            regs = LocalRegistrations.EMPTY;
            registeredBytes = 0;
        }
    }
}
