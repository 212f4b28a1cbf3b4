package io.mooncake4j.store;

/**
 * One replica of an object ({@code Replica::Descriptor}): its id, where it lives, and its state.
 * For a memory replica the bytes are {@code size} bytes at {@code address} in the segment that the
 * transfer engine reaches at {@code endpoint}.
 *
 * @param id       the replica id
 * @param kind     which alternative of the master's descriptor variant
 * @param size     bytes of the object (memory and NoF: the buffer size; disk kinds: the object size)
 * @param address  the buffer address in the owner's process (memory and NoF; DFS: the file offset)
 * @param protocol the transport of the buffer (memory and NoF), else {@code ""}
 * @param endpoint the transfer engine endpoint (memory, NoF, local disk), else {@code ""}
 * @param path     the file path (disk and DFS), else {@code ""}
 * @param status   the replica's state
 */
public record ReplicaDescriptor(long id, Kind kind, long size, long address, String protocol, String endpoint,
        String path, Status status) {

    /** The alternatives of {@code descriptor_variant}, in the master's order. */
    public enum Kind {
        /** A buffer in a mounted memory segment. */
        MEMORY,
        /** A buffer on an NVMe-oF segment. */
        NOF,
        /** A file on the master's storage. */
        DISK,
        /** A file on a client's local disk. */
        LOCAL_DISK,
        /** A page range in a distributed filesystem. */
        DFS
    }

    /** {@code ReplicaStatus}, an int32 on the wire. */
    public enum Status {
        /** Not initialised. */
        UNDEFINED,
        /** Space allocated, waiting for the write. */
        INITIALIZED,
        /** Being written. */
        PROCESSING,
        /** Written and readable. */
        COMPLETE,
        /** Removed. */
        REMOVED,
        /** Failed. */
        FAILED;

        static Status of(int v) {
            if (v < 0 || v >= values().length) {
                throw new io.mooncake4j.store.wire.StructPackException("unknown ReplicaStatus " + v);
            }
            return values()[v];
        }
    }

    /** {@return whether this is a memory replica that can be read now} */
    public boolean readableMemory() {
        return kind == Kind.MEMORY && status == Status.COMPLETE;
    }
}
