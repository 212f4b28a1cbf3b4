package io.mooncake4j.memory.cuda;

/**
 * A CUDA event (timing disabled): marks a point in a {@link CudaStream} so that its owner can
 * tell when the work enqueued before that point has finished — one chunk of a pipelined staging
 * copy, say — without waiting for the whole stream, and so that another stream can wait for it
 * ({@link CudaStream#waitFor}).
 *
 * <p>The data-path methods return the {@code cudaError_t} and allocate nothing. Not thread-safe:
 * owned by the thread that owns the streams it is recorded on. Close after its last use.
 */
public final class CudaEvent implements AutoCloseable {

    private final int device;
    private final Object event; // jcuda.runtime.cudaEvent_t
    private boolean closed;

    private CudaEvent(int device, Object event) {
        this.device = device;
        this.event = event;
    }

    /**
     * Creates an event on GPU {@code device}.
     *
     * @param device the GPU index
     * @return the new event; the caller closes it
     */
    public static CudaEvent create(int device) {
        CudaAvailability.checkDevice(device);
        int rc = JCudaBinding.setDevice(device);
        Object e = JCudaBinding.newEvent();
        if (rc == CudaError.SUCCESS) {
            rc = JCudaBinding.eventCreate(e, JCudaBinding.EVENT_DISABLE_TIMING);
        }
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaEventCreateWithFlags on cuda:" + device, rc, "");
        }
        return new CudaEvent(device, e);
    }

    /** {@return the GPU index the event was created on} */
    public int device() {
        return device;
    }

    /**
     * Records the event at the current end of {@code stream}; returns the CUDA error code.
     *
     * @param stream the stream
     * @return the CUDA error code
     */
    public int record(CudaStream stream) {
        check();
        return JCudaBinding.eventRecord(event, stream.handle());
    }

    /**
     * {@return {@link CudaError#SUCCESS} once the recorded work is done, {@link CudaError#NOT_READY} before, else the error}
     */
    public int query() {
        check();
        return JCudaBinding.eventQuery(event);
    }

    /**
     * Waits for the recorded work; returns the CUDA error code.
     *
     * @return the CUDA error code
     */
    public int synchronize() {
        check();
        return JCudaBinding.eventSynchronize(event);
    }

    Object handle() {
        check();
        return event;
    }

    private void check() {
        if (closed) {
            throw new IllegalStateException("event is closed");
        }
    }

    /** Destroys the event; idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        int rc = JCudaBinding.eventDestroy(event);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaEventDestroy on cuda:" + device, rc, "");
        }
    }
}
