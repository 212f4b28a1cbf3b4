package io.mooncake4j.connector;

import java.util.Arrays;
import java.util.Objects;

/**
 * Helpers for per-KV-group block-id lists, vLLM's {@code list[list[int]]} (one inner list per
 * transfer group, in group order), held as {@code int[][]} so that no block id is boxed.
 *
 * <p>Ownership convention of the connector: a data class copies the arrays it is given at
 * construction ({@link #copyOf}) and hands its own arrays out without copying; callers treat
 * returned arrays as read-only.
 */
public final class BlockIds {

    /** The empty per-group list ({@code []}: zero groups), shared; never modify it. */
    public static final int[][] NONE = new int[0][];

    private BlockIds() {}

    /**
     * {@return a deep copy; every inner array must be non-null}
     *
     * @param blockIds block ids per KV-cache group
     */
    public static int[][] copyOf(int[][] blockIds) {
        Objects.requireNonNull(blockIds, "blockIds");
        if (blockIds.length == 0) {
            return NONE;
        }
        int[][] out = new int[blockIds.length][];
        for (int g = 0; g < blockIds.length; g++) {
            out[g] = Objects.requireNonNull(blockIds[g], "block ids of a group").clone();
        }
        return out;
    }

    /**
     * {@return whether any group has at least one block (vLLM's {@code any(len(g) > 0 for g in block_ids)})}
     *
     * @param blockIds block ids per KV-cache group
     */
    public static boolean anyBlocks(int[][] blockIds) {
        for (int[] group : blockIds) {
            if (group.length > 0) {
                return true;
            }
        }
        return false;
    }

    /**
     * {@return total number of block ids over all groups}
     *
     * @param blockIds block ids per KV-cache group
     */
    public static int totalBlocks(int[][] blockIds) {
        int n = 0;
        for (int[] group : blockIds) {
            n += group.length;
        }
        return n;
    }

    /**
     * {@return a Python-like rendering, e.g. {@code [[1, 2], [7]]}}
     *
     * @param blockIds block ids per KV-cache group
     */
    public static String toString(int[][] blockIds) {
        return Arrays.deepToString(blockIds);
    }
}
