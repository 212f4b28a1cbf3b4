package io.mooncake4j.memory.cuda;

/**
 * CUDA cannot be used in this process: thrown when GPU memory or a {@code cuda:N} location is
 * asked for anyway. The message says why and how to fix it; {@link #reason()} classifies it.
 */
public final class CudaUnavailableException extends CudaException {

    private static final long serialVersionUID = 1L;

    /** Why CUDA cannot be used. */
    private final CudaAvailability.Reason reason;

    CudaUnavailableException(CudaAvailability.Reason reason, String message, int errorCode, Throwable cause) {
        super(message, errorCode, cause);
        this.reason = reason;
    }

    /** {@return why CUDA is unavailable} */
    public CudaAvailability.Reason reason() {
        return reason;
    }
}
