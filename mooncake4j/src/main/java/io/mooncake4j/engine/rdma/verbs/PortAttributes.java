package io.mooncake4j.engine.rdma.verbs;

/**
 * The {@code struct ibv_port_attr} fields the transport reads. {@code state}
 * {@link #PORT_ACTIVE} is required (Mooncake rejects other states); {@code lid} is 0 on RoCE.
 *
 * @param state     {@code state}
 * @param maxMtu    {@code max_mtu} ({@code enum ibv_mtu})
 * @param activeMtu {@code active_mtu} ({@code enum ibv_mtu})
 * @param gidTblLen {@code gid_tbl_len}
 * @param lid       {@code lid}
 * @param linkLayer {@code link_layer}
 */
public record PortAttributes(int state, int maxMtu, int activeMtu, int gidTblLen, int lid, int linkLayer) {

    /** {@code IBV_PORT_ACTIVE}. */
    public static final int PORT_ACTIVE = 4;
    /** {@code IBV_LINK_LAYER_INFINIBAND}. */
    public static final int LINK_LAYER_INFINIBAND = 1;
    /** {@code IBV_LINK_LAYER_ETHERNET} (RoCE). */
    public static final int LINK_LAYER_ETHERNET = 2;

    public boolean isActive() {
        return state == PORT_ACTIVE;
    }

    /** {@code enum ibv_mtu} (1 = 256 … 5 = 4096) to bytes; 0 for an unknown value. */
    public static int mtuBytes(int ibvMtu) {
        return ibvMtu >= 1 && ibvMtu <= 5 ? 128 << ibvMtu : 0;
    }

    /** Bytes (256, 512, 1024, 2048 or 4096) to {@code enum ibv_mtu}. */
    public static int ibvMtu(int bytes) {
        return switch (bytes) {
            case 256 -> 1;
            case 512 -> 2;
            case 1024 -> 3;
            case 2048 -> 4;
            case 4096 -> 5;
            default -> throw new IllegalArgumentException("MTU must be 256, 512, 1024, 2048 or 4096, got " + bytes);
        };
    }
}
