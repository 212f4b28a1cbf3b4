package io.mooncake4j.engine;

import java.util.Objects;

/**
 * Whether and how a {@link TransferEngine} moves GPU memory ({@code cuda:N}) registered with it,
 * as {@link TransferEngine#deviceMemoryAccess} answers before any registration. Immutable.
 *
 * @param kind        the answer
 * @param description for {@link Kind#STAGED} and {@link Kind#DIRECT} how the engine moves the
 *                    memory; for {@link Kind#UNSUPPORTED} why it cannot, with the fix; for
 *                    {@link Kind#UNKNOWN} a note
 */
public record DeviceMemoryAccess(Kind kind, String description) {

    /** The possible answers. */
    public enum Kind {
        /** The engine does not say (it decides at registration). */
        UNKNOWN,
        /** The engine cannot reach GPU memory at that location; the description names the fix. */
        UNSUPPORTED,
        /** Bytes are staged through host memory (the TCP transport with CUDA). */
        STAGED,
        /** The NIC reaches the GPU memory itself (GPUDirect RDMA). */
        DIRECT
    }

    /**
     * Checks the fields.
     *
     * @throws NullPointerException when {@code kind} or {@code description} is null
     */
    public DeviceMemoryAccess {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(description, "description");
    }

    /** {@return the answer of an engine that does not say} */
    public static DeviceMemoryAccess unknown() {
        return new DeviceMemoryAccess(Kind.UNKNOWN, "the engine does not report GPU memory support");
    }

    /**
     * The engine cannot reach the memory.
     *
     * @param problem why, and how to fix it
     * @return an {@link Kind#UNSUPPORTED} answer
     */
    public static DeviceMemoryAccess unsupported(String problem) {
        return new DeviceMemoryAccess(Kind.UNSUPPORTED, problem);
    }

    /**
     * The engine stages the memory through host buffers.
     *
     * @param how how it stages (for example which copy engine and buffer size)
     * @return a {@link Kind#STAGED} answer
     */
    public static DeviceMemoryAccess staged(String how) {
        return new DeviceMemoryAccess(Kind.STAGED, how);
    }

    /**
     * The engine's NIC reaches the memory directly.
     *
     * @param how which device reaches it and through what
     * @return a {@link Kind#DIRECT} answer
     */
    public static DeviceMemoryAccess direct(String how) {
        return new DeviceMemoryAccess(Kind.DIRECT, how);
    }

    /** {@return whether registration of such memory is expected to work (staged or direct)} */
    public boolean allowed() {
        return kind == Kind.STAGED || kind == Kind.DIRECT;
    }
}
