package io.mooncake4j.engine.rdma.verbs;

/** {@code struct ibv_qp_cap} requested at QP creation. */
public record QpCapabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {

    /** Mooncake's defaults: {@code MC_MAX_WR} 256, {@code MC_MAX_SGE} 4, {@code MC_MAX_INLINE} 64, for both queues. */
    public static QpCapabilities mooncakeDefaults() {
        return new QpCapabilities(256, 256, 4, 4, 64);
    }
}
