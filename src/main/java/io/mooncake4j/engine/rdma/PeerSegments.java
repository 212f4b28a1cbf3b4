package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The peer segments an engine has opened: name → id → {@link PeerSegment}. Opening fetches the
 * peer's descriptor with no engine-wide lock held: one fetch per name is in flight at a time
 * (later callers for the same name wait for its result), and fetches for different names run
 * side by side, so one unresponsive peer stalls only the callers that asked for it. A failed
 * fetch is not remembered: the next call tries again.
 *
 * <p>Thread-safe (concurrent maps; the per-name future is the only hand-over).
 */
final class PeerSegments {

    private static final Logger LOG = LoggerFactory.getLogger(PeerSegments.class);

    private final Map<String, Long> ids = new ConcurrentHashMap<>();
    private final Map<Long, PeerSegment> byId = new ConcurrentHashMap<>();
    private final Map<String, CompletableFuture<Long>> opening = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);

    /**
     * The id of segment {@code name}, fetching its descriptor with {@code fetch} the first time;
     * -1 when the fetch fails ({@link HandshakeException}, logged).
     */
    long open(String name, Function<String, SegmentDescriptor> fetch) {
        Long id = ids.get(name);
        if (id != null) {
            return id;
        }
        CompletableFuture<Long> mine = new CompletableFuture<>();
        CompletableFuture<Long> running = opening.putIfAbsent(name, mine);
        if (running != null) {
            return running.join(); // bounded by the fetch's own connect and read timeouts
        }
        try {
            id = ids.get(name); // opened between the first look and the claim
            if (id == null) {
                SegmentDescriptor d = fetch.apply(name);
                id = nextId.getAndIncrement();
                byId.put(id, new PeerSegment(id, d));
                ids.put(name, id);
            }
            mine.complete(id);
            return id;
        } catch (HandshakeException e) {
            LOG.warn("openSegment({}) failed: {}", name, e.getMessage());
            mine.complete(-1L);
            return -1;
        } catch (RuntimeException | Error e) {
            mine.complete(-1L);
            throw e;
        } finally {
            opening.remove(name, mine);
        }
    }

    /** The segment with {@code id}, or null. */
    PeerSegment get(long id) {
        return byId.get(id);
    }

    /** Replaces the segment {@code fresh.id} after a refresh. */
    void replace(PeerSegment fresh) {
        byId.put(fresh.id, fresh);
    }
}
