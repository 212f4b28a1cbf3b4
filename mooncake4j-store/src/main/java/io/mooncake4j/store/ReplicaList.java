package io.mooncake4j.store;

import java.util.List;

/**
 * The master's answer to GetReplicaList ({@code GetReplicaListResponse}).
 *
 * @param replicas       the object's replicas
 * @param leaseTtlMs     the read lease granted with this answer: the object is neither removed nor
 *                       evicted for this long
 * @param objectChecksum the checksum recorded at put, or null
 */
public record ReplicaList(List<ReplicaDescriptor> replicas, long leaseTtlMs, Long objectChecksum) {

    /** Copies the list. */
    public ReplicaList {
        replicas = List.copyOf(replicas);
    }
}
