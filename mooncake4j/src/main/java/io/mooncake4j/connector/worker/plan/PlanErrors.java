package io.mooncake4j.connector.worker.plan;

import java.util.ArrayList;
import java.util.List;

/**
 * Per-request planning errors of one ready wave: the request ids for {@code err_reqs}, in
 * ready order, and the first message for {@code err_msg} (vLLM keeps only the first, §15 #7).
 * Reusable; not thread-safe.
 */
public final class PlanErrors {

    private final List<String> errReqs = new ArrayList<>();
    private String errMsg;

    /** Records a failed request; keeps {@code message} only if it is the first. */
    public void add(String dReqId, String message) {
        errReqs.add(dReqId);
        if (errMsg == null) {
            errMsg = message;
        }
    }

    /** Failed request ids in ready order (live view). */
    public List<String> errReqs() {
        return errReqs;
    }

    /** The first error message, or null. */
    public String errMsg() {
        return errMsg;
    }

    public boolean isEmpty() {
        return errReqs.isEmpty();
    }

    public void clear() {
        errReqs.clear();
        errMsg = null;
    }
}
