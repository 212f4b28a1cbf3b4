package io.mooncake4j.engine.core;

import io.mooncake4j.engine.handshake.HandshakeFrame;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The engine side of the handshake port, in one copy for every engine: Metadata (type 1) answers
 * the local descriptor, Probe (type 3) answers success, Notify (type 2) queues the notification
 * for {@link #drainNotifies}; Connection (type 0) is the transport's ({@code rdma} brings up QPs,
 * {@code tcp} answers an empty descriptor as Mooncake's TCP transport does). Thread-safe.
 */
public final class HandshakeService {

    /** The Probe reply. */
    public static final String PROBE_REPLY = "{\"status\":\"success\"}\n";
    /** The Notify reply. */
    public static final String NOTIFY_REPLY = "{\"name\":\"\",\"notify_msg\":\"success\"}\n";

    private final ConcurrentLinkedQueue<String[]> notifies = new ConcurrentLinkedQueue<>();
    private final Supplier<String> metadata;
    private final Function<Object, String> connection;

    /**
     * @param metadata   the local descriptor's JSON, built per request
     * @param connection the Connection (type 0) handler: parsed request in, JSON reply out
     */
    public HandshakeService(Supplier<String> metadata, Function<Object, String> connection) {
        this.metadata = metadata;
        this.connection = connection;
    }

    /** A {@link io.mooncake4j.engine.handshake.HandshakeServer.Handler} body; throws on a bad request. */
    public String handle(int type, Object request) {
        return switch (type) {
            case HandshakeFrame.METADATA -> metadata.get();
            case HandshakeFrame.CONNECTION -> connection.apply(request);
            case HandshakeFrame.PROBE -> PROBE_REPLY;
            case HandshakeFrame.NOTIFY -> {
                if (!(request instanceof Map<?, ?> m)) {
                    throw new IllegalArgumentException("Notify body is not an object");
                }
                notifies.add(new String[] {String.valueOf(m.get("name")), String.valueOf(m.get("notify_msg"))});
                yield NOTIFY_REPLY;
            }
            default -> throw new IllegalArgumentException("unknown request type " + type);
        };
    }

    /** Drains the notifications received so far (Mooncake {@code getNotifies}), made into {@code T}s. */
    public <T> List<T> drainNotifies(BiFunction<String, String, T> make) {
        List<T> out = new ArrayList<>();
        String[] n;
        while ((n = notifies.poll()) != null) {
            out.add(make.apply(n[0], n[1]));
        }
        return out;
    }
}
