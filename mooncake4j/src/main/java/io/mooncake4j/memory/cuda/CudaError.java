package io.mooncake4j.memory.cuda;

import java.util.Locale;

/**
 * The {@code cudaError_t} values this project tells apart, with their CUDA names.
 *
 * <p>The numbers are CUDA's frozen ABI ({@code driver_types.h}, {@code enum cudaError}); they are
 * written here so that errors can be named without JCuda being loaded. Data-path methods in this
 * package return these codes; control-path methods throw {@link CudaException}.
 */
public final class CudaError {

    /** {@code cudaSuccess}. */
    public static final int SUCCESS = 0;
    /** {@code cudaErrorInvalidValue}. */
    public static final int INVALID_VALUE = 1;
    /** {@code cudaErrorMemoryAllocation}. */
    public static final int MEMORY_ALLOCATION = 2;
    /** {@code cudaErrorInitializationError}. */
    public static final int INITIALIZATION_ERROR = 3;
    /** {@code cudaErrorInvalidMemcpyDirection}. */
    public static final int INVALID_MEMCPY_DIRECTION = 21;
    /** {@code cudaErrorStubLibrary}. */
    public static final int STUB_LIBRARY = 34;
    /** {@code cudaErrorInsufficientDriver}. */
    public static final int INSUFFICIENT_DRIVER = 35;
    /** {@code cudaErrorCallRequiresNewerDriver}. */
    public static final int CALL_REQUIRES_NEWER_DRIVER = 36;
    /** {@code cudaErrorDevicesUnavailable}. */
    public static final int DEVICES_UNAVAILABLE = 46;
    /** {@code cudaErrorNoDevice}. */
    public static final int NO_DEVICE = 100;
    /** {@code cudaErrorInvalidDevice}. */
    public static final int INVALID_DEVICE = 101;
    /** {@code cudaErrorInvalidResourceHandle}. */
    public static final int INVALID_RESOURCE_HANDLE = 400;
    /** {@code cudaErrorNotReady}. */
    public static final int NOT_READY = 600;
    /** {@code cudaErrorIllegalAddress}. */
    public static final int ILLEGAL_ADDRESS = 700;
    /** {@code cudaErrorHostMemoryAlreadyRegistered}. */
    public static final int HOST_MEMORY_ALREADY_REGISTERED = 712;
    /** {@code cudaErrorHostMemoryNotRegistered}. */
    public static final int HOST_MEMORY_NOT_REGISTERED = 713;
    /** {@code cudaErrorSystemDriverMismatch}. */
    public static final int SYSTEM_DRIVER_MISMATCH = 803;
    /** {@code cudaErrorCompatNotSupportedOnDevice}. */
    public static final int COMPAT_NOT_SUPPORTED_ON_DEVICE = 804;
    /** {@code cudaErrorUnknown}. */
    public static final int UNKNOWN = 999;

    private CudaError() {}

    /**
     * {@return CUDA's name for {@code code} ({@code cudaErrorInsufficientDriver}), or {@code cudaError <code>}}
     *
     * @param code a {@code cudaError_t} value
     */
    public static String name(int code) {
        return switch (code) {
            case SUCCESS -> "cudaSuccess";
            case INVALID_VALUE -> "cudaErrorInvalidValue";
            case MEMORY_ALLOCATION -> "cudaErrorMemoryAllocation";
            case INITIALIZATION_ERROR -> "cudaErrorInitializationError";
            case INVALID_MEMCPY_DIRECTION -> "cudaErrorInvalidMemcpyDirection";
            case STUB_LIBRARY -> "cudaErrorStubLibrary";
            case INSUFFICIENT_DRIVER -> "cudaErrorInsufficientDriver";
            case CALL_REQUIRES_NEWER_DRIVER -> "cudaErrorCallRequiresNewerDriver";
            case DEVICES_UNAVAILABLE -> "cudaErrorDevicesUnavailable";
            case NO_DEVICE -> "cudaErrorNoDevice";
            case INVALID_DEVICE -> "cudaErrorInvalidDevice";
            case INVALID_RESOURCE_HANDLE -> "cudaErrorInvalidResourceHandle";
            case NOT_READY -> "cudaErrorNotReady";
            case ILLEGAL_ADDRESS -> "cudaErrorIllegalAddress";
            case HOST_MEMORY_ALREADY_REGISTERED -> "cudaErrorHostMemoryAlreadyRegistered";
            case HOST_MEMORY_NOT_REGISTERED -> "cudaErrorHostMemoryNotRegistered";
            case SYSTEM_DRIVER_MISMATCH -> "cudaErrorSystemDriverMismatch";
            case COMPAT_NOT_SUPPORTED_ON_DEVICE -> "cudaErrorCompatNotSupportedOnDevice";
            case UNKNOWN -> "cudaErrorUnknown";
            default -> "cudaError " + code;
        };
    }

    /**
     * {@return {@code "cudaErrorInsufficientDriver (35)"}}
     *
     * @param code a {@code cudaError_t} value
     */
    public static String describe(int code) {
        return String.format(Locale.ROOT, "%s (%d)", name(code), code);
    }
}
