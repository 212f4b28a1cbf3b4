package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.MemoryLocation;
import java.util.Locale;

/**
 * GPU memory from {@code cudaMalloc} on one device, location {@code cuda:N}, with an explicit
 * lifetime: {@link #close()} calls {@code cudaFree}; closing twice is harmless. A NIC, a stream
 * or a peer may still be using the memory, so nothing frees it implicitly: close it after every
 * registration is gone and every copy has completed.
 *
 * <p>{@link #hostSegment()} is empty: the host cannot dereference the address. Move bytes with
 * {@link CudaCopies} or a {@link CudaStream}. Thread-safe.
 */
public final class CudaDeviceStorage implements DeviceMemory.Allocation {

    private final int device;
    private final long address;
    private final long byteSize;
    private final String location;
    private final Object pointer; // the jcuda.Pointer cudaMalloc filled in
    private boolean closed; // guarded by this

    private CudaDeviceStorage(int device, long address, long byteSize, Object pointer) {
        this.device = device;
        this.address = address;
        this.byteSize = byteSize;
        this.location = MemoryLocation.cuda(device);
        this.pointer = pointer;
    }

    /**
     * Allocates {@code bytes} on GPU {@code device}. Throws {@link CudaUnavailableException} when
     * CUDA cannot be used here, {@link CudaException} when the device does not exist or
     * {@code cudaMalloc} fails (out of memory, for instance).
     *
     * @param device the GPU index
     * @param bytes  the size in bytes
     * @return the new storage; the caller closes it
     */
    public static CudaDeviceStorage allocate(int device, long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive, got " + bytes);
        }
        CudaAvailability.checkDevice(device);
        int rc = JCudaBinding.setDevice(device);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaSetDevice(" + device + ")", rc, "");
        }
        Object p = JCudaBinding.newPointer();
        rc = JCudaBinding.malloc(p, bytes);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed(String.format(Locale.ROOT, "cudaMalloc(%d bytes) on cuda:%d", bytes, device),
                    rc, rc == CudaError.MEMORY_ALLOCATION ? "the GPU is out of memory; free memory or allocate less" : "");
        }
        return new CudaDeviceStorage(device, JCudaBinding.address(p), bytes, p);
    }

    /**
     * Allocates {@code bytes} at {@code location}, which must be {@code cuda:N}.
     *
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     * @param bytes    the size in bytes
     * @return the new storage; the caller closes it
     */
    public static CudaDeviceStorage allocate(String location, long bytes) {
        CudaAvailability.checkLocation(location);
        if (!MemoryLocation.isCuda(location)) {
            throw new IllegalArgumentException("device storage needs a cuda:N location, got " + location);
        }
        return allocate(MemoryLocation.index(location), bytes);
    }

    /** The GPU index. */
    @Override
    public int device() {
        return device;
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long byteSize() {
        return byteSize;
    }

    @Override
    public String location() {
        return location;
    }

    /** {@return whether the memory is still allocated (not yet closed)} */
    public synchronized boolean isAlive() {
        return !closed;
    }

    /**
     * Sets every byte to {@code value} ({@code cudaMemset}, synchronous).
     *
     * @param value the byte every position gets
     */
    public synchronized void fill(byte value) {
        if (closed) {
            throw new IllegalStateException(this + " was freed");
        }
        int rc = JCudaBinding.setDevice(device);
        if (rc == CudaError.SUCCESS) {
            rc = JCudaBinding.memset(pointer, value & 0xff, byteSize);
        }
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaMemset on " + this, rc, "");
        }
    }

    /** Frees the memory ({@code cudaFree}); throws {@link CudaException} if CUDA reports an error. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        int rc = JCudaBinding.setDevice(device);
        if (rc == CudaError.SUCCESS) {
            rc = JCudaBinding.free(pointer);
        }
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaFree of " + this, rc, "");
        }
    }

    @Override
    public String toString() {
        return "CudaDeviceStorage[0x" + Long.toHexString(address) + ", " + byteSize + " B, " + location + "]";
    }
}
