package io.mooncake4j.store;

/**
 * The one exception type of the store client: every exception a method of {@link MooncakeStoreClient},
 * {@link MasterClient} or the value types of this package throws is one, with a Mooncake error code.
 * {@link ErrorCode#INVALID_PARAMS}: the caller's mistake (a wrong argument, named in the message; a
 * closed client; at setup a configuration this client cannot run, the cause then the library's
 * {@code MooncakeConfigException} naming the key). {@link ErrorCode#RPC_FAIL}: the master could not be
 * reached or answered nothing usable. {@link ErrorCode#RPC_TIMEOUT}: no answer came before the
 * deadline. What the store says about a key is never an exception: it is the code in the call's
 * result (per key for batch calls), and a miss ({@link ErrorCode#OBJECT_NOT_FOUND}) is not a failure.
 *
 * <p>The store client is an artifact of its own ({@code mooncake4j-store}), so this is the root of its
 * errors rather than a member of the library's sealed {@code MooncakeException} family (a sealed class
 * permits subclasses of its own module only). {@link StoreConfig}'s own checks, like every
 * configuration of the project, throw {@code MooncakeConfigException}.
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
