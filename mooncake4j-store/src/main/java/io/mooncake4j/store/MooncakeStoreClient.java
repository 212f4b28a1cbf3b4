package io.mooncake4j.store;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.metadata.HttpMetadataStore;
import io.mooncake4j.metadata.MetadataException;
import io.mooncake4j.metadata.MetadataKeys;
import io.mooncake4j.metadata.RpcMeta;
import io.mooncake4j.metadata.SegmentMetadata;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Mooncake Store client with the semantics of Mooncake's Python {@code MooncakeDistributedStore}:
 * it contributes a segment of registered memory to the pool (other clients write objects into it
 * through our transfer engine), keeps its lease at the master alive, and puts and gets objects
 * by key, zero-copy from and into registered memory or copying for tools.
 *
 * <p>Errors, one model: what the store says about a key is a result, never an exception. Puts and
 * removes return 0 or a negative {@link ErrorCode} value; gets return the bytes read or a negative
 * code; batch calls return one such value per key (partial success is normal); the copying
 * {@link #getValue} returns a {@link Result}. A miss is {@link ErrorCode#OBJECT_NOT_FOUND} (-704,
 * {@link Result#missing()}), not a failure. {@link ErrorCode#OBJECT_ALREADY_EXISTS} on a put counts as
 * success (another client put the same key first); {@link ErrorCode#NO_AVAILABLE_HANDLE} (-200) is
 * backpressure, counted in {@link #backpressureCount()}. A master that cannot be reached makes every
 * key of a call {@link ErrorCode#RPC_FAIL} or {@link ErrorCode#RPC_TIMEOUT}, never a hang past the call
 * deadline. Exceptions are for the caller's mistakes and for setup, and are all {@link StoreException}:
 * {@link ErrorCode#INVALID_PARAMS} naming the wrong argument (a null key, arrays that do not match the
 * keys) or a closed client, checked before anything is sent; at {@link #setup} also a master that does
 * not serve, a segment that cannot be mounted, or a configuration this client cannot run.
 *
 * <p>Addresses passed to the zero-copy calls must lie in memory registered with
 * {@link #registerBuffer} (or this client's own segment or staging buffer).
 *
 * <p>Metadata: with {@code metadata_server = P2PHANDSHAKE} peers fetch this client's segment
 * descriptor from its engine's handshake port. With {@code http://host:port/metadata} (the master's
 * embedded metadata server, or any server of Mooncake's HTTP metadata protocol) the client also
 * publishes the descriptor and its engine's address there, in the keys and JSON of Mooncake's C++
 * engine, after each mount and remount, and withdraws them on close, so C++ clients in that mode
 * find its segment; and the engine it starts runs in that mode too: it publishes its segment there
 * (again on every registration) and finds peers' segments there, so it reaches C++ clients that run
 * in HTTP mode (whose handshake ports give no descriptor).
 *
 * <p>Threads: one liveness thread (Ping every {@code pingInterval}; ReMountSegment whenever the
 * master answers NEED_REMOUNT: at first contact, after a master restart, after a client-TTL expiry),
 * the transfer engine's, and the master connection's. Thread-safe.
 */
public final class MooncakeStoreClient implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(MooncakeStoreClient.class);

    private final StoreConfig config;
    private final TransferEngine engine;
    private final boolean ownsEngine;
    private final MasterClient master;
    private final Uuid clientId = Uuid.random();
    private final Arena arena = Arena.ofShared();
    private final List<Segment> segments = new CopyOnWriteArrayList<>();
    private final String endpoint;
    private final String hostname;
    private final long stagingBase;
    private final StagingBuffer staging;
    private final DataPath data;
    private final Copies copies;
    private final ScheduledExecutorService liveness;
    private final AtomicLong backpressure = new AtomicLong();
    private final AtomicLong remounts = new AtomicLong();
    private final AtomicLong pingFailures = new AtomicLong();
    private final AtomicLong metadataFailures = new AtomicLong();
    /** Calls in flight that use this client's memory or engine (monitor: close waits on it). */
    private final InFlight calls = new InFlight();
    /** Null in P2P handshake mode. */
    private final SegmentMetadata metadata;
    private volatile boolean masterReachable = true;
    private volatile boolean pingPaused;
    private volatile boolean closed;

    private MooncakeStoreClient(StoreConfig config, TransferEngine engine, boolean ownsEngine) {
        this.config = config;
        this.engine = engine;
        this.ownsEngine = ownsEngine;
        this.endpoint = engine.getLocalSegmentName();
        this.hostname = config.localHostname().contains(":") ? config.localHostname() : endpoint;
        this.master = new MasterClient(MasterClient.parseAddress(config.masterServerAddress()), config.rpcTimeout(),
                config.tenantId());
        long sb = 0;
        if (config.localBufferSize() > 0) {
            MemorySegment m = arena.allocate(config.localBufferSize(), 4096);
            sb = m.address();
            check(engine.registerMemory(sb, config.localBufferSize(), "cpu:0"), "register the local buffer");
        }
        this.stagingBase = sb;
        this.staging = new StagingBuffer(sb, config.localBufferSize());
        this.data = new DataPath(engine, master, clientId, endpoint, backpressure);
        this.copies = new Copies(engine, staging, data, master, endpoint);
        this.metadata = StoreSetup.isHttp(config.metadataServer())
                ? new SegmentMetadata(HttpMetadataStore.of(config.metadataServer()),
                MetadataKeys.fromEnvironment(System.getenv())) : null;
        this.liveness = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "store-liveness " + endpoint);
            t.setDaemon(true);
            return t;
        });
    }

    private static void check(int rc, String what) {
        if (rc != 0) {
            throw new StoreException(ErrorCode.INVALID_PARAMS.code(), String.format(Locale.ROOT,
                    "cannot %s: transfer engine returned %d", what, rc), null);
        }
    }

    /**
     * Starts a client with its own transfer engine: initialises the engine on {@code local_hostname}
     * in the configured metadata mode (P2P handshake, or HTTP metadata), allocates and registers the segment and the local buffer, checks the
     * master serves, mounts the segment, and starts the liveness loop.
     *
     * @param config the settings
     * @return the running client; close it
     * @throws StoreException when the engine, the master or the mount fails ({@link ErrorCode#RPC_FAIL},
     *         {@link ErrorCode#RPC_TIMEOUT}, the master's code), or {@link ErrorCode#INVALID_PARAMS} for
     *         a metadata mode or protocol this client lacks (the cause a {@code MooncakeConfigException}
     *         naming the key); in HTTP metadata mode also when the segment cannot be published
     */
    public static MooncakeStoreClient setup(StoreConfig config) {
        Args.notNull(config, "config");
        StoreSetup.checkMetadataServer(config);
        TransferEngine engine = TransferEngines.create(config.protocol().equals("tcp") ? "tcp" : config.protocol());
        // in HTTP metadata mode the engine itself publishes its segment there and finds peers' there
        int rc = engine.initialize(StoreSetup.hostOnly(config.localHostname()), config.metadataServer(),
                config.protocol(),
                config.deviceName());
        if (rc != 0) {
            String why = TransferEngines.lastError(engine);
            engine.close();
            throw new StoreException(ErrorCode.INVALID_PARAMS.code(), "transfer engine did not start"
                    + (why == null ? "" : ": " + why), null);
        }
        return start(config, engine, true);
    }

    /**
     * Starts a client on an engine the caller already initialised (in the configured metadata mode) and
     * keeps owning.
     *
     * @param config the settings ({@code local_hostname}, {@code protocol} are the engine's)
     * @param engine an initialised engine
     * @return the running client
     */
    public static MooncakeStoreClient setup(StoreConfig config, TransferEngine engine) {
        Args.notNull(config, "config");
        StoreSetup.checkMetadataServer(config);
        return start(config, Args.notNull(engine, "engine"), false);
    }

    private static MooncakeStoreClient start(StoreConfig config, TransferEngine engine, boolean owns) {
        MooncakeStoreClient c = null;
        try {
            c = new MooncakeStoreClient(config, engine, owns);
            c.master.serviceReady().orThrow();
            if (config.globalSegmentSize() > 0) {
                c.mountSegment(config.globalSegmentSize());
            }
            if (c.metadata != null) {
                c.publish();
            }
            c.pingOnce();
            long ms = config.pingInterval().toMillis();
            c.liveness.scheduleWithFixedDelay(c::pingOnce, ms, ms, TimeUnit.MILLISECONDS);
            return c;
        } catch (MetadataException e) {
            if (c != null) {
                c.close();
            } else if (owns) {
                engine.close();
            }
            throw new StoreException(ErrorCode.RPC_FAIL.code(), "cannot publish the segment: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            if (c != null) {
                c.close();
            } else if (owns) {
                engine.close();
            }
            throw e;
        }
    }

    private void mountSegment(long size) {
        MemorySegment m = arena.allocate(size, 4096);
        check(engine.registerMemory(m.address(), size, "cpu:0"), "register the segment");
        Segment s = new Segment(Uuid.random(), hostname, m.address(), size, endpoint, config.protocol(),
                StoreSetup.hostId(config));
        master.mountSegment(s, clientId).orThrow();
        segments.add(s);
    }

    /**
     * Publishes this client's segment descriptor and engine address in the metadata store. The
     * descriptor is the one the engine serves on its handshake port (asked for there), so both
     * metadata modes describe the segment identically.
     *
     * @throws MetadataException when the store refuses or cannot be reached
     */
    private void publish() {
        SegmentDescriptor d = ownDescriptor();
        metadata.publish(hostname, d, new RpcMeta(d.host(), engine.getRpcPort()));
    }

    private SegmentDescriptor ownDescriptor() {
        HandshakeClient hc = new HandshakeClient(HandshakeConfig.fromEnvironment(System.getenv()));
        try {
            return hc.fetchDescriptor(PeerAddress.parse(endpoint, engine.getRpcPort()), "{}\n");
        } catch (RuntimeException e) {
            throw new MetadataException("cannot read this engine's own segment descriptor at " + endpoint + ": "
                    + e.getMessage(), e);
        }
    }

    /** Re-publishes after a remount (the entries may have been removed at the expiry); reports failures. */
    private void republish() {
        try {
            publish();
        } catch (MetadataException e) {
            metadataFailures.incrementAndGet();
            LOG.warn("cannot publish segment {} in {}: {}", hostname, metadata.store(), e.getMessage());
        }
    }

    /** One liveness round: Ping, and ReMountSegment when the master asks for it. */
    private void pingOnce() {
        if (closed || pingPaused) {
            return;
        }
        try {
            Result<PingResult> r = master.ping(clientId);
            masterReachable = true;
            if (r.ok() && r.value().needRemount() || !r.ok() && r.code() == ErrorCode.CLIENT_NOT_FOUND.code()) {
                Result<Void> m = master.reMountSegment(List.copyOf(segments), clientId);
                if (m.ok()) {
                    if (metadata != null) {
                        republish();
                    }
                    remounts.incrementAndGet();
                    LOG.info("remounted {} segment(s) of client {} at {}", segments.size(), clientId, master.address());
                } else {
                    LOG.warn("ReMountSegment at {} answered {}", master.address(), m);
                }
            } else if (!r.ok()) {
                LOG.warn("Ping at {} answered {}", master.address(), r);
            }
        } catch (StoreException e) {
            if (masterReachable) {
                LOG.warn("master {} unreachable: {}", master.address(), e.getMessage());
            }
            masterReachable = false;
            pingFailures.incrementAndGet();
        } catch (RuntimeException e) {
            // the liveness loop must survive anything: a dead loop would expire the client silently
            LOG.error("liveness round failed", e);
        }
    }

    // ------------------------------------------------------------------ lifecycle and state

    /** {@return 0 healthy, 1 closed, 2 master unreachable (a Ping now gets no answer)} */
    public int healthCheck() {
        if (closed) {
            return 1;
        }
        try {
            master.ping(clientId);
            return 0;
        } catch (StoreException e) {
            return 2;
        }
    }

    /** {@return whether {@link #close} has begun: new calls are refused} */
    public boolean isClosed() {
        return closed;
    }

    /** {@return this client's name: {@code host:port}, the name of its segment} */
    public String getHostname() {
        return hostname;
    }

    /** {@return the transfer engine's endpoint, {@code ip:port}} */
    public String endpoint() {
        return endpoint;
    }

    /** {@return the client id the master knows this client by} */
    public Uuid clientId() {
        return clientId;
    }

    /** {@return the segments this client mounted} */
    public List<Segment> segments() {
        return List.copyOf(segments);
    }

    /** {@return the typed master calls this client uses (for tools and tests)} */
    public MasterClient master() {
        return master;
    }

    /** {@return the put and get path (tests drive its stages apart)} */
    DataPath dataPath() {
        return data;
    }

    /** {@return the transfer engine} */
    public TransferEngine engine() {
        return engine;
    }

    /** {@return puts refused with NO_AVAILABLE_HANDLE (-200): the pool was full} */
    public long backpressureCount() {
        return backpressure.get();
    }

    /** {@return successful ReMountSegment calls (one at start, then one per NEED_REMOUNT)} */
    public long remountCount() {
        return remounts.get();
    }

    /** {@return publications in the metadata store that failed (HTTP metadata mode)} */
    public long metadataFailureCount() {
        return metadataFailures.get();
    }

    /** {@return the segment metadata store in HTTP metadata mode, else empty} */
    java.util.Optional<SegmentMetadata> metadata() {
        return java.util.Optional.ofNullable(metadata);
    }

    /** {@return Pings that got no answer} */
    public long pingFailureCount() {
        return pingFailures.get();
    }

    /**
     * Pauses or resumes the liveness loop without unmounting: a paused client is expired by the
     * master after its {@code --client_ttl}, and remounts when resumed (fault tests, maintenance).
     *
     * @param paused whether Pings stop
     */
    public void pausePinging(boolean paused) {
        pingPaused = paused;
    }

    // ------------------------------------------------------------------ memory

    /**
     * {@return 0, or the engine's negative code: registers memory the zero-copy calls may use}
     *
     * @param address the memory's start address
     * @param length  its length in bytes
     */
    public int registerBuffer(long address, long length) {
        return engine.registerMemory(address, length, "cpu:0");
    }

    /**
     * {@return 0, or the engine's negative code}
     *
     * @param address the start address it was registered with
     */
    public int unregisterBuffer(long address) {
        return engine.unregisterMemory(address);
    }

    // ------------------------------------------------------------------ zero-copy

    /**
     * {@return 0 or a negative code: puts {@code size} bytes at {@code address} under {@code key}}
     *
     * @param key     the object's key
     * @param address where the value starts, in registered memory
     * @param size    the value's length in bytes
     * @param config  the placement
     */
    public int putFrom(String key, long address, long size, ReplicateConfig config) {
        return batchPutFrom(List.of(key), new long[] {address}, new long[] {size}, config)[0];
    }

    /**
     * {@return per key 0 or a negative code: one BatchPutStart, the writes, one BatchPutEnd}
     *
     * @param keys      the objects' keys
     * @param addresses each value's start, in registered memory, one per key
     * @param sizes     each value's length in bytes, one per key
     * @param config    the placement of every key
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if the three differ in length
     */
    public int[] batchPutFrom(List<String> keys, long[] addresses, long[] sizes, ReplicateConfig config) {
        Args.keys(keys);
        Args.perKey(keys, "addresses", addresses, addresses == null ? 0 : addresses.length);
        Args.perKey(keys, "sizes", sizes, sizes == null ? 0 : sizes.length);
        long[][] a = new long[keys.size()][];
        long[][] s = new long[keys.size()][];
        for (int i = 0; i < a.length; i++) {
            a[i] = new long[] {addresses[i]};
            s[i] = new long[] {sizes[i]};
        }
        return batchPutFromMultiBuffers(keys, a, s, config);
    }

    /**
     * {@return per key 0 or a negative code; each key's value is its parts concatenated}
     *
     * @param keys      the objects' keys
     * @param addresses per key, the start of each part, in registered memory
     * @param sizes     per key, the length of each part in bytes
     * @param config    the placement of every key
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if the arrays do not match the keys, or a
     *         key's parts its sizes
     */
    public int[] batchPutFromMultiBuffers(List<String> keys, long[][] addresses, long[][] sizes, ReplicateConfig config) {
        Args.notNull(config, "config");
        enter();
        try {
            return data.put(keys, addresses, sizes, config);
        } finally {
            exit();
        }
    }

    /**
     * {@return the bytes read into {@code address} (at most {@code size}), or a negative code}
     *
     * @param key     the object's key
     * @param address where to read it, in registered memory
     * @param size    the room at {@code address} in bytes
     */
    public long getInto(String key, long address, long size) {
        return batchGetInto(List.of(key), new long[] {address}, new long[] {size})[0];
    }

    /**
     * {@return per key the bytes read, or a negative code (-704 miss, -707 lease expired, ...)}
     *
     * @param keys      the objects' keys
     * @param addresses where to read each, in registered memory, one per key
     * @param sizes     the room at each address in bytes, one per key
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if the three differ in length
     */
    public long[] batchGetInto(List<String> keys, long[] addresses, long[] sizes) {
        Args.keys(keys);
        Args.perKey(keys, "addresses", addresses, addresses == null ? 0 : addresses.length);
        Args.perKey(keys, "sizes", sizes, sizes == null ? 0 : sizes.length);
        long[][] a = new long[keys.size()][];
        long[][] s = new long[keys.size()][];
        for (int i = 0; i < a.length; i++) {
            a[i] = new long[] {addresses[i]};
            s[i] = new long[] {sizes[i]};
        }
        return batchGetIntoMultiBuffers(keys, a, s);
    }

    /**
     * {@return per key the bytes read, scattered over its parts in order, or a negative code}
     *
     * @param keys      the objects' keys
     * @param addresses per key, the start of each part to fill, in registered memory
     * @param sizes     per key, the room of each part in bytes
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if the arrays do not match the keys
     */
    public long[] batchGetIntoMultiBuffers(List<String> keys, long[][] addresses, long[][] sizes) {
        enter();
        try {
            return data.get(keys, addresses, sizes, null, 0);
        } finally {
            exit();
        }
    }

    // ------------------------------------------------------------------ queries and removal

    /**
     * {@return 1 present, 0 absent, or a negative code}
     *
     * @param key the object's key
     */
    public int isExist(String key) {
        Args.key(key);
        try {
            Result<Boolean> r = master.existKey(key);
            return r.ok() ? (r.value() ? 1 : 0) : r.code();
        } catch (StoreException e) {
            return e.errorCode();
        }
    }

    /**
     * {@return per key 1, 0 or a negative code, from one BatchExistKey}
     *
     * @param keys the objects' keys
     */
    public int[] batchIsExist(List<String> keys) {
        Args.keys(keys);
        int[] out = new int[keys.size()];
        try {
            List<Result<Boolean>> r = master.batchExistKey(keys);
            for (int i = 0; i < out.length; i++) {
                out[i] = i >= r.size() ? ErrorCode.RPC_FAIL.code()
                        : r.get(i).ok() ? (r.get(i).value() ? 1 : 0) : r.get(i).code();
            }
        } catch (StoreException e) {
            Arrays.fill(out, e.errorCode());
        }
        return out;
    }

    /**
     * {@return the object's size in bytes, or a negative code}
     *
     * @param key the object's key
     */
    public long getSize(String key) {
        Args.key(key);
        try {
            Result<ReplicaList> r = master.getReplicaList(key);
            if (!r.ok()) {
                return r.code();
            }
            ReplicaDescriptor d = DataPath.choose(r.value(), endpoint);
            return d == null ? ErrorCode.REPLICA_IS_NOT_READY.code() : d.size();
        } catch (StoreException e) {
            return e.errorCode();
        }
    }

    /**
     * {@return 0 or a negative code (OBJECT_HAS_LEASE while a reader holds a lease)}
     *
     * @param key the object's key
     */
    public int remove(String key) {
        return remove(key, false);
    }

    /**
     * {@return 0 or a negative code; {@code force} ignores leases}
     *
     * @param key   the object's key
     * @param force remove even while a lease is held
     */
    public int remove(String key, boolean force) {
        Args.key(key);
        try {
            return master.remove(key, force).code();
        } catch (StoreException e) {
            return e.errorCode();
        }
    }

    /**
     * {@return per key 0 or a negative code}
     *
     * @param keys  the objects' keys
     * @param force remove even while a lease is held
     */
    public int[] batchRemove(List<String> keys, boolean force) {
        Args.keys(keys);
        int[] out = new int[keys.size()];
        try {
            List<Result<Void>> r = master.batchRemove(keys, force);
            for (int i = 0; i < out.length; i++) {
                out[i] = i < r.size() ? r.get(i).code() : ErrorCode.RPC_FAIL.code();
            }
        } catch (StoreException e) {
            Arrays.fill(out, e.errorCode());
        }
        return out;
    }

    /**
     * {@return the number of objects whose keys match {@code regex} that were removed, or a negative code
     * (Mooncake's {@code remove_by_regex}; ECMAScript syntax, as the master's {@code std::regex})}
     *
     * @param regex the pattern
     * @param force remove leased objects too
     */
    public long removeByRegex(String regex, boolean force) {
        Args.notNull(regex, "regex");
        try {
            Result<Long> r = master.removeByRegex(regex, force);
            return r.ok() ? r.value() : r.code();
        } catch (StoreException e) {
            return e.errorCode();
        }
    }

    /**
     * {@return the number of objects removed, or a negative code}
     *
     * @param force remove leased objects too
     */
    public long removeAll(boolean force) {
        try {
            return master.removeAll(force);
        } catch (StoreException e) {
            return e.errorCode();
        }
    }

    // ------------------------------------------------------------------ copying

    /**
     * {@return 0 or a negative code: puts a copy of {@code value}}
     *
     * @param key    the object's key
     * @param value  the bytes to store
     * @param config the placement
     */
    public int put(String key, byte[] value, ReplicateConfig config) {
        return copyingPut(List.of(Args.key(key)), List.of(List.of(Args.notNull(value, "value"))), config, false)[0];
    }

    /**
     * {@return 0 or a negative code: puts the concatenation of {@code parts} (Mooncake's {@code put_parts},
     * e.g. LMCache's 28-byte header and the KV bytes) without joining them on the heap}
     *
     * @param key    the object's key
     * @param parts  the value's parts, in order
     * @param config the placement
     */
    public int putParts(String key, List<byte[]> parts, ReplicateConfig config) {
        return copyingPut(List.of(Args.key(key)), List.of(Args.notNull(parts, "parts")), config, false)[0];
    }

    /**
     * {@return per key 0 or a negative code: copies of the values, in one batch (Mooncake's {@code put_batch})}
     *
     * @param keys   the objects' keys
     * @param values the bytes, one per key
     * @param config the placement of every key
     */
    public int[] putBatch(List<String> keys, List<byte[]> values, ReplicateConfig config) {
        return copyingPut(keys, singleParts(values), config, false);
    }

    /**
     * {@return 0 or a negative code: puts {@code value} under {@code key}, replacing an existing value
     * (Mooncake's {@code upsert}; the master may answer OBJECT_REPLICA_BUSY while the old value is being
     * read)}
     *
     * @param key    the object's key
     * @param value  the bytes to store
     * @param config the placement
     */
    public int upsert(String key, byte[] value, ReplicateConfig config) {
        return copyingPut(List.of(Args.key(key)), List.of(List.of(Args.notNull(value, "value"))), config, true)[0];
    }

    /**
     * {@return 0 or a negative code: {@link #putParts} that replaces an existing value}
     *
     * @param key    the object's key
     * @param parts  the value's parts, in order
     * @param config the placement
     */
    public int upsertParts(String key, List<byte[]> parts, ReplicateConfig config) {
        return copyingPut(List.of(Args.key(key)), List.of(Args.notNull(parts, "parts")), config, true)[0];
    }

    /**
     * {@return per key 0 or a negative code: {@link #putBatch} that replaces existing values}
     *
     * @param keys   the objects' keys
     * @param values the bytes, one per key
     * @param config the placement of every key
     */
    public int[] upsertBatch(List<String> keys, List<byte[]> values, ReplicateConfig config) {
        return copyingPut(keys, singleParts(values), config, true);
    }

    /**
     * {@return 0 or a negative code: {@link #putFrom} that replaces an existing value}
     *
     * @param key     the object's key
     * @param address where the value starts, in registered memory
     * @param size    the value's length in bytes
     * @param config  the placement
     */
    public int upsertFrom(String key, long address, long size, ReplicateConfig config) {
        return batchUpsertFrom(List.of(Args.key(key)), new long[] {address}, new long[] {size}, config)[0];
    }

    /**
     * {@return per key 0 or a negative code: {@link #batchPutFrom} that replaces existing values}
     *
     * @param keys      the objects' keys
     * @param addresses each value's start, in registered memory, one per key
     * @param sizes     each value's length in bytes, one per key
     * @param config    the placement of every key
     */
    public int[] batchUpsertFrom(List<String> keys, long[] addresses, long[] sizes, ReplicateConfig config) {
        Args.keys(keys);
        Args.perKey(keys, "addresses", addresses, addresses == null ? 0 : addresses.length);
        Args.perKey(keys, "sizes", sizes, sizes == null ? 0 : sizes.length);
        Args.notNull(config, "config");
        long[][] a = new long[keys.size()][];
        long[][] s = new long[keys.size()][];
        for (int i = 0; i < a.length; i++) {
            a[i] = new long[] {addresses[i]};
            s[i] = new long[] {sizes[i]};
        }
        enter();
        try {
            return data.put(keys, a, s, config, true);
        } finally {
            exit();
        }
    }

    private static List<List<byte[]>> singleParts(List<byte[]> values) {
        Args.notNull(values, "values");
        List<List<byte[]>> out = new ArrayList<>(values.size());
        for (int i = 0; i < values.size(); i++) {
            if (values.get(i) == null) {
                throw Args.invalid("values[%d] is null", i);
            }
            out.add(List.of(values.get(i)));
        }
        return out;
    }

    private int[] copyingPut(List<String> keys, List<List<byte[]>> parts, ReplicateConfig config, boolean upsert) {
        enter();
        try {
            return copies.put(keys, parts, config, upsert);
        } finally {
            exit();
        }
    }

    /**
     * {@return the object's bytes; empty when it is missing or cannot be read (as the binding's
     * {@code get}): use {@link #getValue} to tell a miss from a failure}
     *
     * @param key the object's key
     */
    public byte[] get(String key) {
        Result<byte[]> r = getValue(key);
        return r.ok() ? r.value() : new byte[0];
    }

    /**
     * Gets a copy of the object's bytes.
     *
     * @param key the object's key
     * @return the bytes; or a miss ({@link Result#missing()}: {@link ErrorCode#OBJECT_NOT_FOUND}); or the
     *         failure's code ({@link ErrorCode#RPC_FAIL}, {@link ErrorCode#RPC_TIMEOUT},
     *         {@link ErrorCode#TRANSFER_FAIL}, {@link ErrorCode#LEASE_EXPIRED},
     *         {@link ErrorCode#REPLICA_IS_NOT_READY}, ...)
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} when the client is closed
     */
    public Result<byte[]> getValue(String key) {
        return batchGetValue(List.of(Args.key(key))).getFirst();
    }

    /**
     * Gets copies of the objects' bytes, with one BatchGetReplicaList.
     *
     * @param keys the objects' keys
     * @return per key as {@link #getValue}
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} for a null key or a closed client
     */
    @SuppressWarnings("unchecked")
    public List<Result<byte[]>> batchGetValue(List<String> keys) {
        Args.keys(keys);
        enter();
        try {
            return (List<Result<byte[]>>) (List<?>) copies.get(keys, false, calls::enterAnyway, this::exit);
        } finally {
            exit();
        }
    }

    /**
     * {@return per key the object's bytes, or empty bytes for a miss or a failure (Mooncake's
     * {@code get_batch}): use {@link #batchGetValue} to tell them apart}
     *
     * @param keys the objects' keys
     */
    public List<byte[]> getBatch(List<String> keys) {
        List<byte[]> out = new ArrayList<>(keys == null ? 0 : keys.size());
        for (Result<byte[]> r : batchGetValue(keys)) {
            out.add(r.ok() ? r.value() : new byte[0]);
        }
        return out;
    }

    /**
     * Reads the object into registered staging memory without a heap copy (Mooncake's {@code get_buffer}).
     *
     * @param key the object's key
     * @return the buffer (close it), a miss ({@link Result#missing()}), or the failure's code
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} for a null key or a closed client
     */
    public Result<StoreBuffer> getBuffer(String key) {
        return batchGetBuffer(List.of(Args.key(key))).getFirst();
    }

    /**
     * Reads the objects into registered staging memory, with one BatchGetReplicaList (Mooncake's
     * {@code batch_get_buffer}).
     *
     * @param keys the objects' keys
     * @return per key as {@link #getBuffer}; close every buffer
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} for a null key or a closed client
     */
    @SuppressWarnings("unchecked")
    public List<Result<StoreBuffer>> batchGetBuffer(List<String> keys) {
        Args.keys(keys);
        enter();
        try {
            return (List<Result<StoreBuffer>>) (List<?>) copies.get(keys, true, calls::enterAnyway, this::exit);
        } finally {
            exit();
        }
    }

    /**
     * Reads byte ranges of objects into buffers (Mooncake's {@code get_into_ranges}): for buffer
     * {@code b}, key {@code k} of {@code keys.get(b)}, range {@code r}: the object's bytes
     * {@code [srcOffsets[b][k][r], +sizes[b][k][r])} go to {@code buffers[b] + dstOffsets[b][k][r]}.
     * Every key of every buffer is looked up in one BatchGetReplicaList and read in one data path call.
     *
     * @param buffers    the destination buffers' start addresses, in registered memory
     * @param keys       per buffer, the keys to read
     * @param dstOffsets per buffer, per key, each range's offset in the buffer
     * @param srcOffsets per buffer, per key, each range's offset in the object
     * @param sizes      per buffer, per key, each range's length
     * @return per buffer, per key, per range the bytes read, or the key's negative code (a range
     *         outside the object: INVALID_PARAMS)
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if the arrays do not match each other
     */
    public long[][][] getIntoRanges(long[] buffers, List<List<String>> keys, long[][][] dstOffsets, long[][][] srcOffsets,
            long[][][] sizes) {
        Ranges r = Ranges.of(buffers, keys, dstOffsets, srcOffsets, sizes);
        enter();
        try {
            return r.results(data.get(r.keys(), r.local(), r.lengths(), r.sources(), null, 0));
        } finally {
            exit();
        }
    }

    /** Enters a call that uses this client's memory or engine; close() waits for it. */
    private void enter() {
        if (!calls.enter(() -> closed)) {
            throw new StoreException(ErrorCode.INVALID_PARAMS.code(), "store client is closed", null);
        }
    }

    private void exit() {
        calls.exit();
    }

    private boolean drained(long nanos) {
        return calls.awaitZero(nanos);
    }

    /** {@return calls in flight now (puts, gets; close waits for them)} */
    public int callsInFlight() {
        return calls.get();
    }

    /** The longest close waits for calls in flight, at each of its steps (the call deadline if shorter). */
    public static final Duration CLOSE_GRACE = Duration.ofSeconds(2);

    /**
     * Closes the client; idempotent. New calls are refused ({@link ErrorCode#INVALID_PARAMS}) from the
     * start and the liveness loop stops. Calls in flight are waited for, up to {@link #CLOSE_GRACE} (or
     * the call deadline, if shorter); calls still waiting for the master then have their master calls
     * failed (the connection is dropped: RPC_FAIL) and are waited for again. Then the segments are
     * unmounted (best effort, each within the call deadline), the master connection and (when owned)
     * the engine closed, and the memory freed. Should a call still be inside a transfer after that,
     * the memory is not freed (an error is logged): leaked memory, never freed memory in use.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        liveness.shutdownNow();
        long grace = Math.min(config.rpcTimeout().toNanos(), CLOSE_GRACE.toNanos());
        boolean drained = drained(grace);
        if (!drained) {
            LOG.warn("closing store client {}: {} call(s) still in flight after {} ms; failing their master calls",
                    hostname, calls.get(), TimeUnit.NANOSECONDS.toMillis(grace));
            master.rpc().disconnect();
            drained = drained(grace);
        }
        List<Segment> mounted = new ArrayList<>(segments);
        segments.clear();
        for (Segment s : mounted) {
            try {
                Result<Void> r = master.unmountSegment(s.id(), clientId);
                if (!r.ok()) {
                    LOG.debug("UnmountSegment {} answered {}", s.id(), r);
                }
            } catch (StoreException e) {
                LOG.debug("UnmountSegment {} failed: {}", s.id(), e.getMessage());
            }
        }
        master.close();
        for (Segment s : mounted) {
            engine.unregisterMemory(s.base());
        }
        if (metadata != null) {
            try {
                metadata.withdraw(hostname, endpoint);
            } catch (MetadataException e) {
                LOG.warn("cannot withdraw segment {} from {}: {}", hostname, metadata.store(), e.getMessage());
            }
            metadata.store().close();
        }
        if (stagingBase != 0) {
            engine.unregisterMemory(stagingBase);
        }
        if (ownsEngine) {
            engine.close();
        }
        if (drained || drained(grace)) {
            arena.close();
        } else {
            LOG.error("closing store client {}: {} call(s) still inside a transfer; its segment and staging memory"
                    + " are left allocated rather than freed under them", hostname, calls.get());
        }
    }
}
