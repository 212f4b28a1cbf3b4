package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * An RC queue pair ({@code struct ibv_qp}), posted to through {@code ibv_context.ops.post_send}.
 * State changes follow Mooncake's {@code doSetupConnection}: RESET → INIT → RTR → RTS, and ERR at
 * teardown. One owner thread posts to it.
 */
public final class IbvQp implements AutoCloseable {

    /** {@code IBV_QPT_RC}. */
    public static final int TYPE_RC = 2;
    /** {@code enum ibv_qp_state}. */
    public static final int STATE_RESET = 0, STATE_INIT = 1, STATE_RTR = 2, STATE_RTS = 3, STATE_SQD = 4,
            STATE_SQE = 5, STATE_ERR = 6;

    /** {@code enum ibv_qp_attr_mask} bits. */
    static final int QP_STATE = 1, QP_ACCESS_FLAGS = 1 << 3, QP_PKEY_INDEX = 1 << 4, QP_PORT = 1 << 5,
            QP_AV = 1 << 7, QP_PATH_MTU = 1 << 8, QP_TIMEOUT = 1 << 9, QP_RETRY_CNT = 1 << 10,
            QP_RNR_RETRY = 1 << 11, QP_RQ_PSN = 1 << 12, QP_MAX_QP_RD_ATOMIC = 1 << 13,
            QP_MIN_RNR_TIMER = 1 << 15, QP_SQ_PSN = 1 << 16, QP_MAX_DEST_RD_ATOMIC = 1 << 17,
            QP_DEST_QPN = 1 << 20;

    /** Access flags Mooncake sets at RESET→INIT: local write, remote read/write/atomic. */
    public static final int MOONCAKE_QP_ACCESS = IbvPd.ACCESS_LOCAL_WRITE | IbvPd.ACCESS_REMOTE_READ
            | IbvPd.ACCESS_REMOTE_WRITE | IbvPd.ACCESS_REMOTE_ATOMIC;

    private final IbvContext context;
    private final MemorySegment qp;
    private final MemorySegment postSendFn;
    private final int qpNum;
    private boolean closed;

    IbvQp(IbvContext context, MemorySegment qp) {
        this.context = context;
        this.qp = qp;
        this.postSendFn = context.opsPostSend;
        this.qpNum = qp.get(JAVA_INT, VerbsLayouts.QP_QP_NUM);
    }

    /** The 24-bit QP number the peer connects to. */
    public int qpNum() {
        return qpNum;
    }

    /** The state libibverbs last recorded in {@code qp->state}. */
    public int state() {
        return qp.get(JAVA_INT, VerbsLayouts.QP_STATE);
    }

    public void modifyToReset() {
        modify("RESET", QP_STATE, a -> a.set(JAVA_INT, VerbsLayouts.QP_ATTR_QP_STATE, STATE_RESET));
    }

