package io.mooncake4j.serve;

import java.util.List;

/**
 * What a real model's generated tokens answer: the text up to the first stop string (not included)
 * or end-of-sequence token, how many tokens that took, and why it ended (vLLM's
 * {@code finish_reason}: {@code stop} or {@code length}; {@code stop_reason}: the stop string, the
 * end-of-sequence token id, or null).
 *
 * @param text         the answer's text
 * @param tokens       generated tokens counted in the usage (the stopping token included)
 * @param stopped      whether a stop string or an end-of-sequence token ended it
 * @param stopReason   the stop string or end-of-sequence token id, or null
 */
record TextAnswer(String text, int tokens, boolean stopped, Object stopReason) {

    /** {@code stop} or {@code length}. */
    String finishReason() {
        return stopped ? "stop" : "length";
    }

    /** The answer of the first {@code n} tokens of {@code out}. */
    static TextAnswer of(TextModel tm, List<String> stop, int[] out, int n) {
        for (int i = 0; i < n; i++) {
            if (tm.isEos(out[i])) {
                return new TextAnswer(tm.decode(out, i), i + 1, true, out[i]);
            }
            if (!stop.isEmpty()) {
                String full = tm.decode(out, i + 1);
                int at = -1;
                String which = null;
                for (String s : stop) {
                    int k = full.indexOf(s);
                    if (k >= 0 && (at < 0 || k < at)) {
                        at = k;
                        which = s;
                    }
                }
                if (at >= 0) {
                    return new TextAnswer(full.substring(0, at), i + 1, true, which);
                }
            }
        }
        return new TextAnswer(tm.decode(out, n), n, false, null);
    }

    /** Characters at the end of a partial answer that a stream holds back: they may begin a stop string. */
    static int holdBack(List<String> stop) {
        int h = 0;
        for (String s : stop) {
            h = Math.max(h, s.length() - 1);
        }
        return h;
    }
}
