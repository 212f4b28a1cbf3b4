package io.mooncake4j.sim;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * KV layout strings: what a node's KV blocks mean, compared by a decode node before it uses a byte of a
 * prefill node's KV. A model node's layout is {@code arch/L<layers>/H<heads>/KV<kv heads>/D<head size>/
 * <dtype>/<weights digest>/T<tokenizer digest>/B<block size>} (e.g.
 * {@code llama/L2/H4/KV2/D32/F32/1f0c2a9e4b7d6c35/T5e1d0c9b/B16}): the model's part
 * ({@link StepModel#kvLayout()}) and the engine's block size ({@link #withBlockSize}).
 */
public final class KvLayouts {

    /** What each '/'-separated part of a layout names, in order. */
    private static final String[] PARTS = {"architecture", "layers", "attention heads", "KV heads", "head size",
        "dtype", "weights digest", "tokenizer", "block size"};

    private KvLayouts() {}

    /** {@return the model's layout with the engine's block size appended, or null when the model has none} */
    public static String withBlockSize(String modelLayout, int blockSize) {
        return modelLayout == null ? null : modelLayout + "/B" + blockSize;
    }

    /**
     * Names the parts in which two layouts differ, e.g. {@code "dtype F32 vs BF16, weights digest 1f0c… vs
     * 9a2b…"}; {@code "format"} when they do not have the same parts.
     *
     * @param theirs the peer's layout
     * @param ours   this node's layout
     * @return the differences, empty when the two are equal
     */
    public static String differences(String theirs, String ours) {
        Objects.requireNonNull(theirs, "theirs");
        Objects.requireNonNull(ours, "ours");
        if (theirs.equals(ours)) {
            return "";
        }
        String[] a = theirs.split("/", -1);
        String[] b = ours.split("/", -1);
        if (a.length != b.length) {
            return "format";
        }
        List<String> out = new ArrayList<>();
        for (int i = 0; i < a.length; i++) {
            if (!a[i].equals(b[i])) {
                String what = i < PARTS.length ? PARTS[i] : "part " + (i + 1);
                out.add(what + " " + a[i] + " vs " + b[i]);
            }
        }
        return String.join(", ", out);
    }

    /**
     * The error a decode node answers when the prefill node's layout differs from its own.
     *
     * @param requestId the request refused
     * @param theirs    the prefill node's layout
     * @param ours      this node's layout
     * @return the message, naming both layouts and what differs
     */
    public static String mismatchMessage(String requestId, String theirs, String ours) {
        return String.format(Locale.ROOT,
                "request %s: the prefill node's KV layout %s differs from this node's %s (%s): its KV cannot be "
                        + "decoded here; pair nodes that serve the same checkpoint with the same dtype and block size",
                requestId, theirs, ours, differences(theirs, ours));
    }
}
