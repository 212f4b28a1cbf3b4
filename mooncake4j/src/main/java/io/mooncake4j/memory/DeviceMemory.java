package io.mooncake4j.memory;

/**
 * How a transport reaches GPU memory it cannot dereference: which addresses are device memory,
 * asynchronous copies between host and device memory on an ordered queue with per-point
 * completion, and page-locked host memory for bounce buffers.
 *
 * <p>The real implementation is {@code io.mooncake4j.memory.cuda.CudaDeviceMemory} (a CUDA stream
 * per queue, a CUDA event per completion point, {@code cudaHostRegister}'d bounce buffers). Tests
 * substitute an emulation whose "device memory" the host cannot touch, so that a transport's
 * staging logic is verified without a GPU.
 *
 * <p>Control-path methods ({@link #checkLocation}, {@link #openQueue}, {@link #allocatePinned})
 * throw; queue methods return status codes ({@link #OK}, {@link #NOT_READY}, anything else is the
 * implementation's error code, {@code cudaError_t} for CUDA) and allocate nothing. Implementations
 * are thread-safe; a {@link CopyQueue} has one owner thread.
 */
public interface DeviceMemory {

    /** Status: the work is done. */
    int OK = 0;
    /** Status: the work is still pending ({@code cudaErrorNotReady}). */
    int NOT_READY = 600;

    /** The direction of a copy. */
    enum Direction {
        /** From host memory to device memory. */
        HOST_TO_DEVICE,
        /** From device memory to host memory. */
        DEVICE_TO_HOST,
        /** Between two device buffers. */
        DEVICE_TO_DEVICE;

        /**
         * {@return the direction of a copy into device memory or not, from device memory or not; null for host to host}
         *
         * @param dstIsDevice whether the destination is device memory
         * @param srcIsDevice whether the source is device memory
         */
        public static Direction of(boolean dstIsDevice, boolean srcIsDevice) {
            if (dstIsDevice) {
                return srcIsDevice ? DEVICE_TO_DEVICE : HOST_TO_DEVICE;
            }
            return srcIsDevice ? DEVICE_TO_HOST : null;
        }
    }

    /**
     * An ordered queue of asynchronous copies on one device (a CUDA stream) with a fixed number of
     * completion points (CUDA events) that the owner records after a copy and then polls or awaits.
     * Copies run in the order enqueued. Not thread-safe: one owner thread. {@link #close()} waits for
     * outstanding copies.
     */
    interface CopyQueue extends AutoCloseable {

        /** {@return the device this queue runs on} */
        int device();

        /** {@return the number of completion points, indices {@code 0..events()-1}} */
        int events();

        /**
         * {@return enqueues a copy of {@code bytes} from {@code src} to {@code dst}; returns the status of the enqueue}
         *
         * @param dst       the destination address
         * @param src       the source address
         * @param bytes     the size in bytes
         * @param direction the copy direction
         */
        int copyAsync(long dst, long src, long bytes, Direction direction);

        /**
         * Marks completion point {@code event} at the current end of the queue; returns the status.
         *
         * @param event the completion point
         * @return the status
         */
        int record(int event);

        /**
         * {@return {@link #OK} when the work before completion point {@code event} is done, {@link #NOT_READY} before, else the error of a failed copy}
         *
         * @param event the completion point
         */
        int poll(int event);

        /**
         * Waits until the work before completion point {@code event} is done; {@link #OK} or the error of a failed copy.
         *
         * @param event the completion point
         * @return {@link #OK} or the error of a failed copy
         */
        int await(int event);

        /**
         * Waits for every enqueued copy; {@link #OK} or the error of a failed copy.
         *
         * @return {@link #OK} or the error of a failed copy
         */
        int synchronize();

        /** Waits for outstanding copies and releases the queue; idempotent. */
        @Override
        void close();
    }

    /**
     * Device memory from {@link #allocate}: a {@code cuda:N} storage the host cannot dereference, freed
     * by {@link #close()} (explicitly, after every registration and copy using it has finished).
     */
    interface Allocation extends MemoryStorage, AutoCloseable {

        /** {@return the device the memory is on} */
        int device();

        /** Frees the memory; idempotent. */
        @Override
        void close();
    }

    /** {@return a short name for logs ({@code "cuda"})} */
    String name();

    /** {@return whether device memory can be used in this process} */
    boolean isAvailable();

    /** {@return why device memory cannot be used, with the fix; null when {@link #isAvailable()}} */
    RuntimeException unavailabilityCause();

    /**
     * {@return the device whose memory {@code address} is, or -1 for host memory (always -1 when unavailable)}
     *
     * @param address the first byte
     */
    int deviceOf(long address);

    /**
     * Throws unless memory at {@code location} can be used: for {@code cuda:N}, device memory must be
     * available and device {@code N} must exist (the exception says why and how to fix it);
     * {@code cpu:N} and {@code *} always pass.
     *
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     */
    void checkLocation(String location);

    /**
     * Opens a copy queue on {@code device} with {@code events} completion points.
     *
     * @param device the GPU index
     * @param events the number of completion points
     * @return the new queue; the caller closes it
     */
    CopyQueue openQueue(int device, int events);

    /**
     * Allocates {@code bytes} of page-locked host memory for bounce buffers; the caller closes the
     * storage after every copy using it has completed.
     *
     * @param bytes the size in bytes
     * @return the new storage; the caller closes it
     */
    HostMemoryStorage allocatePinned(long bytes);

    /**
     * Allocates {@code bytes} of device memory on {@code device} (control path: throws when device
     * memory is unavailable, with the cause and the fix, or when the device does not exist). The caller
     * closes it. Implementations that cannot allocate throw {@link UnsupportedOperationException}.
     *
     * @param device the GPU index
     * @param bytes  the size in bytes
     * @return the new allocation; the caller closes it
     */
    default Allocation allocate(int device, long bytes) {
        throw new UnsupportedOperationException(name() + " device memory cannot allocate; allocate with its own API");
    }

    /** {@return a description for people: implementation, devices, versions} */
    String summary();
}
