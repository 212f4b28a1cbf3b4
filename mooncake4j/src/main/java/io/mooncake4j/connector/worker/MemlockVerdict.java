package io.mooncake4j.connector.worker;

/** How the host bytes to register compare with the soft {@code RLIMIT_MEMLOCK}. */
enum MemlockVerdict {
    /** The protocol does not pin memory against the locked-memory limit (for example tcp). */
    NOT_APPLICABLE("not applicable for this protocol"),
    /** The limit could not be read (not Linux, or native access disabled). */
    UNKNOWN("unknown (limit could not be read)"),
    /** No limit. */
    UNLIMITED("ok (unlimited)"),
    /** The host bytes fit under the limit. */
    WITHIN_LIMIT("ok (within the limit)"),
    /** The host bytes exceed the limit: RDMA registration will likely fail. */
    EXCEEDS_LIMIT("EXCEEDS the limit");

    private final String text;

    MemlockVerdict(String text) {
        this.text = text;
    }

    /** A short human phrase. */
    public String text() {
        return text;
    }
}
