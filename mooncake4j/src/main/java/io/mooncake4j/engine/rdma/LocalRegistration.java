package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.RdmaProvider.MemoryRegion;
import io.mooncake4j.memory.MemoryLocation;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One registered range and its MRs, one per context (index = context index). A buffer above
 * the device's {@code max_mr_size} is registered as several adjacent pieces, each its own
 * {@code LocalRegistration} with {@link #owner} = the address the caller registered (as
 * Mooncake publishes one {@code BufferDesc} per piece). {@code paths[i]} says how context i
 * registered it ({@code host}, {@code dma-buf}, {@code peer-memory}). Immutable (the MR objects
 * are closed by the engine when the registration goes).
 *
 * @param owner     the address the caller registered (the piece's buffer)
 * @param address   this piece's first byte
 * @param length    this piece's bytes
 * @param location  as published ({@code cpu:N}, {@code cuda:N})
 * @param mrs       one memory region per context
 * @param lkeys     {@code mrs[i].lkey()}, unboxed for the data path
 * @param order     context indexes to use, preferred first (from the location's matrix row)
 * @param preferred how many of {@code order} are preferred
 * @param paths     how each context registered it
 */
record LocalRegistration(long owner, long address, long length, String location, MemoryRegion[] mrs, int[] lkeys,
        int[] order, int preferred, String[] paths) {

    /**
     * A registration whose NIC order comes from {@code matrix}'s row for {@code location} (else
     * {@code *}): its preferred NICs first, then every other context; all preferred when the row
     * names none of them. {@code contexts} are the context names by index.
     */
    static LocalRegistration of(long owner, long address, long length, String location, MemoryRegion[] mrs,
            int[] lkeys, String[] paths, Map<String, List<List<String>>> matrix, List<String> contexts) {
        List<List<String>> row = matrix.get(location);
        if (row == null) {
            row = matrix.get(MemoryLocation.WILDCARD);
        }
        List<Integer> order = new ArrayList<>();
        if (row != null) {
            for (String n : row.get(0)) {
                int i = contexts.indexOf(n);
                if (i >= 0 && !order.contains(i)) {
                    order.add(i);
                }
            }
        }
        int preferred = order.size();
        for (int i = 0; i < contexts.size(); i++) {
            if (!order.contains(i)) {
                order.add(i);
            }
        }
        if (preferred == 0) {
            preferred = order.size();
        }
        return new LocalRegistration(owner, address, length, location, mrs, lkeys,
                order.stream().mapToInt(Integer::intValue).toArray(), preferred, paths);
    }

    /** The same MRs published under another location, with that location's NIC order. */
    LocalRegistration relocated(String newLocation, Map<String, List<List<String>>> matrix, List<String> contexts) {
        return of(owner, address, length, newLocation, mrs, lkeys, paths, matrix, contexts);
    }

    /** Whether the byte at {@code a} lies in this range. */
    boolean containsByte(long a) {
        return Long.compareUnsigned(a, address) >= 0 && Long.compareUnsigned(a - address, length) < 0;
    }

    /** Bytes from {@code a} (inside the range) to its end. */
    long bytesToEnd(long a) {
        return length - (a - address);
    }

    /**
     * The context for the attempt as {@link #context}, or when that NIC is out of selection the
     * next active one in {@link #order}; -1 when none is active.
     */
    int activeContext(int seed, int attempt, RdmaContext[] ctxs) {
        int c = context(seed, attempt);
        if (ctxs[c].isActive()) {
            return c;
        }
        for (int k = 1; k < order.length; k++) {
            int next = order[Math.floorMod(seed + attempt + k, order.length)];
            if (ctxs[next].isActive()) {
                return next;
            }
        }
        return -1;
    }

    /** The context for attempt {@code attempt} of a slice seeded {@code seed}: preferred first, then rotating over all. */
    int context(int seed, int attempt) {
        return attempt == 0 ? order[Math.floorMod(seed, preferred)] : order[Math.floorMod(seed + attempt, order.length)];
    }
}
