package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the send path answers D on the side channel: a response through the pull's {@link ReplySink}
 * ({@code CONTINUE} is not the message's final answer, {@code FINISH} and {@code ERROR} are), an
 * {@code ERROR} answer counted, and a rejection logged at ERROR once per distinct text. It owns the count
 * of ERROR answers and the texts logged so far.
 *
 * <p><b>Threads.</b> {@link #send} from any thread (the sink is thread-safe: a transfer-pool thread
 * answers a wave that landed); {@link #logRejected} and {@link #replyError} on the sender loop; the
 * counter from any thread.
 */
final class Replies {

    /** The send path's log category, where these messages have always been. */
    private static final Logger LOG = LoggerFactory.getLogger(KvSender.class);
    /** Distinct rejection texts logged at ERROR (a hostile peer cannot flood the log). */
    private static final int MAX_DISTINCT_REJECTIONS = 256;

    private final Set<String> rejectedLogged = new HashSet<>(); // sender loop
    private final LongAdder errorReplies = new LongAdder();

    /** Logs a rejected message at ERROR once per distinct text (a hostile peer cannot flood the log), then at DEBUG. */
    void logRejected(String msg) {
        if (rejectedLogged.size() < MAX_DISTINCT_REJECTIONS && rejectedLogged.add(String.valueOf(msg))) {
            LOG.error("Error processing Mooncake xfer request: {} (repeats are logged at DEBUG)", msg);
        } else {
            LOG.debug("Error processing Mooncake xfer request: {}", msg);
        }
    }

    void replyError(ReplySink reply, String msg) {
        errorReplies.increment();
        send(reply, MooncakeXferResponse.error(msg));
    }

    static void send(ReplySink reply, MooncakeXferResponse resp) {
        send(reply, resp.status(), MooncakeXferResponseCodec.encode(resp));
    }

    /** A {@code CONTINUE} is not the message's final answer; {@code FINISH} and {@code ERROR} are. */
    static void send(ReplySink reply, MooncakeXferResponseStatus status, byte[] encoded) {
        if (status == MooncakeXferResponseStatus.CONTINUE) {
            reply.sendContinue(encoded);
        } else {
            reply.send(encoded);
        }
    }

    /** ERROR answers sent (any thread). */
    long errorReplies() {
        return errorReplies.sum();
    }
}
