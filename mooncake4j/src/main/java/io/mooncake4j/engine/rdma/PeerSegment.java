package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.handshake.HandShakeDesc;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.MemoryLocation;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A peer's RDMA segment descriptor flattened for the data path: buffer ranges, per-device rkeys,
 * and for each buffer the peer NICs to use, preferred first (from the peer's
 * {@code priority_matrix} entry for the buffer's location, else {@code *}, else all devices).
 * Device indexes are positions in the descriptor's {@code devices[]}, so {@code rkey[idx]} and
 * the NIC path always agree (spec §5.2). Immutable; replaced on refresh.
 */
final class PeerSegment {

    final long id;
    final SegmentDescriptor descriptor;
    /** {@code rdma_server_name} if set, else {@code name}: the server part of NIC paths. */
    final String serverName;
    final String[] nicPath;
    final String[] gid;
    final int[] lid;
    final long[] addr;
    final long[] length;
    final int[][] rkey;
    final int[][] order;
    final int[] preferred;

    PeerSegment(long id, SegmentDescriptor d) {
        this.id = id;
        this.descriptor = d;
        this.serverName = d.rdmaServerName() != null && !d.rdmaServerName().isEmpty() ? d.rdmaServerName() : d.name();
        int nd = d.devices().size();
        nicPath = new String[nd];
        gid = new String[nd];
        lid = new int[nd];
        for (int i = 0; i < nd; i++) {
            SegmentDescriptor.Device dev = d.devices().get(i);
            nicPath[i] = HandShakeDesc.nicPath(serverName, dev.name());
            gid[i] = dev.gid();
            lid[i] = dev.lid();
        }
        int nb = d.buffers().size();
        addr = new long[nb];
        length = new long[nb];
        rkey = new int[nb][];
        order = new int[nb][];
        preferred = new int[nb];
        for (int b = 0; b < nb; b++) {
            SegmentDescriptor.Buffer buf = d.buffers().get(b);
            addr[b] = buf.addr();
            length[b] = buf.length();
            List<Long> keys = buf.rkey() == null ? List.of() : buf.rkey();
            rkey[b] = new int[keys.size()];
            for (int k = 0; k < keys.size(); k++) {
                rkey[b][k] = (int) (long) keys.get(k);
            }
            List<List<String>> row = d.priorityMatrix().get(buf.name());
            if (row == null) {
                row = d.priorityMatrix().get(MemoryLocation.WILDCARD);
            }
            List<Integer> pref = new ArrayList<>();
            List<Integer> avail = new ArrayList<>();
            if (row != null) {
                addIndexes(d, row.get(0), pref, List.of());
                addIndexes(d, row.get(1), avail, pref);
            }
            if (pref.isEmpty() && avail.isEmpty()) {
                for (int i = 0; i < nd; i++) {
                    pref.add(i);
                }
            } else if (pref.isEmpty()) {
                pref.addAll(avail);
                avail.clear();
            }
            int[] o = new int[pref.size() + avail.size()];
            int j = 0;
            for (int i : pref) {
                o[j++] = i;
            }
            for (int i : avail) {
                o[j++] = i;
            }
            order[b] = o;
            preferred[b] = pref.size();
        }
    }

    private static void addIndexes(SegmentDescriptor d, List<String> names, List<Integer> out, List<Integer> skip) {
        for (String n : names) {
            for (int i = 0; i < d.devices().size(); i++) {
                if (d.devices().get(i).name().equals(n) && !out.contains(i) && !skip.contains(i)) {
                    out.add(i);
                }
            }
        }
    }

    boolean isRdma() {
        return "rdma".equals(descriptor.protocol());
    }

    /** The first buffer holding the byte at {@code a} that has keys for every device, or -1. */
    int bufferAt(long a) {
        for (int b = 0; b < addr.length; b++) {
            if (Long.compareUnsigned(a, addr[b]) >= 0 && Long.compareUnsigned(a - addr[b], length[b]) < 0
                    && rkey[b].length == nicPath.length && order[b].length > 0) {
                return b;
            }
        }
        return -1;
    }

    /** Bytes from {@code a} (inside buffer {@code b}) to the buffer's end. */
    long bytesToEnd(int b, long a) {
        return length[b] - (a - addr[b]);
    }

    /**
     * Bytes from {@code a} that lie in usable peer buffers without a gap, capped at {@code len}:
     * {@code len} when the whole range is covered (possibly by several adjacent buffers).
     */
    long coveredFrom(long a, long len) {
        long done = 0;
        while (done < len) {
            int b = bufferAt(a + done);
            if (b < 0) {
                return done;
            }
            done += Math.min(len - done, bytesToEnd(b, a + done));
        }
        return done;
    }

    /** Peer device for a slice's attempt: a preferred one first, then rotating through all (§5.2). */
    int device(int buffer, int seed, int attempt) {
        int[] o = order[buffer];
        if (attempt == 0) {
            return o[Math.floorMod(seed, preferred[buffer])];
        }
        return o[Math.floorMod(seed + attempt, o.length)];
    }
}
