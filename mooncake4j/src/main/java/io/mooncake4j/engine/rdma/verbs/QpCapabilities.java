package io.mooncake4j.engine.rdma.verbs;

/**
 * {@code struct ibv_qp_cap} requested at QP creation.
 *
 * @param maxSendWr     {@code max_send_wr}
 * @param maxRecvWr     {@code max_recv_wr}
 * @param maxSendSge    {@code max_send_sge}
 * @param maxRecvSge    {@code max_recv_sge}
 * @param maxInlineData {@code max_inline_data}
 */
public record QpCapabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {

    /** Mooncake's defaults: {@code MC_MAX_WR} 256, {@code MC_MAX_SGE} 4, {@code MC_MAX_INLINE} 64, for both queues. */
    public static QpCapabilities mooncakeDefaults() {
        return new QpCapabilities(256, 256, 4, 4, 64);
    }
}
