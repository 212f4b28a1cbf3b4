package io.mooncake4j.store;

import io.mooncake4j.store.MasterCodec.Rpc;
import io.mooncake4j.store.wire.CoroRpcClient;
import io.mooncake4j.store.wire.CoroRpcException;
import io.mooncake4j.store.wire.StructPack;
import io.mooncake4j.store.wire.StructPackException;
import io.mooncake4j.store.wire.StructPackReader;
import io.mooncake4j.store.wire.StructPackWriter;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Typed calls of {@code mooncake_master}'s RPC service ({@code mooncake::WrappedMasterService}),
 * one method per RPC, with every parameter the C++ signature has (defaults included: coro_rpc packs
 * the whole parameter list).
 *
 * <p>Errors: a {@code tl::expected} answer is a {@link Result} (per key for the batch RPCs), whose
 * code is the master's; a call as a whole that fails throws {@link StoreException}, and nothing else:
 * {@link ErrorCode#RPC_TIMEOUT} when no answer came within the deadline, {@link ErrorCode#RPC_FAIL} when
 * the master could not be reached, closed the connection, or answered something undecodable, and
 * {@link ErrorCode#INVALID_PARAMS}, naming the argument, for a wrong argument (nothing is sent then).
 * The {@code *Async} forms pipeline on the one connection and complete exceptionally with the same
 * {@link StoreException}s; the others wait for the answer. Thread-safe.
 */
public final class MasterClient implements AutoCloseable {

    private final CoroRpcClient rpc;
    private final Duration timeout;
    private final String tenant;

    /**
     * A client of the master at {@code address}.
     *
     * @param address the master's RPC address ({@code --rpc_address}:{@code --rpc_port})
     * @param timeout the deadline of each call
     * @param tenant  the tenant id sent with key operations ({@code "default"})
     */
    public MasterClient(InetSocketAddress address, Duration timeout, String tenant) {
        this(new CoroRpcClient(Args.notNull(address, "address"), CoroRpcClient.Options.defaults()), timeout, tenant);
    }

    /** A client over an existing coro_rpc client (it is closed with this one). */
    MasterClient(CoroRpcClient rpc, Duration timeout, String tenant) {
        this.rpc = Objects.requireNonNull(rpc, "rpc");
        this.timeout = Args.notNull(timeout, "timeout");
        this.tenant = Args.notNull(tenant, "tenant");
        if (timeout.isNegative() || timeout.isZero()) {
            throw Args.invalid("timeout must be positive, got %s", timeout);
        }
    }

    /** {@return connections opened to the master so far (the first, then one per reconnect)} */
    public long connects() {
        return rpc.connects();
    }

    /** {@return calls that ended at their deadline without an answer} */
    public long timeouts() {
        return rpc.timeouts();
    }

    /** {@return the coro_rpc client underneath (counters, fault injection)} */
    CoroRpcClient rpc() {
        return rpc;
    }

    /** {@return the master's address, "host:port"} */
    public String address() {
        return rpc.address().getHostString() + ":" + rpc.address().getPort();
    }

    /**
     * Parses {@code "host:port"}.
     *
     * @param hostPort the master address as users write it ({@code master_server_address})
     * @return the socket address
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} when it is not {@code host:port}
     */
    public static InetSocketAddress parseAddress(String hostPort) {
        Args.notNull(hostPort, "master address");
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0 || colon == hostPort.length() - 1) {
            throw Args.invalid("master address must be host:port, got '%s'", hostPort);
        }
        String host = hostPort.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(hostPort.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw Args.invalid("master address must be host:port, got '%s'", hostPort);
        }
        if (port < 1 || port > 65535) {
            throw Args.invalid("master port must be 1-65535, got %d", port);
        }
        return new InetSocketAddress(host, port);
    }

    static byte[] body(Rpc r, Consumer<StructPackWriter> args) {
        return r.args() == null ? new byte[0] : StructPack.encode(r.args(), args);
    }

    private <T> CompletableFuture<T> invoke(Rpc r, Consumer<StructPackWriter> args, Function<StructPackReader, T> result) {
        byte[] body;
        try {
            body = body(r, args);
        } catch (StructPackException e) {
            // a string or list longer than the wire can carry
            return CompletableFuture.failedFuture(new StoreException(ErrorCode.INVALID_PARAMS.code(),
                    r.name() + ": " + e.getMessage(), e));
        }
        return rpc.call(r.id(), body, timeout).handle((bytes, err) -> {
            if (err != null) {
                throw toStore(r, err);
            }
            try {
                return StructPack.decode(bytes, r.result(), result);
            } catch (RuntimeException e) {
                // StructPackException, or a value the types refuse (an error code 0 in an expected<>)
                throw new StoreException(ErrorCode.RPC_FAIL.code(), String.format(Locale.ROOT,
                        "undecodable answer of %s to %s: %s", address(), r.name(), e.getMessage()), e);
            }
        });
    }

    private StoreException toStore(Rpc r, Throwable err) {
        Throwable e = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
        if (e instanceof StoreException se) {
            return se;
        }
        int code = e instanceof CoroRpcException c && c.kind() == CoroRpcException.Kind.TIMEOUT
                ? ErrorCode.RPC_TIMEOUT.code() : ErrorCode.RPC_FAIL.code();
        return new StoreException(code, r.name() + ": " + e.getMessage(), e);
    }

    private static <T> T await(CompletableFuture<T> f) {
        try {
            return f.join();
        } catch (CompletionException | java.util.concurrent.CancellationException e) {
            if (e.getCause() instanceof StoreException se) {
                // a new exception, so that the stack shows the caller
                throw new StoreException(se.errorCode(), se.getMessage(), se);
            }
            throw new StoreException(ErrorCode.RPC_FAIL.code(), "master call failed: " + e, e);
        }
    }

    // ------------------------------------------------------------------ liveness and segments

    /** {@return ServiceReady: the master's version string when it serves} */
    public Result<String> serviceReady() {
        return await(invoke(MasterCodec.SERVICE_READY, w -> { }, r -> MasterCodec.expected(r, StructPackReader::string)));
    }

    /**
     * {@return Ping: this client's status at the master (NEED_REMOUNT until ReMountSegment)}
     *
     * @param clientId this client's id
     */
    public Result<PingResult> ping(Uuid clientId) {
        return await(pingAsync(clientId));
    }

    /**
     * {@return the asynchronous form of {@link #ping}}
     *
     * @param clientId this client's id
     */
    public CompletableFuture<Result<PingResult>> pingAsync(Uuid clientId) {
        Args.notNull(clientId, "clientId");
        return invoke(MasterCodec.PING, w -> MasterCodec.uuid(w, clientId), r -> MasterCodec.expected(r, MasterCodec::ping));
    }

    /**
     * {@return MountSegment of {@code segment} owned by {@code clientId}}
     *
     * @param segment  the segment to mount
     * @param clientId its owner's id
     */
    public Result<Void> mountSegment(Segment segment, Uuid clientId) {
        Args.notNull(segment, "segment");
        Args.notNull(clientId, "clientId");
        return await(invoke(MasterCodec.MOUNT_SEGMENT, w -> {
            MasterCodec.segment(w, segment);
            MasterCodec.uuid(w, clientId);
        }, MasterCodec::expectedVoid));
    }

    /**
     * {@return ReMountSegment of all of a client's segments (after a mount, and on NEED_REMOUNT)}
     *
     * @param segments every segment the client has mounted
     * @param clientId their owner's id
     */
    public Result<Void> reMountSegment(List<Segment> segments, Uuid clientId) {
        Args.notNull(segments, "segments").forEach(x -> Args.notNull(x, "segment"));
        Args.notNull(clientId, "clientId");
        return await(invoke(MasterCodec.REMOUNT_SEGMENT, w -> {
            w.length(segments.size());
            segments.forEach(s -> MasterCodec.segment(w, s));
            MasterCodec.uuid(w, clientId);
        }, MasterCodec::expectedVoid));
    }

    /**
     * {@return UnmountSegment}
     *
     * @param segmentId the segment's id
     * @param clientId  its owner's id
     */
    public Result<Void> unmountSegment(Uuid segmentId, Uuid clientId) {
        Args.notNull(segmentId, "segmentId");
        Args.notNull(clientId, "clientId");
        return await(invoke(MasterCodec.UNMOUNT_SEGMENT, w -> {
            MasterCodec.uuid(w, segmentId);
            MasterCodec.uuid(w, clientId);
        }, MasterCodec::expectedVoid));
    }

    // ------------------------------------------------------------------ puts

    /**
     * {@return PutStart: space for {@code length} bytes, one descriptor per replica (PROCESSING)}
     *
     * @param clientId the writer's id
     * @param key      the object's key
     * @param length   the object's size in bytes
     * @param config   the placement
     */
    public Result<List<ReplicaDescriptor>> putStart(Uuid clientId, String key, long length, ReplicateConfig config) {
        return start(MasterCodec.PUT_START, clientId, key, length, config);
    }

    /**
     * {@return PutEnd: the object becomes readable}
     *
     * @param clientId the writer's id
     * @param key      the object's key
     * @param checksum the object's checksum to record, or null for none
     */
    public Result<Void> putEnd(Uuid clientId, String key, Long checksum) {
        return end(MasterCodec.PUT_END, clientId, key, checksum);
    }

    /**
     * {@return PutRevoke: give the space of an unfinished put back}
     *
     * @param clientId the writer's id
     * @param key      the object's key
     */
    public Result<Void> putRevoke(Uuid clientId, String key) {
        return revoke(MasterCodec.PUT_REVOKE, clientId, key);
    }

    /**
     * {@return BatchPutStart: one result per key}
     *
     * @param clientId the writer's id
     * @param keys     the objects' keys
     * @param lengths  each object's size in bytes, one per key
     * @param config   the placement of every key
     * @throws StoreException {@link ErrorCode#INVALID_PARAMS} if {@code lengths} and {@code keys} differ in length
     */
    public List<Result<List<ReplicaDescriptor>>> batchPutStart(Uuid clientId, List<String> keys, long[] lengths,
            ReplicateConfig config) {
        return batchStart(MasterCodec.BATCH_PUT_START, clientId, keys, lengths, config);
    }

    /**
     * {@return BatchPutEnd: one result per key}
     *
     * @param clientId the writer's id
     * @param keys     the objects' keys (no checksums sent)
     */
    public List<Result<Void>> batchPutEnd(Uuid clientId, List<String> keys) {
        Args.notNull(clientId, "clientId");
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_PUT_END, w -> {
            MasterCodec.uuid(w, clientId);
            w.length(keys.size());
            keys.forEach(k -> MasterCodec.objectMeta(w, k, null));
            w.i32(MasterCodec.REPLICA_TYPE_ALL).string(tenant);
        }, r -> MasterCodec.list(r, 1, MasterCodec::expectedVoid)));
    }

    /**
     * {@return BatchPutRevoke: one result per key}
     *
     * @param clientId the writer's id
     * @param keys     the objects' keys
     */
    public List<Result<Void>> batchPutRevoke(Uuid clientId, List<String> keys) {
        Args.notNull(clientId, "clientId");
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_PUT_REVOKE, w -> {
            MasterCodec.uuid(w, clientId);
            MasterCodec.strings(w, keys);
            w.i32(MasterCodec.REPLICA_TYPE_ALL).string(tenant);
        }, r -> MasterCodec.list(r, 1, MasterCodec::expectedVoid)));
    }

    // ------------------------------------------------------------------ upserts (the overwrite path)

    /**
     * {@return UpsertStart: like PutStart, but an existing complete object is replaced (Mooncake reuses
     * its buffers when the size is the same); OBJECT_HAS_LEASE or OBJECT_REPLICA_BUSY while it is read}
     *
     * @param clientId the writer's id
     * @param key      the object's key
     * @param length   the object's size in bytes
     * @param config   the placement
     */
    public Result<List<ReplicaDescriptor>> upsertStart(Uuid clientId, String key, long length, ReplicateConfig config) {
        return start(MasterCodec.UPSERT_START, clientId, key, length, config);
    }

    /**
     * {@return UpsertEnd: the new value becomes readable}
     *
     * @param clientId the writer's id
     * @param key      the object's key
     */
    public Result<Void> upsertEnd(Uuid clientId, String key) {
        return end(MasterCodec.UPSERT_END, clientId, key, null);
    }

    /**
     * {@return UpsertRevoke: give up an unfinished upsert}
     *
     * @param clientId the writer's id
     * @param key      the object's key
     */
    public Result<Void> upsertRevoke(Uuid clientId, String key) {
        return revoke(MasterCodec.UPSERT_REVOKE, clientId, key);
    }

    /**
     * {@return BatchUpsertStart: one result per key}
     *
     * @param clientId the writer's id
     * @param keys     the objects' keys
     * @param lengths  each object's size in bytes, one per key
     * @param config   the placement of every key
     */
    public List<Result<List<ReplicaDescriptor>>> batchUpsertStart(Uuid clientId, List<String> keys, long[] lengths,
            ReplicateConfig config) {
        return batchStart(MasterCodec.BATCH_UPSERT_START, clientId, keys, lengths, config);
    }

    /**
     * {@return BatchUpsertEnd: one result per key}
     *
     * @param clientId the writer's id
     * @param keys     the objects' keys
     */
    public List<Result<Void>> batchUpsertEnd(Uuid clientId, List<String> keys) {
        Args.notNull(clientId, "clientId");
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_UPSERT_END, w -> {
            MasterCodec.uuid(w, clientId);
            w.length(keys.size());
            keys.forEach(k -> MasterCodec.objectMeta(w, k, null));
            w.string(tenant);
        }, r -> MasterCodec.list(r, 1, MasterCodec::expectedVoid)));
    }

    /**
     * {@return BatchUpsertRevoke: one result per key}
     *
     * @param clientId the writer's id
     * @param keys     the objects' keys
     */
    public List<Result<Void>> batchUpsertRevoke(Uuid clientId, List<String> keys) {
        Args.notNull(clientId, "clientId");
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_UPSERT_REVOKE, w -> {
            MasterCodec.uuid(w, clientId);
            MasterCodec.strings(w, keys);
            w.string(tenant);
        }, r -> MasterCodec.list(r, 1, MasterCodec::expectedVoid)));
    }

    // ------------------------------------------------------------------ what put and upsert share

    /** PutStart and UpsertStart: the same arguments and answer, another RPC. */
    private Result<List<ReplicaDescriptor>> start(Rpc rpc, Uuid clientId, String key, long length,
            ReplicateConfig config) {
        Args.notNull(clientId, "clientId");
        Args.key(key);
        Args.notNull(config, "config");
        return await(invoke(rpc, w -> {
            MasterCodec.uuid(w, clientId);
            w.string(key).i64(length);
            MasterCodec.replicateConfig(w, config);
            w.string(tenant);
        }, r -> MasterCodec.expected(r, MasterCodec::replicas)));
    }

    /** PutEnd and UpsertEnd (the upsert records no checksum). */
    private Result<Void> end(Rpc rpc, Uuid clientId, String key, Long checksum) {
        Args.notNull(clientId, "clientId");
        Args.key(key);
        return await(invoke(rpc, w -> {
            MasterCodec.uuid(w, clientId);
            MasterCodec.objectMeta(w, key, checksum);
            w.i32(MasterCodec.REPLICA_TYPE_ALL).string(tenant);
        }, MasterCodec::expectedVoid));
    }

    /** PutRevoke and UpsertRevoke. */
    private Result<Void> revoke(Rpc rpc, Uuid clientId, String key) {
        Args.notNull(clientId, "clientId");
        Args.key(key);
        return await(invoke(rpc, w -> {
            MasterCodec.uuid(w, clientId);
            w.string(key).i32(MasterCodec.REPLICA_TYPE_ALL).string(tenant);
        }, MasterCodec::expectedVoid));
    }

    /** BatchPutStart and BatchUpsertStart. */
    private List<Result<List<ReplicaDescriptor>>> batchStart(Rpc rpc, Uuid clientId, List<String> keys,
            long[] lengths, ReplicateConfig config) {
        Args.notNull(clientId, "clientId");
        Args.keys(keys);
        Args.perKey(keys, "lengths", lengths, lengths == null ? 0 : lengths.length);
        Args.notNull(config, "config");
        return await(invoke(rpc, w -> {
            MasterCodec.uuid(w, clientId);
            MasterCodec.strings(w, keys);
            w.length(lengths.length);
            for (long l : lengths) {
                w.i64(l);
            }
            MasterCodec.replicateConfig(w, config);
            w.string(tenant);
        }, r -> MasterCodec.list(r, 1, x -> MasterCodec.expected(x, MasterCodec::replicas))));
    }

    // ------------------------------------------------------------------ reads and queries

    /**
     * {@return GetReplicaList (grants a read lease)}
     *
     * @param key the object's key
     */
    public Result<ReplicaList> getReplicaList(String key) {
        Args.key(key);
        return await(invoke(MasterCodec.GET_REPLICA_LIST, w -> w.string(key).string(tenant),
                r -> MasterCodec.expected(r, MasterCodec::replicaList)));
    }

    /**
     * {@return BatchGetReplicaList: one result per key}
     *
     * @param keys the objects' keys
     */
    public List<Result<ReplicaList>> batchGetReplicaList(List<String> keys) {
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_GET_REPLICA_LIST, w -> {
            MasterCodec.strings(w, keys);
            w.string(tenant);
        }, r -> MasterCodec.list(r, 1, x -> MasterCodec.expected(x, MasterCodec::replicaList))));
    }

    /**
     * {@return ExistKey}
     *
     * @param key the object's key
     */
    public Result<Boolean> existKey(String key) {
        Args.key(key);
        return await(invoke(MasterCodec.EXIST_KEY, w -> w.string(key).string(tenant),
                r -> MasterCodec.expected(r, StructPackReader::bool)));
    }

    /**
     * {@return BatchExistKey: one result per key, in one RPC}
     *
     * @param keys the objects' keys
     */
    public List<Result<Boolean>> batchExistKey(List<String> keys) {
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_EXIST_KEY, w -> {
            MasterCodec.strings(w, keys);
            w.string(tenant);
        }, r -> MasterCodec.list(r, 1, x -> MasterCodec.expected(x, StructPackReader::bool))));
    }

    /**
     * {@return Remove (without {@code force} it fails with OBJECT_HAS_LEASE while a lease is held)}
     *
     * @param key   the object's key
     * @param force remove even while a lease is held
     */
    public Result<Void> remove(String key, boolean force) {
        Args.key(key);
        return await(invoke(MasterCodec.REMOVE, w -> w.string(key).bool(force).string(tenant), MasterCodec::expectedVoid));
    }

    /**
     * {@return BatchRemove: one result per key}
     *
     * @param keys  the objects' keys
     * @param force remove even while a lease is held
     */
    public List<Result<Void>> batchRemove(List<String> keys, boolean force) {
        Args.keys(keys);
        return await(invoke(MasterCodec.BATCH_REMOVE, w -> {
            MasterCodec.strings(w, keys);
            w.bool(force).string(tenant);
        }, r -> MasterCodec.list(r, 1, MasterCodec::expectedVoid)));
    }

    /**
     * {@return RemoveByRegex: the number of objects whose keys match {@code regex} (ECMAScript syntax, as
     * the master's {@code std::regex}) that were removed}
     *
     * @param regex the pattern
     * @param force remove leased objects too
     */
    public Result<Long> removeByRegex(String regex, boolean force) {
        Args.notNull(regex, "regex");
        return await(invoke(MasterCodec.REMOVE_BY_REGEX, w -> w.string(regex).bool(force).string(tenant),
                r -> MasterCodec.expected(r, StructPackReader::i64)));
    }

    /**
     * {@return RemoveAll: the number of objects removed}
     *
     * @param force remove leased objects too
     */
    public long removeAll(boolean force) {
        return await(invoke(MasterCodec.REMOVE_ALL, w -> w.bool(force).string(tenant), StructPackReader::i64));
    }

    @Override
    public void close() {
        rpc.close();
    }
}
