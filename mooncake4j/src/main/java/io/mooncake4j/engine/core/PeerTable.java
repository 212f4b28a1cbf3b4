package io.mooncake4j.engine.core;

import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeException;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.EngineSettings;
import java.util.Collection;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The peer segments {@code openSegment} resolved, and their descriptor cache. Names map to the
 * segment of their resolved identity (the data address a TCP peer advertises, else the
 * descriptor's name), so aliases of one engine ({@code localhost:p}, {@code 127.0.0.1:p}) share one
 * id and one set of connections; an alias of this engine is segment 0. No lock is held across a
 * fetch; concurrent opens of one name share it ({@link SegmentOpenings}). At most
 * {@link EngineSettings#maxSegments()} names are accepted. Thread-safe.
 */
final class PeerTable {

    private static final Logger LOG = LoggerFactory.getLogger(PeerTable.class);

    private final EngineSettings settings;
    private final HandshakeClient client;
    private final Supplier<SegmentDescriptor> local;
    private final Consumer<CorePeer> forget;
    private final SegmentOpenings opening;
    /** Every name resolved (aliases included) → id; written under itself. */
    private final Map<String, Long> ids = new ConcurrentHashMap<>();
    /** Resolved identity → id; written under {@link #ids}. */
    private final Map<String, Long> identities = new ConcurrentHashMap<>();
    private final Map<Long, CorePeer> peers = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);
    private final AtomicLong limitHits = new AtomicLong();
    private volatile boolean closed;
    /** Where descriptors are read in HTTP metadata mode; null: over the peer's handshake port. */
    private volatile MetadataDirectory directory;

    /**
     * @param local  this engine's descriptor (sent with each fetch, and to recognise aliases of itself)
     * @param forget drops every transport's state for a peer whose endpoints changed on refresh
     */
    PeerTable(EngineSettings settings, HandshakeClient client, Supplier<SegmentDescriptor> local,
            Consumer<CorePeer> forget) {
        this.settings = settings;
        this.client = client;
        this.local = local;
        this.forget = forget;
        this.opening = new SegmentOpenings(settings.handshake().clientRequestTimeoutMs() + 5_000L);
    }

    /** {@code open} calls refused at {@link EngineSettings#maxSegments()} so far. */
    long limitHits() {
        return limitHits.get();
    }

    /** The id of peer name {@code n} (normalised, not the own name), fetching its descriptor once; -1 on failure. */
    long open(String n) {
        Long id = ids.get(n);
        if (id != null) {
            return id;
        }
        return opening.open(n, this::fetchAndRegister);
    }

    /** The peer opened under name {@code n} (normalised), or null: never fetches. */
    CorePeer opened(String n) {
        Long id = ids.get(n);
        return id == null || id == 0 ? null : peers.get(id);
    }

    CorePeer get(long id) {
        return peers.get(id);
    }

    Collection<CorePeer> all() {
        return peers.values();
    }

    /** Descriptor fetches in flight now (tests). */
    int openingsInFlight() {
        return opening.inFlight();
    }

    void close() {
        closed = true;
    }

    /** From now on descriptors are read from {@code d} (HTTP metadata mode), not over the handshake. */
    void useDirectory(MetadataDirectory d) {
        this.directory = d;
    }

    /** {@code name}'s descriptor from the metadata server in HTTP mode, else over its handshake port. */
    private SegmentDescriptor fetch(String name, String localJson) throws HandshakeException {
        MetadataDirectory d = directory;
        if (d != null) {
            return d.lookup(name);
        }
        return client.fetchDescriptor(PeerAddress.parse(name, settings.handshake().defaultPort()), localJson);
    }

    private long fetchAndRegister(String n) {
        Long id = ids.get(n);
        if (id != null) {
            return id;
        }
        if (ids.size() >= settings.maxSegments()) {
            if (limitHits.incrementAndGet() <= 10) {
                LOG.warn("openSegment({}) refused: {} segment names are open (MOONCAKE4J_TCP_MAX_SEGMENTS)", n,
                        ids.size());
            }
            return -1;
        }
        SegmentDescriptor d;
        try {
            d = fetch(n, local.get().toJson());
        } catch (HandshakeException e) {
            LOG.warn("openSegment({}) failed: {}", n, e.getMessage());
            return -1;
        }
        String key = identity(d);
        synchronized (ids) {
            if (closed) {
                return -1;
            }
            id = ids.get(n);
            if (id != null) {
                return id;
            }
            long sid;
            if (isSelf(d, key, local.get())) {
                sid = 0; // an alias of this engine's own segment
            } else {
                Long existing = identities.get(key);
                if (existing != null) {
                    sid = existing;
                } else {
                    sid = nextId.getAndIncrement();
                    peers.put(sid, new CorePeer(sid, key, d, this));
                    identities.put(key, sid);
                }
            }
            ids.put(n, sid);
            LOG.debug("opened segment {} as {} ({}): protocol {}, data port {}, {} buffers", n, sid, key,
                    d.protocol(), d.tcpDataPort(), d.buffers().size());
            return sid;
        }
    }

    /**
     * Re-fetches {@code p}'s descriptor from the name it advertises; false (logged) on failure, or when
     * the fresh descriptor is this engine's own ({@link #isSelf}, checked again on each refresh). No
     * lock is held across the fetch or while the transports forget the peer (a transport may call
     * this holding its own per-peer lock, and {@code forget} takes that lock).
     */
    boolean refresh(CorePeer p) {
        SegmentDescriptor d = p.descriptor();
        SegmentDescriptor fresh;
        try {
            fresh = fetch(d.name(), "{}\n");
        } catch (HandshakeException e) {
            LOG.warn("cannot refresh segment {}: {}", d.name(), e.getMessage());
            return false;
        }
        if (isSelf(fresh, identity(fresh), local.get())) {
            // the name now leads to this engine itself (its handshake answer, metadata entry or DNS changed
            // since the first open): the peer stays failed, nothing is written into our own memory
            p.foundOwnEngine();
            LOG.warn("segment {} refreshed to this engine's own segment ({}, data port {}): refused, its "
                    + "transfers fail", d.name(), fresh.name(), fresh.tcpDataPort());
            return false;
        }
        boolean moved = !sameEndpoints(d, fresh);
        if (moved) {
            LOG.info("segment {} refreshed: data port {} -> {}, {} buffers", d.name(), d.tcpDataPort(),
                    fresh.tcpDataPort(), fresh.buffers().size());
            forget.accept(p);
        }
        p.replace(fresh, moved);
        return true;
    }

    /** Whether two descriptors of a peer reach it the same way (buffers and timestamp aside). */
    static boolean sameEndpoints(SegmentDescriptor a, SegmentDescriptor b) {
        return a.name().equals(b.name()) && a.protocol().equals(b.protocol()) && a.tcpDataPort() == b.tcpDataPort()
                && a.tcpProtoVersion() == b.tcpProtoVersion() && a.devices().equals(b.devices())
                && Objects.equals(a.extensions(), b.extensions());
    }

    /**
     * Whether {@code d} (as fetched, whatever name, port, forwarder or metadata path led to it) is this
     * engine's own segment: its name or resolved identity is ours, or it advertises our TCP data port on
     * an address of this host (loopback, wildcard or a local interface): a write to it would land in our
     * own memory. A forged descriptor naming our data port under another local name is ours too.
     */
    static boolean isSelf(SegmentDescriptor d, String key, SegmentDescriptor own) {
        if (d.name().equals(own.name()) || key.equals(identity(own))) {
            return true;
        }
        if (own.tcpDataPort() <= 0 || d.tcpDataPort() != own.tcpDataPort()) {
            return false;
        }
        try {
            for (java.net.InetAddress a : java.net.InetAddress.getAllByName(d.host())) {
                if (a.isLoopbackAddress() || a.isAnyLocalAddress()
                        || java.net.NetworkInterface.getByInetAddress(a) != null) {
                    return true;
                }
            }
        } catch (java.io.IOException | RuntimeException e) {
            return false; // an unknown host: not reachable as ours either
        }
        return false;
    }

    /**
     * The identity aliases share: the resolved data address TCP lanes connect to
     * ({@code tcp:<ip>:<dataPort>}) when the peer advertises one, else the descriptor's name.
     */
    static String identity(SegmentDescriptor d) {
        if (d.tcpDataPort() <= 0) {
            return "name:" + d.name();
        }
        String host = d.host();
        String ip;
        try {
            ip = java.net.InetAddress.getByName(host).getHostAddress();
        } catch (java.net.UnknownHostException e) {
            ip = "unresolved/" + host;
        }
        return "tcp:" + ip + ":" + d.tcpDataPort();
    }
}
