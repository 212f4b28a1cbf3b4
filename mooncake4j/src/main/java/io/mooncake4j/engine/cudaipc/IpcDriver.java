package io.mooncake4j.engine.cudaipc;

import java.util.Locale;

/**
 * The CUDA calls the {@code cuda-ipc} transport makes, behind one small interface so that its
 * logic (adverts, open-once caching, teardown, caps, fallback) runs in tests on machines without a
 * GPU: {@link CudaDriverIpc} is the real one (the driver API on {@code libcuda.so.1}), the tests
 * have a fake whose "device memory" is host memory. Every method may be called from any thread;
 * an implementation makes the device's context current itself. Failures are {@link Failure}s with
 * the driver's code, never crashes.
 */
public interface IpcDriver {

    /** Bytes of a CUDA IPC memory handle ({@code CU_IPC_HANDLE_SIZE}). */
    int HANDLE_BYTES = 64;

    /**
     * Why CUDA IPC cannot work in this process (no driver, no GPU, native access off), naming the
     * fix; null when the other methods may be tried.
     *
     * @return why not, or null
     */
    String unavailability();

    /**
     * An identity of this process that no other process shares (a handle cannot be opened in the
     * process that made it).
     *
     * @return this process's token
     */
    String processToken();

    /**
     * The identity of local GPU {@code device}: its UUID (stable across processes and
     * {@code CUDA_VISIBLE_DEVICES} orders) and PCI bus id.
     *
     * @param device the local device index
     * @return its identity
     * @throws Failure when the driver cannot tell
     */
    DeviceId device(int device) throws Failure;

    /**
     * The allocation (as {@code cuMemAlloc}/{@code cudaMalloc} made it) containing
     * {@code address} on {@code device}: IPC handles cover whole allocations, so a buffer inside one
     * is advertised as handle + offset.
     *
     * @param device  the device the address belongs to
     * @param address any address inside the allocation
     * @return the allocation's base and size
     * @throws Failure when the address is not device memory the driver knows
     */
    Range allocation(int device, long address) throws Failure;

    /**
     * An IPC handle for the allocation based at {@code base} ({@code cuIpcGetMemHandle}).
     *
     * @param device the allocation's device
     * @param base   the allocation's base
     * @return {@link #HANDLE_BYTES} bytes
     * @throws Failure when the memory cannot be exported (e.g. not made by {@code cuMemAlloc})
     */
    byte[] exportHandle(int device, long base) throws Failure;

    /**
     * Maps another process's allocation into this one ({@code cuIpcOpenMemHandle}, peer access
     * enabled lazily), in {@code device}'s context: the allocation may live on another GPU, which
     * then needs peer access to {@code device}.
     *
     * @param device the local device whose context maps it
     * @param handle {@link #HANDLE_BYTES} bytes from the other process's {@link #exportHandle}
     * @return the mapped base address in this process
     * @throws Failure when the handle cannot be opened (another container, no peer access, the
     *                 allocation freed, a handle of this very process)
     */
    long open(int device, byte[] handle) throws Failure;

    /**
     * Unmaps what {@link #open} mapped ({@code cuIpcCloseMemHandle}).
     *
     * @param device the device {@link #open} was called with
     * @param mapped the address {@link #open} returned
     * @throws Failure when the driver refuses
     */
    void close(int device, long mapped) throws Failure;

    /**
     * Copies {@code bytes} between two device addresses (either may be a mapped one, on any device)
     * and returns once they arrived.
     *
     * @param device the device whose copy engine and context run the copy
     * @param dst    destination device address
     * @param src    source device address
     * @param bytes  how many
     * @throws Failure when the copy failed
     */
    void copy(int device, long dst, long src, long bytes) throws Failure;

    /** Releases what the driver holds for this process (streams, contexts). Idempotent. */
    void shutdown();

    /**
     * A device's identity.
     *
     * @param uuid     {@code GPU-xxxxxxxx-xxxx-...} form of the 16-byte UUID
     * @param pciBusId {@code 0000:3b:00.0} form, "" when unknown
     */
    record DeviceId(String uuid, String pciBusId) {}

    /**
     * An address range.
     *
     * @param base  first byte
     * @param bytes length
     */
    record Range(long base, long bytes) {}

    /** A driver call failed: the call, the driver's code and its name. */
    final class Failure extends Exception {
        private static final long serialVersionUID = 1L;
        private final int code;

        /**
         * @param call    what was called, with its arguments
         * @param code    the driver's result code (-1 when there is none)
         * @param meaning the code's name or an explanation
         */
        public Failure(String call, int code, String meaning) {
            super(String.format(Locale.ROOT, "%s failed: %s (%d)", call, meaning, code));
            this.code = code;
        }

        /** {@return the driver's result code, -1 when there is none} */
        public int code() {
            return code;
        }
    }
}
