package io.mooncake4j.store;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Mooncake Store's {@code ErrorCode} ({@code mooncake-store/include/types.h}, an {@code int32}
 * on the wire). The client's results carry the raw integer, as Mooncake's Python binding returns
 * it; this enum names it. A code this build does not know is {@link #UNKNOWN}.
 */
public enum ErrorCode {
    /** Success. */
    OK(0),
    /** An internal error. */
    INTERNAL_ERROR(-1),
    /** Not enough buffer space. */
    BUFFER_OVERFLOW(-10),
    /** A shard index out of bounds. */
    SHARD_INDEX_OUT_OF_RANGE(-100),
    /** No available segment was found. */
    SEGMENT_NOT_FOUND(-101),
    /** The segment is already mounted. */
    SEGMENT_ALREADY_EXISTS(-102),
    /** The master does not know the client. */
    CLIENT_NOT_FOUND(-103),
    /** Allocation failed: not enough free space in the segments. */
    NO_AVAILABLE_HANDLE(-200),
    /** An invalid version. */
    INVALID_VERSION(-300),
    /** An invalid key. */
    INVALID_KEY(-400),
    /** A write failed. */
    WRITE_FAIL(-500),
    /** Invalid parameters. */
    INVALID_PARAMS(-600),
    /** The client may not do this operation. */
    ILLEGAL_CLIENT(-601),
    /** An invalid write operation. */
    INVALID_WRITE(-700),
    /** An invalid read operation. */
    INVALID_READ(-701),
    /** An invalid replica operation. */
    INVALID_REPLICA(-702),
    /** The replica is not ready. */
    REPLICA_IS_NOT_READY(-703),
    /** No object has the key. */
    OBJECT_NOT_FOUND(-704),
    /** An object with the key already exists. */
    OBJECT_ALREADY_EXISTS(-705),
    /** The object holds a lease (a non-forced remove is refused). */
    OBJECT_HAS_LEASE(-706),
    /** The lease expired before the data transfer finished. */
    LEASE_EXPIRED(-707),
    /** The object has a replication task in progress. */
    OBJECT_HAS_REPLICATION_TASK(-708),
    /** The object has no replication task in progress. */
    OBJECT_NO_REPLICATION_TASK(-709),
    /** The replica does not exist. */
    REPLICA_NOT_FOUND(-710),
    /** The replica already exists. */
    REPLICA_ALREADY_EXISTS(-711),
    /** The replica existed but is gone now. */
    REPLICA_IS_GONE(-712),
    /** The replica is not in this node's memory. */
    REPLICA_NOT_IN_LOCAL_MEMORY(-713),
    /** The object's replicas are still referenced (non-zero reference count). */
    OBJECT_REPLICA_BUSY(-714),
    /** A data transfer failed. */
    TRANSFER_FAIL(-800),
    /** The stored checksum did not verify. */
    CHECKSUM_MISMATCH(-801),
    /** The RPC failed (also this client's code when the master is unreachable or its answer undecodable). */
    RPC_FAIL(-900),
    /** The RPC got no answer before the client's deadline. */
    RPC_TIMEOUT(-901),
    /** An etcd operation failed. */
    ETCD_OPERATION_ERROR(-1000),
    /** The key is not in etcd. */
    ETCD_KEY_NOT_EXIST(-1001),
    /** An etcd transaction failed. */
    ETCD_TRANSACTION_FAIL(-1002),
    /** An etcd context was cancelled. */
    ETCD_CTX_CANCELLED(-1003),
    /** An OpLog entry was not found (any HA backend). */
    OPLOG_ENTRY_NOT_FOUND(-1004),
    /** A Kubernetes Lease operation failed. */
    K8S_LEASE_OPERATION_ERROR(-1005),
    /** The Kubernetes Lease was not found. */
    K8S_LEASE_NOT_FOUND(-1006),
    /** A master being promoted could not show that every durable OpLog entry was applied. */
    INCOMPLETE_OPLOG_CATCH_UP(-1007),
    /** The request cannot be served in the current status. */
    UNAVAILABLE_IN_CURRENT_STATUS(-1010),
    /** The request cannot be served in the current mode. */
    UNAVAILABLE_IN_CURRENT_MODE(-1011),
    /** The operation is not supported in the current mode. */
    NOT_SUPPORTED(-1012),
    /** The file was not found. */
    FILE_NOT_FOUND(-1100),
    /** A file could not be opened (or an existing file was written). */
    FILE_OPEN_FAIL(-1101),
    /** A file read failed. */
    FILE_READ_FAIL(-1102),
    /** A file write failed. */
    FILE_WRITE_FAIL(-1103),
    /** A wrong file buffer. */
    FILE_INVALID_BUFFER(-1104),
    /** A file lock operation failed. */
    FILE_LOCK_FAIL(-1105),
    /** An invalid file handle. */
    FILE_INVALID_HANDLE(-1106),
    /** The bucket was not found. */
    BUCKET_NOT_FOUND(-1200),
    /** The bucket already exists. */
    BUCKET_ALREADY_EXISTS(-1201),
    /** The keys exceed the bucket's limit. */
    KEYS_EXCEED_BUCKET_LIMIT(-1202),
    /** The keys exceed the limit. */
    KEYS_ULTRA_LIMIT(-1203),
    /** Offloading is not enabled. */
    UNABLE_OFFLOAD(-1300),
    /** Offloading could not be done. */
    UNABLE_OFFLOADING(-1301),
    /** The task was not found. */
    TASK_NOT_FOUND(-1400),
    /** Too many pending tasks. */
    TASK_PENDING_LIMIT_EXCEEDED(-1401),
    /** The job was not found. */
    JOB_NOT_FOUND(-1402),
    /** Serialization is not supported. */
    SERIALIZE_UNSUPPORTED(-1500),
    /** Serialization failed. */
    SERIALIZE_FAIL(-1501),
    /** Deserialization failed. */
    DESERIALIZE_FAIL(-1502),
    /** Persisting failed. */
    PERSISTENT_FAIL(-1503),
    /** A distributed-filesystem network timeout. */
    DFS_NETWORK_TIMEOUT(-1600),
    /** The distributed filesystem is unavailable. */
    DFS_SERVICE_UNAVAILABLE(-1601),
    /** The distributed filesystem's quota is exceeded. */
    DFS_QUOTA_EXCEEDED(-1602),
    /** The distributed filesystem denied permission. */
    DFS_PERMISSION_DENIED(-1603),
    /** A distributed-filesystem file handle expired. */
    DFS_STALE_HANDLE(-1604),
    /** A distributed-filesystem write succeeded only in part. */
    DFS_PARTIAL_WRITE(-1605),
    /** The tenant's memory quota is exceeded. */
    TENANT_QUOTA_EXCEEDED(-1700),
    /** The tenant has no quota policy. */
    TENANT_NOT_REGISTERED(-1701),
    /** The tenant still owns objects or quota. */
    TENANT_NOT_EMPTY(-1702),
    /** A code not in this list (a newer master). */
    UNKNOWN(Integer.MIN_VALUE);

    private static final Map<Integer, ErrorCode> BY_CODE = new HashMap<>();

    static {
        for (ErrorCode c : values()) {
            BY_CODE.put(c.code, c);
        }
    }

    private final int code;

    ErrorCode(int code) {
        this.code = code;
    }

    /** {@return the integer on the wire (0 or negative)} */
    public int code() {
        return code;
    }

    /**
     * Names a code.
     *
     * @param code the integer on the wire
     * @return the constant with that code, or {@link #UNKNOWN}
     */
    public static ErrorCode of(int code) {
        return BY_CODE.getOrDefault(code, UNKNOWN);
    }

    /**
     * A code as messages show it.
     *
     * @param code the integer on the wire
     * @return {@code "NAME (code)"}, or {@code "error code"} for a code not in this list
     */
    public static String describe(int code) {
        ErrorCode c = of(code);
        return c == UNKNOWN ? String.format(Locale.ROOT, "error %d", code) : String.format(Locale.ROOT, "%s (%d)", c, code);
    }
}
