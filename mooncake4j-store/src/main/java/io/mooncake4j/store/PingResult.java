package io.mooncake4j.store;

/**
 * The master's answer to Ping ({@code PingResponse}).
 *
 * @param viewVersionId the master's view version (changes when another master takes over)
 * @param clientStatus  {@link #OK}, {@link #NEED_REMOUNT} or {@link #UNDEFINED}
 */
public record PingResult(long viewVersionId, int clientStatus) {

    /** {@code ClientStatus::UNDEFINED}. */
    public static final int UNDEFINED = 0;
    /** {@code ClientStatus::OK}: the master knows this client and its segments. */
    public static final int OK = 1;
    /** {@code ClientStatus::NEED_REMOUNT}: first contact, a restarted master, or an expired client. */
    public static final int NEED_REMOUNT = 2;

    /** {@return whether the master wants the client's segments mounted again} */
    public boolean needRemount() {
        return clientStatus == NEED_REMOUNT;
    }
}
