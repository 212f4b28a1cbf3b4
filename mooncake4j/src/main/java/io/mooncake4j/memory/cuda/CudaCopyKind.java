package io.mooncake4j.memory.cuda;

/**
 * The direction of a copy ({@code cudaMemcpyKind}, values from {@code driver_types.h}).
 *
 * <p>Copies name their direction explicitly: JCuda 12.6.0's {@code cudaMemcpy} and
 * {@code cudaMemcpyAsync} accept only these four kinds and answer
 * {@code cudaErrorInvalidMemcpyDirection} for {@code cudaMemcpyDefault}. Device-to-device also
 * covers copies between two GPUs (unified addressing finds both ends).
 */
public enum CudaCopyKind {
    /** {@code cudaMemcpyHostToHost}. */
    HOST_TO_HOST(0),
    /** {@code cudaMemcpyHostToDevice}. */
    HOST_TO_DEVICE(1),
    /** {@code cudaMemcpyDeviceToHost}. */
    DEVICE_TO_HOST(2),
    /** {@code cudaMemcpyDeviceToDevice}. */
    DEVICE_TO_DEVICE(3);

    private final int code;

    CudaCopyKind(int code) {
        this.code = code;
    }

    /** {@return the {@code cudaMemcpyKind} value} */
    public int code() {
        return code;
    }

    /**
     * {@return the kind for a copy into device memory or not, from device memory or not}
     *
     * @param dstIsDevice whether the destination is device memory
     * @param srcIsDevice whether the source is device memory
     */
    public static CudaCopyKind of(boolean dstIsDevice, boolean srcIsDevice) {
        if (dstIsDevice) {
            return srcIsDevice ? DEVICE_TO_DEVICE : HOST_TO_DEVICE;
        }
        return srcIsDevice ? DEVICE_TO_HOST : HOST_TO_HOST;
    }
}
