package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.RdmaProvider.QueuePair;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.IbvQp;
import io.mooncake4j.engine.rdma.verbs.RtrAttributes;
import io.mooncake4j.engine.rdma.verbs.RtsAttributes;

/**
 * Brings one RC QP to RTS against a peer QP the way Mooncake's {@code doSetupConnection} does
 * (spec §5.3): RESET → INIT ({@code MC_IB_PORT}, {@code MC_PKEY_INDEX}, local write + remote
 * read/write/atomic), INIT → RTR (path MTU = min(active, {@code MC_MTU}), global route to the
 * peer GID with the local GID index, hop limit 16, {@code MC_IB_TC}/{@code MC_IB_SL}, peer LID and
 * QP number, RQ PSN 0, 16 read responders, RNR timer 12), RTR → RTS (timeout 14, retry 7, RNR
 * retry 7, SQ PSN 0, 16 outstanding reads).
 */
public final class QpBringUp {

    private QpBringUp() {}

    /**
     * The peer's half of a Connection message for one QP.
     *
     * @param gid   the peer NIC's GID
     * @param lid   its LID (0 on RoCE)
     * @param qpNum the peer QP's number
     */
    public record Peer(Gid gid, int lid, int qpNum) {}

    /**
     * Connects {@code qp} (in RESET or INIT) to {@code peer}. A failure leaves the QP in whatever
     * state the failed step left it; Mooncake then rebuilds fresh QPs rather than reusing it.
     *
     * @param activeMtu the local port's {@code active_mtu} ({@code enum ibv_mtu})
     * @param localGidIndex the GID index chosen for the local port
     */
    public static void connect(QueuePair qp, Peer peer, int activeMtu, int localGidIndex, RdmaSettings s) {
        if (qp.state() != IbvQp.STATE_INIT) {
            qp.modifyToInit(s.ibPort(), s.pkeyIndex(), IbvQp.MOONCAKE_QP_ACCESS);
        }
        qp.modifyToRtr(RtrAttributes.mooncake(activeMtu, s.mtuBytes(), peer.gid(), localGidIndex, s.trafficClass(),
                peer.lid(), s.serviceLevel(), s.ibPort(), peer.qpNum()));
        qp.modifyToRts(RtsAttributes.mooncake());
    }
}
