package io.mooncake4j.store;

import java.util.List;

/**
 * Where and how a put is placed ({@code ReplicateConfig}, {@code mooncake-store/include/replica.h}),
 * field for field in the master's order.
 *
 * @param replicaNum            memory replicas (default 1)
 * @param nofReplicaNum         NVMe-oF replicas (0)
 * @param dfsReplicaNum         distributed-filesystem replicas (0)
 * @param softPinAction         0 PRESERVE, 1 ENABLE, 2 DISABLE (evicted last while soft-pinned)
 * @param softPinTtlMs          the soft pin's lifetime override, or null for the master's default
 * @param withHardPin           never evicted
 * @param preferredSegments     segment names to allocate in first
 * @param preferredSegment      one preferred segment name (deprecated form), or {@code ""}
 * @param preferredNofSegments  NoF segment names to prefer
 * @param preferAllocInSameNode allocate on this client's host when possible
 * @param dataType              {@code ObjectDataType} (0 unknown, 1 KV cache, ...)
 * @param hostId                the caller's host id ({@code ""} for none)
 * @param groupIds              per-key group ids (one per key of a batch), or null for none
 */
public record ReplicateConfig(long replicaNum, long nofReplicaNum, long dfsReplicaNum, int softPinAction,
        Long softPinTtlMs, boolean withHardPin, List<String> preferredSegments, String preferredSegment,
        List<String> preferredNofSegments, boolean preferAllocInSameNode, int dataType, String hostId,
        List<String> groupIds) {

    /** Soft pin: keep the object's current soft-pin state. */
    public static final int SOFT_PIN_PRESERVE = 0;
    /** Soft pin: pin. */
    public static final int SOFT_PIN_ENABLE = 1;
    /** Soft pin: unpin. */
    public static final int SOFT_PIN_DISABLE = 2;

    /** Validates and copies the lists. */
    public ReplicateConfig {
        if (replicaNum < 1) {
            throw Args.invalid("replicaNum must be at least 1, got %d", replicaNum);
        }
        if (softPinAction < 0 || softPinAction > 2) {
            throw Args.invalid("softPinAction must be 0, 1 or 2, got %d", softPinAction);
        }
        if (dataType < 0 || dataType > 255) {
            throw Args.invalid("dataType is a uint8, got %d", dataType);
        }
        preferredSegments = List.copyOf(Args.notNull(preferredSegments, "preferredSegments"));
        preferredSegment = Args.notNull(preferredSegment, "preferredSegment");
        preferredNofSegments = List.copyOf(Args.notNull(preferredNofSegments, "preferredNofSegments"));
        hostId = Args.notNull(hostId, "hostId");
        groupIds = groupIds == null ? null : List.copyOf(groupIds);
    }

    /** {@return Mooncake's defaults: one replica, no pin, no preference} */
    public static ReplicateConfig defaults() {
        return new ReplicateConfig(1, 0, 0, SOFT_PIN_PRESERVE, null, false, List.of(), "", List.of(), false, 0, "", null);
    }

    /**
     * {@return a copy with {@code n} memory replicas}
     *
     * @param n the number of memory replicas (at least 1)
     */
    public ReplicateConfig withReplicaNum(long n) {
        return new ReplicateConfig(n, nofReplicaNum, dfsReplicaNum, softPinAction, softPinTtlMs, withHardPin,
                preferredSegments, preferredSegment, preferredNofSegments, preferAllocInSameNode, dataType, hostId, groupIds);
    }

    /**
     * {@return a copy preferring segment {@code name} (as Mooncake's Python {@code preferred_segment})}
     *
     * @param name the segment's name (a client's {@code local_hostname})
     */
    public ReplicateConfig withPreferredSegment(String name) {
        return new ReplicateConfig(replicaNum, nofReplicaNum, dfsReplicaNum, softPinAction, softPinTtlMs, withHardPin,
                preferredSegments, name, preferredNofSegments, preferAllocInSameNode, dataType, hostId, groupIds);
    }

    /**
     * {@return a copy with a soft pin ({@code ttlMs} null for the master's default)}
     *
     * @param ttlMs the soft pin's lifetime in milliseconds, or null for the master's default
     */
    public ReplicateConfig withSoftPin(Long ttlMs) {
        return new ReplicateConfig(replicaNum, nofReplicaNum, dfsReplicaNum, SOFT_PIN_ENABLE, ttlMs, withHardPin,
                preferredSegments, preferredSegment, preferredNofSegments, preferAllocInSameNode, dataType, hostId, groupIds);
    }

    /**
     * {@return a copy with the hard pin set or cleared}
     *
     * @param pin whether the object is never evicted
     */
    public ReplicateConfig withHardPin(boolean pin) {
        return new ReplicateConfig(replicaNum, nofReplicaNum, dfsReplicaNum, softPinAction, softPinTtlMs, pin,
                preferredSegments, preferredSegment, preferredNofSegments, preferAllocInSameNode, dataType, hostId, groupIds);
    }

    /**
     * {@return a copy with per-key group ids (null for none)}
     *
     * @param ids one group id per key of a batch, or null
     */
    public ReplicateConfig withGroupIds(List<String> ids) {
        return new ReplicateConfig(replicaNum, nofReplicaNum, dfsReplicaNum, softPinAction, softPinTtlMs, withHardPin,
                preferredSegments, preferredSegment, preferredNofSegments, preferAllocInSameNode, dataType, hostId, ids);
    }
}
