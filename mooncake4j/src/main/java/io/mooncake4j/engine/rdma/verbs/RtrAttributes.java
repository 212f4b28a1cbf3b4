package io.mooncake4j.engine.rdma.verbs;

/**
 * INIT→RTR attributes of an RC QP (Mooncake {@code RdmaEndPoint::doSetupConnection}): the peer's
 * GID, LID and QP number, and the path parameters. {@code pathMtu} is an {@code enum ibv_mtu}.
 *
 * @param pathMtu         {@code path_mtu}
 * @param destGid         {@code ah_attr.grh.dgid}
 * @param sgidIndex       {@code ah_attr.grh.sgid_index}
 * @param hopLimit        {@code ah_attr.grh.hop_limit}
 * @param trafficClass    {@code ah_attr.grh.traffic_class}
 * @param destLid         {@code ah_attr.dlid}
 * @param serviceLevel    {@code ah_attr.sl}
 * @param portNum         {@code ah_attr.port_num}
 * @param destQpNum       {@code dest_qp_num}
 * @param rqPsn           {@code rq_psn}
 * @param maxDestRdAtomic {@code max_dest_rd_atomic}
 * @param minRnrTimer     {@code min_rnr_timer}
 */
public record RtrAttributes(int pathMtu, Gid destGid, int sgidIndex, int hopLimit, int trafficClass, int destLid,
                            int serviceLevel, int portNum, int destQpNum, int rqPsn, int maxDestRdAtomic,
                            int minRnrTimer) {

    /**
     * Mooncake's values: {@code path_mtu = min(activeMtu, mtuLimit)}, {@code is_global = 1},
     * {@code hop_limit = 16}, {@code rq_psn = 0}, {@code max_dest_rd_atomic = 16},
     * {@code min_rnr_timer = 12}.
     *
     * @param activeMtu the local port's {@code active_mtu} ({@code enum ibv_mtu})
     * @param mtuLimitBytes {@code MC_MTU} (4096 by default)
     */
    public static RtrAttributes mooncake(int activeMtu, int mtuLimitBytes, Gid destGid, int sgidIndex,
                                         int trafficClass, int destLid, int serviceLevel, int portNum, int destQpNum) {
        int mtu = Math.min(activeMtu, PortAttributes.ibvMtu(mtuLimitBytes));
        return new RtrAttributes(mtu, destGid, sgidIndex, 16, trafficClass, destLid, serviceLevel, portNum,
                destQpNum, 0, 16, 12);
    }
}