    /** RESET→INIT: {@code port_num}, {@code pkey_index}, access flags. */
    public void modifyToInit(int portNum, int pkeyIndex, int accessFlags) {
        modify("INIT", QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS, a -> {
            a.set(JAVA_INT, VerbsLayouts.QP_ATTR_QP_STATE, STATE_INIT);
            a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_PORT_NUM, (byte) portNum);
            a.set(JAVA_SHORT, VerbsLayouts.QP_ATTR_PKEY_INDEX, (short) pkeyIndex);
            a.set(JAVA_INT, VerbsLayouts.QP_ATTR_QP_ACCESS_FLAGS, accessFlags);
        });
    }

    /** INIT→RTR with a global route (RoCE and IB with GRH). */
    public void modifyToRtr(RtrAttributes r) {
        modify("RTR", QP_STATE | QP_PATH_MTU | QP_MIN_RNR_TIMER | QP_AV | QP_MAX_DEST_RD_ATOMIC | QP_DEST_QPN | QP_RQ_PSN,
                a -> writeRtr(a, r));
    }

    static void writeRtr(MemorySegment a, RtrAttributes r) {
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_QP_STATE, STATE_RTR);
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_PATH_MTU, r.pathMtu());
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_DEST_QP_NUM, r.destQpNum());
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_RQ_PSN, r.rqPsn());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_MAX_DEST_RD_ATOMIC, (byte) r.maxDestRdAtomic());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_MIN_RNR_TIMER, (byte) r.minRnrTimer());
        MemorySegment.copy(MemorySegment.ofArray(r.destGid().raw()), 0, a, VerbsLayouts.QP_ATTR_AH_DGID, Gid.BYTES);
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_AH_FLOW_LABEL, 0);
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_SGID_INDEX, (byte) r.sgidIndex());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_HOP_LIMIT, (byte) r.hopLimit());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_TRAFFIC_CLASS, (byte) r.trafficClass());
        a.set(JAVA_SHORT, VerbsLayouts.QP_ATTR_AH_DLID, (short) r.destLid());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_SL, (byte) r.serviceLevel());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_SRC_PATH_BITS, (byte) 0);
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_STATIC_RATE, (byte) 0);
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_IS_GLOBAL, (byte) 1);
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_AH_PORT_NUM, (byte) r.portNum());
    }

    /** RTR→RTS: timeout, retry counts, send PSN, RDMA-read depth. */
    public void modifyToRts(RtsAttributes r) {
        modify("RTS", QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC,
                a -> writeRts(a, r));
    }

    static void writeRts(MemorySegment a, RtsAttributes r) {
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_QP_STATE, STATE_RTS);
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_TIMEOUT, (byte) r.timeout());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_RETRY_CNT, (byte) r.retryCnt());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_RNR_RETRY, (byte) r.rnrRetry());
        a.set(JAVA_INT, VerbsLayouts.QP_ATTR_SQ_PSN, r.sqPsn());
        a.set(JAVA_BYTE, VerbsLayouts.QP_ATTR_MAX_RD_ATOMIC, (byte) r.maxRdAtomic());
    }

    /** Any state → ERR: outstanding work requests complete with {@code IBV_WC_WR_FLUSH_ERR}. */
    public void modifyToError() {
        modify("ERR", QP_STATE, a -> a.set(JAVA_INT, VerbsLayouts.QP_ATTR_QP_STATE, STATE_ERR));
    }

    private void modify(String target, int mask, Consumer<MemorySegment> fill) {
        synchronized (context) {
            if (closed) {
                throw new IllegalStateException("QP " + qpNum + " is closed");
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment a = arena.allocate(VerbsLayouts.IBV_QP_ATTR);
                fill.accept(a);
                int rc = (int) Verbs.MODIFY_QP.invokeExact(qp, a, mask);
                if (rc != 0) {
                    throw new VerbsException("ibv_modify_qp", rc, String.format(Locale.ROOT,
                            "QP %d on %s to %s (mask 0x%x)%s", qpNum, context.name(), target, mask,
                            rc == Verbs.EINVAL && "RTR".equals(target)
                                    ? "; check MC_GID_INDEX / the peer GID and MC_MTU" : ""));
                }
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw IbvContext.downcall("ibv_modify_qp", t);
            }
        }
    }

    /**
     * {@code ibv_post_send} of the chain starting at work request {@code first} of {@code wrs}:
     * 0, or the errno value; on failure {@link SendWorkRequests#badIndex()} names the first
     * request not posted. Data path: no allocation.
     */
    public int postSend(SendWorkRequests wrs, int first) {
        try {
            return (int) Verbs.POST_SEND.invokeExact(postSendFn, qp, wrs.request(first), wrs.badWrSlot());
        } catch (Throwable t) {
            throw IbvContext.downcall("ibv_post_send", t);
        }
    }

    /** {@code ibv_destroy_qp}. Idempotent. Move it to ERR and drain its completions first. */
    @Override
    public void close() {
        synchronized (context) {
            if (closed) {
                return;
            }
            closed = true;
            context.forget(this);
            try {
                IbvContext.check("ibv_destroy_qp", (int) Verbs.DESTROY_QP.invokeExact(qp));
            } catch (VerbsException e) {
                throw e;
            } catch (Throwable t) {
                throw IbvContext.downcall("ibv_destroy_qp", t);
            }
        }
    }
}
