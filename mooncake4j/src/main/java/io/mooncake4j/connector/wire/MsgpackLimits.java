package io.mooncake4j.connector.wire;

/**
 * Bounds a {@link MsgpackReader} enforces on untrusted input. Independently of these, a declared
 * string, binary or container length is checked against the bytes that remain before anything
 * is allocated, so a forged length never causes an allocation larger than a small multiple of
 * the input.
 *
 * @param maxDepth            deepest nesting of arrays and maps (the top-level value is depth 1)
 * @param maxStringBytes      longest string or binary payload in bytes
 * @param maxContainerEntries most elements of one array, or entries of one map
 */
public record MsgpackLimits(int maxDepth, int maxStringBytes, int maxContainerEntries) {

    /** Generous defaults for side-channel messages: depth 32, 16 MiB strings, 16 Mi entries. */
    public static final MsgpackLimits DEFAULT = new MsgpackLimits(32, 16 << 20, 16 << 20);

    public MsgpackLimits {
        if (maxDepth < 1 || maxStringBytes < 0 || maxContainerEntries < 0) {
            throw new IllegalArgumentException("limits must be non-negative and maxDepth >= 1: maxDepth="
                    + maxDepth + " maxStringBytes=" + maxStringBytes + " maxContainerEntries=" + maxContainerEntries);
        }
    }
}
