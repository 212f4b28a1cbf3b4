package io.mooncake4j.engine.rdma;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A fake "CUDA driver" for the RDMA engine's GPUDirect registration: one GPU (device 0) whose
 * "memory" is a host range the test chooses, so the emulated fabric can even move its bytes.
 * Knobs: CUDA available or not (with a cause), dma-buf export supported, export failing.
 * Records every exported descriptor and every close. Thread-safe (synchronized); test sources only.
 */
final class FakeGpuDirect implements GpuDirectSupport {

    static final long PAGE = 4096;

    private final long base;
    private final long size;
    private String unavailable;
    private String dmaBufUnsupported;
    private String exportFailure;
    private int nextFd = 100;
    private final List<Integer> exported = new ArrayList<>();
    private final List<Integer> closed = new ArrayList<>();
    private final List<String> exports = new ArrayList<>();
    private List<String> busIds = List.of();

    /** GPU 0 owns {@code [base, base + size)}; CUDA available, dma-buf export supported. */
    FakeGpuDirect(long base, long size) {
        this.base = base;
        this.size = size;
    }

    /** The GPUs' PCI bus ids (default: one GPU, bus id unknown). */
    synchronized FakeGpuDirect pciBusIds(String... ids) {
        busIds = List.of(ids);
        return this;
    }

    @Override
    public synchronized int deviceCount() {
        return unavailable != null ? 0 : Math.max(1, busIds.size());
    }

    @Override
    public synchronized Optional<String> pciBusId(int device) {
        return device < busIds.size() ? Optional.of(busIds.get(device)) : Optional.empty();
    }

    synchronized FakeGpuDirect unavailable(String cause) {
        unavailable = cause;
        return this;
    }

    synchronized FakeGpuDirect dmaBufUnsupported(String why) {
        dmaBufUnsupported = why;
        return this;
    }

    synchronized FakeGpuDirect failExport(String why) {
        exportFailure = why;
        return this;
    }

    /** Descriptors handed out, in order. */
    synchronized List<Integer> exported() {
        return List.copyOf(exported);
    }

    /** Descriptors closed, in order. */
    synchronized List<Integer> closed() {
        return List.copyOf(closed);
    }

    /** {@code "gpu0 0x<addr> <len>"} per export call. */
    synchronized List<String> exports() {
        return List.copyOf(exports);
    }

    @Override
    public synchronized Optional<String> unavailability() {
        return Optional.ofNullable(unavailable);
    }

    @Override
    public synchronized void checkLocation(String location) {
        if (unavailable != null) {
            throw new IllegalStateException("memory location '" + location + "' needs a GPU, but " + unavailable);
        }
        if (!location.equals("cuda:0")) {
            throw new IllegalStateException("GPU " + location + " does not exist: the fake has cuda:0 only");
        }
    }

    @Override
    public synchronized int deviceOf(long address) {
        return unavailable == null && address >= base && address < base + size ? 0 : -1;
    }

    @Override
    public synchronized Optional<String> dmaBufUnsupported(int device) {
        return Optional.ofNullable(dmaBufUnsupported);
    }

    @Override
    public synchronized DmaBuf exportDmaBuf(int device, long address, long length) {
        exports.add(String.format(java.util.Locale.ROOT, "gpu%d 0x%x %d", device, address, length));
        if (exportFailure != null) {
            throw new IllegalStateException(exportFailure);
        }
        int fd = nextFd++;
        exported.add(fd);
        return new DmaBuf(fd, address & (PAGE - 1));
    }

    @Override
    public synchronized void closeDmaBuf(int fd) {
        closed.add(fd);
    }
}
