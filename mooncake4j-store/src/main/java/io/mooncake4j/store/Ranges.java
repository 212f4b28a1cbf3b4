package io.mooncake4j.store;

import java.util.ArrayList;
import java.util.List;

/**
 * The arguments of {@link MooncakeStoreClient#getIntoRanges}, checked and flattened to one entry per
 * (buffer, key) for one data path call, and its per-key outcome spread back over the ranges.
 *
 * @param shape   per buffer, per key, the range sizes (the shape of the answer)
 * @param keys    one key per (buffer, key) entry
 * @param local   per entry, each range's destination address
 * @param sources per entry, each range's offset in the object
 * @param lengths per entry, each range's length
 */
record Ranges(List<List<long[]>> shape, List<String> keys, long[][] local, long[][] sources, long[][] lengths) {

    static Ranges of(long[] buffers, List<List<String>> keys, long[][][] dstOffsets, long[][][] srcOffsets,
            long[][][] sizes) {
        Args.notNull(buffers, "buffers");
        Args.notNull(keys, "keys");
        Args.notNull(dstOffsets, "dstOffsets");
        Args.notNull(srcOffsets, "srcOffsets");
        Args.notNull(sizes, "sizes");
        int nb = buffers.length;
        if (keys.size() != nb || dstOffsets.length != nb || srcOffsets.length != nb || sizes.length != nb) {
            throw Args.invalid("%d buffers but %d key lists, %d dstOffsets, %d srcOffsets, %d sizes", nb, keys.size(),
                    dstOffsets.length, srcOffsets.length, sizes.length);
        }
        List<List<long[]>> shape = new ArrayList<>();
        List<String> flat = new ArrayList<>();
        List<long[]> local = new ArrayList<>();
        List<long[]> src = new ArrayList<>();
        List<long[]> len = new ArrayList<>();
        for (int b = 0; b < nb; b++) {
            List<String> ks = Args.keys(keys.get(b));
            Args.perKey(ks, "dstOffsets[" + b + "]", dstOffsets[b], dstOffsets[b] == null ? 0 : dstOffsets[b].length);
            Args.perKey(ks, "srcOffsets[" + b + "]", srcOffsets[b], srcOffsets[b] == null ? 0 : srcOffsets[b].length);
            Args.perKey(ks, "sizes[" + b + "]", sizes[b], sizes[b] == null ? 0 : sizes[b].length);
            List<long[]> row = new ArrayList<>();
            for (int k = 0; k < ks.size(); k++) {
                long[] d = Args.notNull(dstOffsets[b][k], "dstOffsets[" + b + "][" + k + "]");
                long[] z = Args.notNull(sizes[b][k], "sizes[" + b + "][" + k + "]");
                if (d.length != z.length) {
                    throw Args.invalid("buffer %d key %d (%s): %d dstOffsets but %d sizes", b, k, ks.get(k), d.length,
                            z.length);
                }
                long[] a = new long[d.length];
                for (int r = 0; r < d.length; r++) {
                    if (d[r] < 0) {
                        throw Args.invalid("buffer %d key %d (%s): negative dstOffset %d", b, k, ks.get(k), d[r]);
                    }
                    a[r] = buffers[b] + d[r];
                }
                flat.add(ks.get(k));
                local.add(a);
                src.add(srcOffsets[b][k]);
                len.add(z);
                row.add(z);
            }
            shape.add(row);
        }
        return new Ranges(shape, flat, local.toArray(new long[0][]), src.toArray(new long[0][]),
                len.toArray(new long[0][]));
    }

    /** {@return per buffer, per key, per range: the range's length, or the key's negative code} */
    long[][][] results(long[] perEntry) {
        long[][][] out = new long[shape.size()][][];
        int i = 0;
        for (int b = 0; b < out.length; b++) {
            List<long[]> row = shape.get(b);
            out[b] = new long[row.size()][];
            for (int k = 0; k < out[b].length; k++, i++) {
                long[] z = row.get(k);
                out[b][k] = new long[z.length];
                for (int r = 0; r < z.length; r++) {
                    out[b][k][r] = perEntry[i] < 0 ? perEntry[i] : z[r];
                }
            }
        }
        return out;
    }
}
