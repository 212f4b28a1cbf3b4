package io.mooncake4j.engine.rdma.verbs;

/**
 * One {@code struct ibv_gid_entry} ({@code ibv_query_gid_ex}): the GID, its type and the index
 * of the network device it belongs to (0 when none), used by automatic GID selection.
 *
 * @param gid         {@code gid}
 * @param index       {@code gid_index}
 * @param type        {@code gid_type} ({@link #TYPE_IB}, {@link #TYPE_ROCE_V1}, {@link #TYPE_ROCE_V2})
 * @param ndevIfindex {@code ndev_ifindex}
 */
public record GidEntry(Gid gid, int index, int type, int ndevIfindex) {

    /** {@code IBV_GID_TYPE_IB}. */
    public static final int TYPE_IB = 0;
    /** {@code IBV_GID_TYPE_ROCE_V1}. */
    public static final int TYPE_ROCE_V1 = 1;
    /** {@code IBV_GID_TYPE_ROCE_V2}. */
    public static final int TYPE_ROCE_V2 = 2;
}
