package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A reusable array of {@code struct ibv_wc} for {@link IbvCq#poll}: a flyweight read by index,
 * allocated once per poller. Per {@code ibv_poll_cq(3)}, a failed completion carries only
 * {@code wr_id}, {@code status}, {@code qp_num} and {@code vendor_err}; read the rest only when
 * {@link #status} is {@link #SUCCESS}. Confined to its poller thread.
 */
public final class WorkCompletions implements AutoCloseable {

    /** {@code enum ibv_wc_status} values the transport distinguishes. */
    public static final int SUCCESS = 0, LOC_LEN_ERR = 1, LOC_QP_OP_ERR = 2, LOC_PROT_ERR = 4, WR_FLUSH_ERR = 5,
            MW_BIND_ERR = 6, BAD_RESP_ERR = 7, LOC_ACCESS_ERR = 8, REM_INV_REQ_ERR = 9, REM_ACCESS_ERR = 10,
            REM_OP_ERR = 11, RETRY_EXC_ERR = 12, RNR_RETRY_EXC_ERR = 13, FATAL_ERR = 19, RESP_TIMEOUT_ERR = 20,
            GENERAL_ERR = 21;

    /** {@code enum ibv_wc_opcode}: {@code IBV_WC_RDMA_WRITE} = 1, {@code IBV_WC_RDMA_READ} = 2. */
    public static final int OPCODE_RDMA_WRITE = 1, OPCODE_RDMA_READ = 2;

    private static final long STRIDE = VerbsLayouts.IBV_WC.byteSize();

    private final Arena arena;
    private final MemorySegment wc;
    private final int capacity;

    public WorkCompletions(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        this.arena = Arena.ofShared();
        this.wc = arena.allocate(VerbsLayouts.IBV_WC, capacity);
        this.capacity = capacity;
    }

    public int capacity() {
        return capacity;
    }

    MemorySegment segment() {
        return wc;
    }

    public long wrId(int i) {
        return wc.get(JAVA_LONG, i * STRIDE + VerbsLayouts.WC_WR_ID);
    }

    public int status(int i) {
        return wc.get(JAVA_INT, i * STRIDE + VerbsLayouts.WC_STATUS);
    }

    public int opcode(int i) {
        return wc.get(JAVA_INT, i * STRIDE + VerbsLayouts.WC_OPCODE);
    }

    public int vendorErr(int i) {
        return wc.get(JAVA_INT, i * STRIDE + VerbsLayouts.WC_VENDOR_ERR);
    }

    public int byteLen(int i) {
        return wc.get(JAVA_INT, i * STRIDE + VerbsLayouts.WC_BYTE_LEN);
    }

    public int qpNum(int i) {
        return wc.get(JAVA_INT, i * STRIDE + VerbsLayouts.WC_QP_NUM);
    }

    /** Fills entry {@code i} as a provider would (used by emulations and tests). */
    public void set(int i, long wrId, int status, int opcode, int byteLen, int qpNum, int vendorErr) {
        long base = i * STRIDE;
        wc.asSlice(base, STRIDE).fill((byte) 0);
        wc.set(JAVA_LONG, base + VerbsLayouts.WC_WR_ID, wrId);
        wc.set(JAVA_INT, base + VerbsLayouts.WC_STATUS, status);
        wc.set(JAVA_INT, base + VerbsLayouts.WC_OPCODE, opcode);
        wc.set(JAVA_INT, base + VerbsLayouts.WC_BYTE_LEN, byteLen);
        wc.set(JAVA_INT, base + VerbsLayouts.WC_QP_NUM, qpNum);
        wc.set(JAVA_INT, base + VerbsLayouts.WC_VENDOR_ERR, vendorErr);
    }

    /** The {@code ibv_wc_status_str} name of a status, without allocation for known values. */
    public static String statusName(int status) {
        return switch (status) {
            case SUCCESS -> "success";
            case LOC_LEN_ERR -> "local length error";
            case LOC_QP_OP_ERR -> "local QP operation error";
            case LOC_PROT_ERR -> "local protection error";
            case WR_FLUSH_ERR -> "Work Request Flushed Error";
            case MW_BIND_ERR -> "memory bind operation error";
            case BAD_RESP_ERR -> "bad response error";
            case LOC_ACCESS_ERR -> "local access error";
            case REM_INV_REQ_ERR -> "remote invalid request error";
            case REM_ACCESS_ERR -> "remote access error";
            case REM_OP_ERR -> "remote operation error";
            case RETRY_EXC_ERR -> "transport retry counter exceeded";
            case RNR_RETRY_EXC_ERR -> "RNR retry counter exceeded";
            case FATAL_ERR -> "fatal error";
            case RESP_TIMEOUT_ERR -> "response timeout error";
            case GENERAL_ERR -> "general error";
            default -> "status " + status;
        };
    }

    @Override
    public void close() {
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
