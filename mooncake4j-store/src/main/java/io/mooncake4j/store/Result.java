package io.mooncake4j.store;

import java.util.Locale;

/**
 * The master's {@code tl::expected<T, ErrorCode>}: a value, or a Mooncake error code.
 *
 * @param value the value when {@link #ok()} ({@code null} for {@code expected<void>})
 * @param code  0 when ok, else the negative {@link ErrorCode} value
 * @param <T>   the value's type
 */
public record Result<T>(T value, int code) {

    /**
     * {@return a success}
     *
     * @param value the value ({@code null} for {@code expected<void>})
     * @param <T>   the value's type
     */
    public static <T> Result<T> ok(T value) {
        return new Result<>(value, 0);
    }

    /**
     * {@return a failure with {@code code}}
     *
     * @param code the error code (not 0)
     * @param <T>  the value's type
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if {@code code} is 0
     */
    public static <T> Result<T> error(int code) {
        if (code == 0) {
            throw Args.invalid("an error code is not 0");
        }
        return new Result<>(null, code);
    }

    /** {@return whether the call succeeded} */
    public boolean ok() {
        return code == 0;
    }

    /**
     * {@return whether the call failed because the key is not there ({@link ErrorCode#OBJECT_NOT_FOUND}):
     * a miss, which callers treat as "compute it", not as a failure of the store}
     */
    public boolean missing() {
        return code == ErrorCode.OBJECT_NOT_FOUND.code();
    }

    /** {@return the named error code ({@link ErrorCode#OK} on success)} */
    public ErrorCode errorCode() {
        return ErrorCode.of(code);
    }

    /** {@return the value, or throws {@link StoreException} with the error code} */
    public T orThrow() {
        if (code != 0) {
            throw new StoreException(code, "master answered " + ErrorCode.describe(code), null);
        }
        return value;
    }

    @Override
    public String toString() {
        return code == 0 ? String.format(Locale.ROOT, "ok(%s)", value) : ErrorCode.describe(code);
    }
}
