package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.core.SegmentOpenings;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The peer segments an engine has opened: name → id → {@link PeerSegment}. Opening fetches the
 * peer's descriptor with no engine-wide lock held: one fetch per name is in flight at a time
 * (later callers for the same name wait for its result), and fetches for different names run
 * side by side ({@link SegmentOpenings}). A failed fetch is not remembered: the next call tries again.
 *
 * <p>Thread-safe (concurrent maps; the per-name future is the only hand-over).
 */
final class PeerSegments {

    private static final Logger LOG = LoggerFactory.getLogger(PeerSegments.class);

    private final Map<String, Long> ids = new ConcurrentHashMap<>();
    private final Map<Long, PeerSegment> byId = new ConcurrentHashMap<>();
    private final SegmentOpenings opening;
    private final AtomicLong nextId = new AtomicLong(1);

    /** {@code waitMillis} bounds how long a caller waits for another caller's fetch of the same name. */
    PeerSegments(long waitMillis) {
        this.opening = new SegmentOpenings(waitMillis);
    }

    /**
     * The id of segment {@code name}, fetching its descriptor with {@code fetch} the first time;
     * -1 when the fetch fails ({@link HandshakeException}, logged).
     */
    long open(String name, Function<String, SegmentDescriptor> fetch) {
        Long id = ids.get(name);
        if (id != null) {
            return id;
        }
        return opening.open(name, n -> {
            Long again = ids.get(n); // opened between the first look and the claim
            if (again != null) {
                return again;
            }
            try {
                SegmentDescriptor d = fetch.apply(n);
                long fresh = nextId.getAndIncrement();
                byId.put(fresh, new PeerSegment(fresh, d));
                ids.put(n, fresh);
                return fresh;
            } catch (HandshakeException e) {
                LOG.warn("openSegment({}) failed: {}", n, e.getMessage());
                return -1;
            }
        });
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
