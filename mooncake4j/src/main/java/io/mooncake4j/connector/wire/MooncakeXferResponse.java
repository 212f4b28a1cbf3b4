package io.mooncake4j.connector.wire;

import java.util.List;
import java.util.Objects;

/**
 * vLLM's {@code MooncakeXferResponse}: P's answer to one {@link MooncakeXferMetadata} (one or
 * more per request, the last one {@code FINISH} or {@code ERROR}). Encode and decode with
 * {@link MooncakeXferResponseCodec}.
 *
 * <p>{@code null} stands for Python's {@code None} (the default, omitted on the wire). An empty
 * list is <em>not</em> the default and is written as an empty array, as msgspec would; vLLM's P
 * always passes {@code ok_reqs or None}, which {@link #of} reproduces.
 *
 * @param status  FINISH, CONTINUE or ERROR
 * @param okReqs  D request ids whose KV was pushed, or {@code null}
 * @param errReqs D request ids that failed, or {@code null}
 * @param errMsg  error text, or {@code null}
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py: MooncakeXferResponse</a>
 */
public record MooncakeXferResponse(
        MooncakeXferResponseStatus status,
        List<String> okReqs,
        List<String> errReqs,
        String errMsg) {

    public MooncakeXferResponse {
        Objects.requireNonNull(status, "status");
        okReqs = okReqs == null ? null : List.copyOf(okReqs);
        errReqs = errReqs == null ? null : List.copyOf(errReqs);
    }

    /** As vLLM's P builds it: empty lists become {@code None} ({@code ok_reqs or None}). */
    public static MooncakeXferResponse of(MooncakeXferResponseStatus status, List<String> okReqs,
            List<String> errReqs, String errMsg) {
        return new MooncakeXferResponse(status,
                okReqs == null || okReqs.isEmpty() ? null : okReqs,
                errReqs == null || errReqs.isEmpty() ? null : errReqs,
                errMsg);
    }

    /** An {@code ERROR} response with only a message (P's answer to an undecodable request). */
    public static MooncakeXferResponse error(String errMsg) {
        return new MooncakeXferResponse(MooncakeXferResponseStatus.ERROR, null, null, errMsg);
    }

    /** {@link #okReqs()}, or an empty list for {@code None}. */
    public List<String> okReqsOrEmpty() {
        return okReqs == null ? List.of() : okReqs;
    }

    /** {@link #errReqs()}, or an empty list for {@code None}. */
    public List<String> errReqsOrEmpty() {
        return errReqs == null ? List.of() : errReqs;
    }
}
