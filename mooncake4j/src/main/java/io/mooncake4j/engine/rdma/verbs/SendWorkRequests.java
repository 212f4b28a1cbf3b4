package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A reusable block of {@code struct ibv_send_wr}, each with one {@code struct ibv_sge}, plus the
 * {@code bad_wr} out-slot: prepared once per poster thread and patched in place per batch (no
 * allocation per work request). {@link #set} writes one RDMA WRITE/READ, {@link #chain} links
 * a run of them for one {@code ibv_post_send}. Confined to its poster thread.
 */
public final class SendWorkRequests implements AutoCloseable {

    /** {@code IBV_WR_RDMA_WRITE}. */
    public static final int OPCODE_RDMA_WRITE = 0;
    /** {@code IBV_WR_RDMA_READ}. */
    public static final int OPCODE_RDMA_READ = 4;
    /** {@code IBV_SEND_SIGNALED}: Mooncake signals every work request. */
    public static final int SEND_SIGNALED = 1 << 1;

    private static final long WR = VerbsLayouts.IBV_SEND_WR.byteSize();
    private static final long SGE = VerbsLayouts.IBV_SGE.byteSize();

    private final Arena arena;
    private final MemorySegment wrs;
    private final MemorySegment sges;
    private final MemorySegment badWr;
    private final MemorySegment[] slots; // slice per request, made once: chaining and posting allocate nothing
    private final int capacity;

    public SendWorkRequests(int capacity) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive: " + capacity);
        }
        this.capacity = capacity;
        this.arena = Arena.ofShared();
        this.wrs = arena.allocate(VerbsLayouts.IBV_SEND_WR, capacity);
        this.sges = arena.allocate(VerbsLayouts.IBV_SGE, capacity);
        this.badWr = arena.allocate(ADDRESS);
        this.slots = new MemorySegment[capacity];
        for (int i = 0; i < capacity; i++) {
            slots[i] = wrs.asSlice(i * WR, WR);
            wrs.set(ADDRESS, i * WR + VerbsLayouts.SEND_WR_SG_LIST, sges.asSlice(i * SGE, SGE));
            wrs.set(JAVA_INT, i * WR + VerbsLayouts.SEND_WR_NUM_SGE, 1);
        }
    }

    public int capacity() {
        return capacity;
    }

    /** Writes request {@code i}: one SGE {@code [localAddr, +length)} with {@code lkey}, remote {@code remoteAddr}/{@code rkey}. */
    public void set(int i, long wrId, int opcode, int sendFlags, long localAddr, int length, int lkey,
                    long remoteAddr, int rkey) {
        long w = i * WR;
        long s = i * SGE;
        wrs.set(JAVA_LONG, w + VerbsLayouts.SEND_WR_WR_ID, wrId);
        wrs.set(JAVA_INT, w + VerbsLayouts.SEND_WR_OPCODE, opcode);
        wrs.set(JAVA_INT, w + VerbsLayouts.SEND_WR_SEND_FLAGS, sendFlags);
        wrs.set(JAVA_LONG, w + VerbsLayouts.SEND_WR_RDMA_REMOTE_ADDR, remoteAddr);
        wrs.set(JAVA_INT, w + VerbsLayouts.SEND_WR_RDMA_RKEY, rkey);
        sges.set(JAVA_LONG, s + VerbsLayouts.SGE_ADDR, localAddr);
        sges.set(JAVA_INT, s + VerbsLayouts.SGE_LENGTH, length);
        sges.set(JAVA_INT, s + VerbsLayouts.SGE_LKEY, lkey);
        wrs.set(ADDRESS, w + VerbsLayouts.SEND_WR_NEXT, MemorySegment.NULL);
    }

    /** Links requests {@code first .. first+count-1} into one chain (the last one's {@code next} is NULL). */
    public void chain(int first, int count) {
        for (int i = first; i < first + count - 1; i++) {
            wrs.set(ADDRESS, i * WR + VerbsLayouts.SEND_WR_NEXT, slots[i + 1]);
        }
        wrs.set(ADDRESS, (first + count - 1) * WR + VerbsLayouts.SEND_WR_NEXT, MemorySegment.NULL);
        badWr.set(ADDRESS, 0, MemorySegment.NULL);
    }

    public long wrId(int i) {
        return wrs.get(JAVA_LONG, i * WR + VerbsLayouts.SEND_WR_WR_ID);
    }

    public int opcode(int i) {
        return wrs.get(JAVA_INT, i * WR + VerbsLayouts.SEND_WR_OPCODE);
    }

    public int sendFlags(int i) {
        return wrs.get(JAVA_INT, i * WR + VerbsLayouts.SEND_WR_SEND_FLAGS);
    }

    public long localAddr(int i) {
        return sges.get(JAVA_LONG, i * SGE + VerbsLayouts.SGE_ADDR);
    }

    public int length(int i) {
        return sges.get(JAVA_INT, i * SGE + VerbsLayouts.SGE_LENGTH);
    }

    public int lkey(int i) {
        return sges.get(JAVA_INT, i * SGE + VerbsLayouts.SGE_LKEY);
    }

    public long remoteAddr(int i) {
        return wrs.get(JAVA_LONG, i * WR + VerbsLayouts.SEND_WR_RDMA_REMOTE_ADDR);
    }

    public int rkey(int i) {
        return wrs.get(JAVA_INT, i * WR + VerbsLayouts.SEND_WR_RDMA_RKEY);
    }

    /** Index of the request {@code next} of request {@code i} points to, or -1 for NULL. */
    public int next(int i) {
        long p = wrs.get(ADDRESS, i * WR + VerbsLayouts.SEND_WR_NEXT).address();
        return p == 0 ? -1 : (int) ((p - wrs.address()) / WR);
    }

    /** After a failed post: index of the first request not posted, or -1. */
    public int badIndex() {
        long p = badWr.get(ADDRESS, 0).address();
        return p == 0 ? -1 : (int) ((p - wrs.address()) / WR);
    }

    /**
     * Sets {@code *bad_wr} to request {@code i} ({@code -1}: NULL). libibverbs does this itself;
     * other providers (the test emulation) call it when refusing a post.
     */
    public void recordBadRequest(int i) {
        badWr.set(ADDRESS, 0, i < 0 ? MemorySegment.NULL : slots[i]);
    }

    MemorySegment request(int i) {
        return slots[i];
    }

    MemorySegment badWrSlot() {
        return badWr;
    }

    @Override
    public void close() {
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }
}
