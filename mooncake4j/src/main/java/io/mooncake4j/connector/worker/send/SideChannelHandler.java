package io.mooncake4j.connector.worker.send;

import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Handles the messages the producer's ROUTER socket receives (vLLM's {@code _sender_worker}).
 * Called on the single sender-loop thread {@code mooncake-p-sender-0}, one message at a time, in
 * arrival order; producer state touched only from here needs no locking.
 *
 * <p>A well-formed message has exactly one payload frame (D's encoded
 * {@code MooncakeXferMetadata}); a message with any other frame count is still delivered (counted as
 * malformed by the listener) so the handler can answer with an ERROR response. An exception thrown
 * here is counted and logged once per distinct error; it never stops the listener.
 */
@FunctionalInterface
public interface SideChannelHandler {

    /**
     * @param identity the ROUTER identity of the peer (frame 0)
     * @param frames   the frames after the identity; exactly one for a well-formed message
     * @param reply    sends replies to this peer, from this or any other thread
     */
    void onMessage(byte[] identity, List<byte[]> frames, ReplySink reply) throws Exception;

    /** The placeholder used until the send path is plugged in: logs each message at DEBUG. */
    static SideChannelHandler loggingOnly() {
        return LoggingHandler.INSTANCE;
    }

    /** See {@link #loggingOnly()}. */
    final class LoggingHandler implements SideChannelHandler {
        private static final Logger LOG = LoggerFactory.getLogger(LoggingHandler.class);
        static final LoggingHandler INSTANCE = new LoggingHandler();

        private LoggingHandler() {}

        @Override
        public void onMessage(byte[] identity, List<byte[]> frames, ReplySink reply) {
            if (LOG.isDebugEnabled()) {
                LOG.debug("Side-channel message with {} payload frame(s), {} byte(s) in the first; no handler installed",
                        frames.size(), frames.isEmpty() ? 0 : frames.getFirst().length);
            }
        }
    }
}
