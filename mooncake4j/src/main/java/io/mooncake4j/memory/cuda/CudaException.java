package io.mooncake4j.memory.cuda;

import io.mooncake4j.MooncakeException;
import java.util.Locale;

/**
 * A CUDA call on the control path failed (allocation, registration, stream creation). Carries
 * the {@code cudaError_t} value, or {@code -1} when the failure did not come from CUDA.
 *
 * <p>The memory area's exception: it extends the library's root directly, since {@code memory} sits
 * below the engine and knows nothing of it (engine code that calls CUDA reports these as they are).
 */
public class CudaException extends MooncakeException {

    private static final long serialVersionUID = 1L;

    /** The {@code cudaError_t} of the failed call. */
    private final int errorCode;

    /**
     * A failed CUDA call.
     *
     * @param message   what failed
     * @param errorCode the {@code cudaError_t} it returned
     */
    public CudaException(String message, int errorCode) {
        super(message);
        this.errorCode = errorCode;
    }

    /**
     * A failed CUDA call with its cause.
     *
     * @param message   what failed
     * @param errorCode the {@code cudaError_t} it returned
     * @param cause     the underlying error
     */
    public CudaException(String message, int errorCode, Throwable cause) {
        super(message, cause);
        this.errorCode = errorCode;
    }

    /** {@return the {@code cudaError_t} value; -1 when not from CUDA} */
    public int errorCode() {
        return errorCode;
    }

    static CudaException failed(String operation, int code, String detail) {
        return new CudaException(String.format(Locale.ROOT, "%s failed: %s%s", operation,
                CudaError.describe(code), detail.isEmpty() ? "" : " (" + detail + ")"), code);
    }
}
