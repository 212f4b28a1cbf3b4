package io.mooncake4j.store;

/**
 * A Mooncake Store call that failed as a whole: the master could not be reached or answered
 * nothing decodable ({@link ErrorCode#RPC_FAIL}), no answer came before the deadline
 * ({@link ErrorCode#RPC_TIMEOUT}), or the client was used wrongly. Per-key outcomes of batch calls
 * are not exceptions: they are the codes in the results.
 *
 * <p>The store client is an artifact of its own ({@code mooncake4j-store}), so this is the root of its
 * errors rather than a member of the library's sealed {@code MooncakeException} family (a sealed class
 * permits subclasses of its own module only); a wrong configuration still throws the library's
 * {@code MooncakeConfigException}.
 */
public final class StoreException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** The Mooncake error code (negative). */
    private final int errorCode;

    /**
     * An error with a Mooncake {@link ErrorCode} value.
     *
     * @param errorCode the code (negative)
     * @param message   what happened
     * @param cause     the underlying error, or null
     */
    public StoreException(int errorCode, String message, Throwable cause) {
        super(message, cause);
        this.errorCode = errorCode;
    }

    /** {@return the Mooncake error code (negative), as the Python binding would return it} */
    public int errorCode() {
        return errorCode;
    }
}
