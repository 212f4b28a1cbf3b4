package io.mooncake4j.connector.wire;

/**
 * vLLM's {@code MooncakeXferResponseStatus} (an {@code IntEnum}); encoded as its integer value.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py</a>
 */
public enum MooncakeXferResponseStatus {
    /** Last response for this DEALER request (it may still carry {@code err_reqs}). */
    FINISH(0),
    /** More responses follow (some transfers are still waiting for P to be ready). */
    CONTINUE(1),
    /** The whole request failed; D fails every request it asked for in this message. */
    ERROR(2);

    private final int value;

    MooncakeXferResponseStatus(int value) {
        this.value = value;
    }

    /** The wire value. */
    public int value() {
        return value;
    }

    /**
     * The status of a wire value.
     *
     * @throws ProtocolException for a value outside 0..2 (msgspec: "Invalid enum value")
     */
    public static MooncakeXferResponseStatus fromValue(long value) {
        for (MooncakeXferResponseStatus s : values()) {
            if (s.value == value) {
                return s;
            }
        }
        throw new ProtocolException("Invalid enum value " + value + " - at `$.status`");
    }
}
