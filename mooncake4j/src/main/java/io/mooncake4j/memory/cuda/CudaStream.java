package io.mooncake4j.memory.cuda;

import java.util.Locale;

/**
 * A non-blocking CUDA stream on one device, for asynchronous copies that overlap with other work
 * (the TCP transport stages GPU memory through pinned bounce buffers this way).
 *
 * <p>{@link #copyAsync} enqueues and returns at once; {@link #query()} and
 * {@link #synchronize()} tell when everything enqueued so far has finished. Copies to or from
 * pageable host memory are legal but not asynchronous; use {@link CudaPinnedHostAllocator}
 * memory for overlap. The data-path methods return the {@code cudaError_t} and allocate nothing
 * (the stream re-aims two JCuda pointer objects it owns).
 *
 * <p>Not thread-safe: one owner thread enqueues and queries, as with a socket or a queue pair.
 * {@link #close()} waits for outstanding copies, then destroys the stream.
 */
public final class CudaStream implements AutoCloseable {

    private final int device;
    private final Object stream;     // jcuda.runtime.cudaStream_t
    private final Object dstScratch; // jcuda.Pointer, re-aimed per copy
    private final Object srcScratch;
    private boolean closed;

    private CudaStream(int device, Object stream) {
        this.device = device;
        this.stream = stream;
        this.dstScratch = JCudaBinding.newPointer();
        this.srcScratch = JCudaBinding.newPointer();
    }

    /**
     * Creates a non-blocking stream on GPU {@code device}.
     *
     * @param device the GPU index
     * @return the new stream; the caller closes it
     */
    public static CudaStream create(int device) {
        CudaAvailability.checkDevice(device);
        int rc = JCudaBinding.setDevice(device);
        Object s = JCudaBinding.newStream();
        if (rc == CudaError.SUCCESS) {
            rc = JCudaBinding.streamCreate(s, JCudaBinding.STREAM_NON_BLOCKING);
        }
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaStreamCreateWithFlags on cuda:" + device, rc, "");
        }
        return new CudaStream(device, s);
    }

    /** {@return the GPU index the stream was created on} */
    public int device() {
        return device;
    }

    /**
     * Enqueues a copy of {@code bytes} from {@code src} to {@code dst} in direction {@code kind};
     * returns the CUDA error code of the enqueue.
     *
     * @param dst   the destination address
     * @param src   the source address
     * @param bytes the size in bytes
     * @param kind  the copy direction
     * @return the CUDA error code of the enqueue
     */
    public int copyAsync(long dst, long src, long bytes, CudaCopyKind kind) {
        if (closed) {
            throw new IllegalStateException("stream is closed");
        }
        if (bytes == 0) {
            return CudaError.SUCCESS;
        }
        int rc = JCudaBinding.setDevice(device);
        if (rc != CudaError.SUCCESS) {
            return rc;
        }
        JCudaBinding.setAddress(dstScratch, dst);
        JCudaBinding.setAddress(srcScratch, src);
        return JCudaBinding.memcpyAsync(dstScratch, srcScratch, bytes, kind.code(), stream);
    }

    /**
     * Makes work enqueued after this call wait until {@code event} has completed (which may be
     * recorded on another stream); returns the CUDA error code.
     *
     * @param event the completion point
     * @return the CUDA error code
     */
    public int waitFor(CudaEvent event) {
        if (closed) {
            throw new IllegalStateException("stream is closed");
        }
        return JCudaBinding.streamWaitEvent(stream, event.handle());
    }

    Object handle() {
        return stream;
    }

    /**
     * {@return {@link CudaError#SUCCESS} when all enqueued work is done, {@link CudaError#NOT_READY} while some is pending, else the error}
     */
    public int query() {
        if (closed) {
            throw new IllegalStateException("stream is closed");
        }
        return JCudaBinding.streamQuery(stream);
    }

    /**
     * Waits for all enqueued work; returns the CUDA error code (of the first failed copy, if any).
     *
     * @return the CUDA error code (of the first failed copy, if any)
     */
    public int synchronize() {
        if (closed) {
            throw new IllegalStateException("stream is closed");
        }
        return JCudaBinding.streamSynchronize(stream);
    }

    /** Waits for outstanding work and destroys the stream; idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        int sync = JCudaBinding.streamSynchronize(stream);
        int rc = JCudaBinding.streamDestroy(stream);
        if (sync != CudaError.SUCCESS || rc != CudaError.SUCCESS) {
            throw CudaException.failed(String.format(Locale.ROOT, "closing the stream on cuda:%d", device),
                    sync != CudaError.SUCCESS ? sync : rc, "");
        }
    }

    @Override
    public String toString() {
        return "CudaStream[cuda:" + device + ", 0x" + Long.toHexString(JCudaBinding.address(stream)) + "]";
    }
}
