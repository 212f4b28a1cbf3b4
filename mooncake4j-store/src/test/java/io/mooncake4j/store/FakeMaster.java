package io.mooncake4j.store;

import io.mooncake4j.store.MasterCodec.Rpc;
import io.mooncake4j.store.wire.SpType;
import io.mooncake4j.store.wire.StructPack;
import io.mooncake4j.store.wire.StructPackException;
import io.mooncake4j.store.wire.StructPackReader;
import io.mooncake4j.store.wire.StructPackWriter;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * An in-memory {@code mooncake_master} on a loopback port for tests: it speaks the real wire
 * (coro_rpc frames with struct_pack bodies, decoded with the client's own types) through a real
 * socket, and keeps the master's state: clients and their segments (MountSegment, ReMountSegment,
 * UnmountSegment), objects whose replicas are placed in mounted segments (PutStart/End/Revoke and
 * the batch forms, Upsert*), reads that grant leases (GetReplicaList), ExistKey, Remove, RemoveAll,
 * RemoveByRegex, and liveness (Ping answers NEED_REMOUNT for a client it does not know; a client
 * silent for longer than the client TTL is expired with its segments and the objects in them).
 * Values live in the segment owners' memory, as with the real master: the fake only hands out
 * addresses.
 *
 * <p>Fault hooks: {@link #silent} (read requests, answer nothing, keep the connection), {@link #fault}
 * (answer chosen requests with any bytes: malformed bodies, error frames, a close), {@link #failKey}
 * (a per-key error code in every key operation), {@link #expireClient} and {@link #restart}.
 *
 * <p>The scripted form ({@link #FakeMaster(Script)}) answers every request with the script's bytes,
 * for the wire-level bad-reply tests. Public, and shipped in this module's test-jar, for other
 * modules' tests. Thread-safe; one thread per connection.
 */
public final class FakeMaster implements AutoCloseable {

    /** One request as received. */
    public record Request(int seq, int functionId, byte[] body, int connection) {

        /** {@return the RPC's name, or null for a function the fake does not know} */
        public String rpcName() {
            Rpc r = RPCS.get(functionId);
            return r == null ? null : r.name();
        }
    }

    /** What to write for a request: raw bytes (possibly several frames, possibly garbage); null closes. */
    public interface Script {
        /**
         * {@return the bytes to write, or null to close the connection}
         *
         * @param r the request
         * @throws IOException to close the connection
         */
        byte[] answer(Request r) throws IOException;
    }

    /**
     * A fault injected in front of the functional master: return null to let the master answer,
     * {@link #NO_ANSWER} to answer nothing, {@link #CLOSE} to close the connection, or any bytes to
     * write instead of the answer.
     */
    public interface Fault {
        /**
         * {@return the bytes to write instead, or null for the normal answer}
         *
         * @param r the request
         */
        byte[] intercept(Request r);
    }

    /** A {@link Fault}'s answer: write nothing for this request. */
    public static final byte[] NO_ANSWER = new byte[0];
    /** A {@link Fault}'s answer: close this connection. */
    public static final byte[] CLOSE = new byte[0];

    /** Every RPC the fake serves, by function id. */
    static final Map<Integer, Rpc> RPCS = new HashMap<>();

    static {
        for (Rpc r : MasterCodec.ALL) {
            RPCS.put(r.id(), r);
        }
        for (Rpc r : MasterCodec.EXTRA) {
            RPCS.put(r.id(), r);
        }
    }

    private final ServerSocket server;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final AtomicInteger connections = new AtomicInteger();
    private final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
    private volatile Script script;
    private volatile Fault fault;
    private volatile boolean silent;
    private final Map<String, Integer> keyErrors = new ConcurrentHashMap<>();

    // ------------------------------------------------------------------ master state (guarded by this)
    private final Map<Uuid, Client> clients = new HashMap<>();
    private final Map<Uuid, Seg> segs = new LinkedHashMap<>();
    private final Map<String, Obj> objects = new LinkedHashMap<>();
    private final Random random;
    private long nextReplicaId = 1;
    private long viewVersion = 1;
    private volatile long leaseTtlMs = 10_000;
    private volatile long clientTtlNanos = Duration.ofSeconds(10).toNanos();
    private volatile String version = "0.3.7-fake";

    private static final class Client {
        long lastSeen;
        final List<Uuid> segments = new ArrayList<>();

        Client(long now) {
            lastSeen = now;
        }
    }

    /** A mounted segment: first-fit over free ranges of [0, size). */
    private static final class Seg {
        final Segment segment;
        final Uuid owner;
        final java.util.TreeMap<Long, Long> free = new java.util.TreeMap<>();
        long used;

        Seg(Segment segment, Uuid owner) {
            this.segment = segment;
            this.owner = owner;
            free.put(0L, segment.size());
        }

        long allocate(long n) {
            long need = (n + 63) & ~63L;
            for (Map.Entry<Long, Long> e : free.entrySet()) {
                if (e.getValue() >= need) {
                    long off = e.getKey();
                    free.remove(off);
                    if (e.getValue() > need) {
                        free.put(off + need, e.getValue() - need);
                    }
                    used += need;
                    return off;
                }
            }
            return -1;
        }

        void release(long off, long n) {
            long len = (n + 63) & ~63L;
            used -= len;
            Map.Entry<Long, Long> after = free.ceilingEntry(off);
            if (after != null && off + len == after.getKey()) {
                free.remove(after.getKey());
                len += after.getValue();
            }
            Map.Entry<Long, Long> before = free.floorEntry(off);
            if (before != null && before.getKey() + before.getValue() == off) {
                off = before.getKey();
                len += before.getValue();
            }
            free.put(off, len);
        }
    }

    private record Alloc(Seg seg, long offset, long size, long id) {}

    private static final class Obj {
        final Uuid writer;
        final long size;
        final List<Alloc> replicas;
        boolean complete;
        long leaseUntil;
        Long checksum;

        Obj(Uuid writer, long size, List<Alloc> replicas) {
            this.writer = writer;
            this.size = size;
            this.replicas = replicas;
        }
    }

    // ------------------------------------------------------------------ construction

    /**
     * A functional master on a loopback port (random placement seeded with 1).
     *
     * @throws IOException when no port can be bound
     */
    public FakeMaster() throws IOException {
        this(null);
    }

    /**
     * A scripted server: every request is answered with the script's bytes.
     *
     * @param script the answers, or null for the functional master
     * @throws IOException when no port can be bound
     */
    public FakeMaster(Script script) throws IOException {
        this.random = new Random(1);
        this.script = script;
        server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::acceptLoop, "fake-master");
        t.setDaemon(true);
        t.start();
    }

    /**
     * Replaces the script (null: the functional master answers).
     *
     * @param s the script
     */
    public void script(Script s) {
        script = s;
    }

    /** {@return the RPC address} */
    public InetSocketAddress address() {
        return new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
    }

    /** {@return the RPC address as "host:port"} */
    public String hostPort() {
        return address().getHostString() + ":" + address().getPort();
    }

    /** {@return connections accepted so far} */
    public int connections() {
        return connections.get();
    }

    /**
     * {@return how many requests of an RPC arrived (answered or not)}
     *
     * @param rpcName the RPC's name, e.g. "PutStart"
     */
    public int calls(String rpcName) {
        AtomicInteger n = calls.get(rpcName);
        return n == null ? 0 : n.get();
    }

    // ------------------------------------------------------------------ settings and fault hooks

    /**
     * Sets the read lease GetReplicaList grants ({@code --default_kv_lease_ttl}; 10 s).
     *
     * @param ttl the lease
     * @return this
     */
    public FakeMaster leaseTtl(Duration ttl) {
        leaseTtlMs = ttl.toMillis();
        return this;
    }

    /**
     * Sets how long a client may stay silent before it is expired ({@code --client_ttl}; 10 s).
     *
     * @param ttl the client TTL
     * @return this
     */
    public FakeMaster clientTtl(Duration ttl) {
        clientTtlNanos = ttl.toNanos();
        return this;
    }

    /**
     * While true the master reads requests and answers none; connections stay open.
     *
     * @param on whether to go silent
     */
    public void silent(boolean on) {
        silent = on;
    }

    /**
     * Installs a fault in front of the master (null removes it).
     *
     * @param f the fault
     */
    public void fault(Fault f) {
        fault = f;
    }

    /**
     * Makes every key operation on {@code key} answer {@code code} for that key (0 clears).
     *
     * @param key  the key
     * @param code the error code
     */
    public void failKey(String key, ErrorCode code) {
        if (code == ErrorCode.OK) {
            keyErrors.remove(key);
        } else {
            keyErrors.put(key, code.code());
        }
    }

    /**
     * Expires a client now, as its TTL running out would: its segments are unmounted and the
     * objects with replicas in them dropped; its next Ping is answered NEED_REMOUNT.
     *
     * @param id the client
     * @return whether the master knew the client
     */
    public synchronized boolean expireClient(Uuid id) {
        return expire(id);
    }

    /** Forgets everything, as a restarted master: clients, segments, objects; a new view version. */
    public synchronized void restart() {
        clients.clear();
        segs.clear();
        objects.clear();
        viewVersion++;
    }

    // ------------------------------------------------------------------ observation

    /** {@return the keys of complete objects, in put order} */
    public synchronized List<String> keys() {
        List<String> out = new ArrayList<>();
        objects.forEach((k, o) -> {
            if (o.complete) {
                out.add(k);
            }
        });
        return out;
    }

    /**
     * {@return whether the master holds a complete object under {@code key}}
     *
     * @param key the key
     */
    public synchronized boolean holds(String key) {
        Obj o = objects.get(key);
        return o != null && o.complete;
    }

    /**
     * {@return the names of the segments holding {@code key}'s replicas (empty if none)}
     *
     * @param key the key
     */
    public synchronized List<String> placement(String key) {
        Obj o = objects.get(key);
        List<String> out = new ArrayList<>();
        if (o != null) {
            o.replicas.forEach(a -> out.add(a.seg.segment.name()));
        }
        return out;
    }

    /** {@return the mounted segments} */
    public synchronized List<Segment> mounted() {
        List<Segment> out = new ArrayList<>();
        segs.values().forEach(s -> out.add(s.segment));
        return out;
    }

    /**
     * {@return whether the master counts {@code id} as a live client}
     *
     * @param id the client
     */
    public synchronized boolean knows(Uuid id) {
        return clients.containsKey(id);
    }

    // ------------------------------------------------------------------ serving

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                sockets.add(s);
                int id = connections.incrementAndGet();
                Thread t = new Thread(() -> serve(s, id), "fake-master-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s, int id) {
        try (s) {
            DataInputStream in = new DataInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            byte[] head = new byte[20];
            while (true) {
                in.readFully(head);
                int seq = le(head, 4);
                int fid = le(head, 8);
                int length = le(head, 12);
                if (length < 0 || length > (64 << 20)) {
                    return;
                }
                byte[] body = new byte[length];
                in.readFully(body);
                Request r = new Request(seq, fid, body, id);
                String name = r.rpcName();
                calls.computeIfAbsent(name == null ? "?" + fid : name, k -> new AtomicInteger()).incrementAndGet();
                byte[] answer;
                Script sc = script;
                if (sc != null) {
                    answer = sc.answer(r);
                    if (answer == null) {
                        return;
                    }
                } else {
                    if (silent) {
                        continue;
                    }
                    Fault f = fault;
                    answer = f == null ? null : f.intercept(r);
                    if (answer == CLOSE) {
                        return;
                    }
                    if (answer == NO_ANSWER) {
                        continue;
                    }
                    if (answer == null) {
                        answer = handle(r);
                    }
                    if (silent) {
                        continue;
                    }
                }
                out.write(answer);
                out.flush();
                if (CLOSE_AFTER.contains(answer)) {
                    return;
                }
            }
        } catch (IOException e) {
            // the client closed or the script ended the connection
        }
    }

    /** The functional master: decode, apply, encode; an undecodable request gets coro_rpc's error frame. */
    private byte[] handle(Request q) {
        Rpc rpc = RPCS.get(q.functionId());
        if (rpc == null) {
            return errorFrame(q.seq(), 2, "function not registered");
        }
        try {
            Consumer<StructPackWriter> body = rpc.args() == null ? apply(rpc, null) : StructPack.decode(q.body(), rpc.args(),
                    r -> apply(rpc, r));
            return reply(q.seq(), 0, StructPack.encode(rpc.result(), body));
        } catch (StructPackException e) {
            return errorFrame(q.seq(), 4, "invalid rpc arg: " + e.getMessage());
        }
    }

    private static byte[] errorFrame(int seq, int err, String message) {
        return reply(seq, err, StructPack.encode(SpType.STRING, w -> w.string(message)));
    }

    /** Reads the arguments, changes the state, and returns the writer of the answer's payload. */
    private synchronized Consumer<StructPackWriter> apply(Rpc rpc, StructPackReader r) {
        long now = System.nanoTime();
        expireSilentClients(now);
        switch (rpc.name()) {
            case "ServiceReady" -> {
                String v = version;
                return w -> w.bool(true).string(v);
            }
            case "Ping" -> {
                Uuid id = MasterCodec.uuid(r);
                Client c = clients.get(id);
                int status = c == null ? PingResult.NEED_REMOUNT : PingResult.OK;
                if (c != null) {
                    c.lastSeen = now;
                }
                long view = viewVersion;
                return w -> w.bool(true).i64(view).i32(status);
            }
            case "MountSegment" -> {
                Segment s = MasterCodec.segment(r);
                Uuid id = MasterCodec.uuid(r);
                return voidResult(mount(s, id, now, false));
            }
            case "ReMountSegment" -> {
                List<Segment> list = MasterCodec.list(r, 16, MasterCodec::segment);
                Uuid id = MasterCodec.uuid(r);
                int code = 0;
                clients.computeIfAbsent(id, k -> new Client(now)).lastSeen = now;
                for (Segment s : list) {
                    int c = mount(s, id, now, true);
                    code = code == 0 ? c : code;
                }
                return voidResult(code);
            }
            case "UnmountSegment" -> {
                Uuid seg = MasterCodec.uuid(r);
                Uuid id = MasterCodec.uuid(r);
                Seg s = segs.get(seg);
                if (s == null || !s.owner.equals(id)) {
                    return voidResult(ErrorCode.SEGMENT_NOT_FOUND.code());
                }
                unmount(s);
                return voidResult(0);
            }
            case "PutStart", "UpsertStart" -> {
                Uuid id = MasterCodec.uuid(r);
                String key = r.string();
                long len = r.i64();
                ReplicateConfig cfg = replicateConfig(r);
                r.string();
                Result<List<Alloc>> res = putStart(id, key, len, cfg, rpc.name().startsWith("Upsert"));
                return w -> writeExpected(w, res, a -> writeReplicas(w, a, false));
            }
            case "PutEnd", "UpsertEnd" -> {
                Uuid id = MasterCodec.uuid(r);
                String key = r.string();
                Long checksum = MasterCodec.optionalU64(r);
                r.i32();
                r.string();
                return voidResult(putEnd(id, key, checksum));
            }
            case "PutRevoke", "UpsertRevoke" -> {
                Uuid id = MasterCodec.uuid(r);
                String key = r.string();
                r.i32();
                r.string();
                return voidResult(putRevoke(id, key));
            }
            case "BatchPutStart", "BatchUpsertStart" -> {
                Uuid id = MasterCodec.uuid(r);
                List<String> keys = strings(r);
                List<Long> lens = MasterCodec.list(r, 8, StructPackReader::i64);
                ReplicateConfig cfg = replicateConfig(r);
                r.string();
                List<Result<List<Alloc>>> out = new ArrayList<>();
                for (int i = 0; i < keys.size(); i++) {
                    out.add(i < lens.size() ? putStart(id, keys.get(i), lens.get(i), cfg, rpc.name().contains("Upsert"))
                            : Result.error(ErrorCode.INVALID_PARAMS.code()));
                }
                return w -> {
                    w.length(out.size());
                    out.forEach(x -> writeExpected(w, x, a -> writeReplicas(w, a, false)));
                };
            }
            case "BatchPutEnd", "BatchUpsertEnd" -> {
                Uuid id = MasterCodec.uuid(r);
                List<Object[]> metas = MasterCodec.list(r, 2, x -> new Object[] {x.string(), MasterCodec.optionalU64(x)});
                if (rpc.name().startsWith("BatchPut")) {
                    r.i32();
                }
                r.string();
                List<Integer> out = new ArrayList<>();
                metas.forEach(m -> out.add(putEnd(id, (String) m[0], (Long) m[1])));
                return voidResults(out);
            }
            case "BatchPutRevoke", "BatchUpsertRevoke" -> {
                Uuid id = MasterCodec.uuid(r);
                List<String> keys = strings(r);
                if (rpc.name().startsWith("BatchPut")) {
                    r.i32();
                }
                r.string();
                List<Integer> out = new ArrayList<>();
                keys.forEach(k -> out.add(putRevoke(id, k)));
                return voidResults(out);
            }
            case "GetReplicaList" -> {
                String key = r.string();
                r.string();
                Result<Obj> o = read(key, now);
                long lease = leaseTtlMs;
                return w -> writeExpected(w, o, x -> writeReplicaList(w, x, lease));
            }
            case "BatchGetReplicaList" -> {
                List<String> keys = strings(r);
                r.string();
                List<Result<Obj>> out = new ArrayList<>();
                keys.forEach(k -> out.add(read(k, now)));
                long lease = leaseTtlMs;
                return w -> {
                    w.length(out.size());
                    out.forEach(x -> writeExpected(w, x, o -> writeReplicaList(w, o, lease)));
                };
            }
            case "ExistKey" -> {
                String key = r.string();
                r.string();
                Result<Boolean> e = exists(key);
                return w -> writeExpected(w, e, b -> w.bool(b));
            }
            case "BatchExistKey" -> {
                List<String> keys = strings(r);
                r.string();
                List<Result<Boolean>> out = new ArrayList<>();
                keys.forEach(k -> out.add(exists(k)));
                return w -> {
                    w.length(out.size());
                    out.forEach(x -> writeExpected(w, x, b -> w.bool(b)));
                };
            }
            case "Remove" -> {
                String key = r.string();
                boolean force = r.bool();
                r.string();
                return voidResult(remove(key, force, now));
            }
            case "BatchRemove" -> {
                List<String> keys = strings(r);
                boolean force = r.bool();
                r.string();
                List<Integer> out = new ArrayList<>();
                keys.forEach(k -> out.add(remove(k, force, now)));
                return voidResults(out);
            }
            case "RemoveAll" -> {
                boolean force = r.bool();
                r.string();
                long n = 0;
                for (String k : new ArrayList<>(objects.keySet())) {
                    Obj o = objects.get(k);
                    if (o.complete && (force || o.leaseUntil <= now)) {
                        drop(k);
                        n++;
                    }
                }
                long removed = n;
                return w -> w.i64(removed);
            }
            case "RemoveByRegex" -> {
                String regex = r.string();
                boolean force = r.bool();
                r.string();
                java.util.regex.Pattern p;
                try {
                    p = java.util.regex.Pattern.compile(regex);
                } catch (java.util.regex.PatternSyntaxException e) {
                    return w -> w.bool(false).i32(ErrorCode.INVALID_PARAMS.code());
                }
                long n = 0;
                for (String k : new ArrayList<>(objects.keySet())) {
                    Obj o = objects.get(k);
                    if (o.complete && p.matcher(k).find() && (force || o.leaseUntil <= now)) {
                        drop(k);
                        n++;
                    }
                }
                long removed = n;
                return w -> w.bool(true).i64(removed);
            }
            default -> throw new StructPackException("no handler for " + rpc.name());
        }
    }

    private static List<String> strings(StructPackReader r) {
        return MasterCodec.list(r, 1, StructPackReader::string);
    }

    private static ReplicateConfig replicateConfig(StructPackReader r) {
        long replicas = r.i64();
        long nof = r.i64();
        long dfs = r.i64();
        int softPin = r.u8();
        Long softTtl = MasterCodec.optionalU64(r);
        boolean hard = r.bool();
        List<String> preferred = strings(r);
        String preferredOne = r.string();
        List<String> nofs = strings(r);
        boolean sameNode = r.bool();
        int dataType = r.u8();
        String hostId = r.string();
        List<String> groups = r.bool() ? strings(r) : null;
        return new ReplicateConfig(Math.max(1, replicas), nof, dfs, softPin, softTtl, hard, preferred, preferredOne, nofs,
                sameNode, dataType, hostId, groups);
    }

    private int mount(Segment s, Uuid owner, long now, boolean remount) {
        if (s.size() <= 0 || s.base() == 0) {
            return ErrorCode.INVALID_PARAMS.code();
        }
        Seg existing = segs.get(s.id());
        if (existing != null) {
            return remount && existing.owner.equals(owner) ? 0 : ErrorCode.SEGMENT_ALREADY_EXISTS.code();
        }
        Client c = clients.computeIfAbsent(owner, k -> new Client(now));
        c.lastSeen = now;
        segs.put(s.id(), new Seg(s, owner));
        c.segments.add(s.id());
        return 0;
    }

    private void unmount(Seg s) {
        segs.remove(s.segment.id());
        Client c = clients.get(s.owner);
        if (c != null) {
            c.segments.remove(s.segment.id());
        }
        for (String k : new ArrayList<>(objects.keySet())) {
            Obj o = objects.get(k);
            o.replicas.removeIf(a -> a.seg == s);
            if (o.replicas.isEmpty()) {
                objects.remove(k);
            }
        }
    }

    private boolean expire(Uuid id) {
        Client c = clients.remove(id);
        if (c == null) {
            return false;
        }
        for (Uuid sid : new ArrayList<>(c.segments)) {
            Seg s = segs.get(sid);
            if (s != null) {
                unmount(s);
            }
        }
        return true;
    }

    private void expireSilentClients(long now) {
        long ttl = clientTtlNanos;
        for (Uuid id : new ArrayList<>(clients.keySet())) {
            if (now - clients.get(id).lastSeen > ttl) {
                expire(id);
            }
        }
    }

    private Integer keyError(String key) {
        return keyErrors.get(key);
    }

    private Result<List<Alloc>> putStart(Uuid writer, String key, long len, ReplicateConfig cfg, boolean upsert) {
        Integer e = keyError(key);
        if (e != null) {
            return Result.error(e);
        }
        if (key.isEmpty() || len <= 0) {
            return Result.error(ErrorCode.INVALID_PARAMS.code());
        }
        Obj prior = objects.get(key);
        if (prior != null) {
            if (!upsert || !prior.complete) {
                return Result.error(prior.complete ? ErrorCode.OBJECT_ALREADY_EXISTS.code()
                        : ErrorCode.OBJECT_REPLICA_BUSY.code());
            }
            if (prior.leaseUntil > System.nanoTime()) {
                return Result.error(ErrorCode.OBJECT_HAS_LEASE.code());
            }
            drop(key);
        }
        List<Seg> order = new ArrayList<>();
        for (String name : cfg.preferredSegments()) {
            segs.values().stream().filter(s -> s.segment.name().equals(name)).forEach(order::add);
        }
        if (!cfg.preferredSegment().isEmpty()) {
            segs.values().stream().filter(s -> s.segment.name().equals(cfg.preferredSegment())).forEach(order::add);
        }
        List<Seg> rest = new ArrayList<>(segs.values());
        rest.removeAll(order);
        Collections.shuffle(rest, random);
        order.addAll(rest);
        List<Alloc> got = new ArrayList<>();
        for (Seg s : order) {
            if (got.size() == cfg.replicaNum()) {
                break;
            }
            if (got.stream().anyMatch(a -> a.seg == s)) {
                continue;
            }
            long off = s.allocate(len);
            if (off >= 0) {
                got.add(new Alloc(s, off, len, nextReplicaId++));
            }
        }
        if (got.isEmpty()) {
            return Result.error(ErrorCode.NO_AVAILABLE_HANDLE.code());
        }
        objects.put(key, new Obj(writer, len, got));
        return Result.ok(got);
    }

    private int putEnd(Uuid writer, String key, Long checksum) {
        Integer e = keyError(key);
        if (e != null) {
            return e;
        }
        Obj o = objects.get(key);
        if (o == null) {
            return ErrorCode.OBJECT_NOT_FOUND.code();
        }
        if (!o.writer.equals(writer)) {
            return ErrorCode.ILLEGAL_CLIENT.code();
        }
        o.complete = true;
        o.checksum = checksum;
        return 0;
    }

    private int putRevoke(Uuid writer, String key) {
        Integer e = keyError(key);
        if (e != null) {
            return e;
        }
        Obj o = objects.get(key);
        if (o == null) {
            return ErrorCode.OBJECT_NOT_FOUND.code();
        }
        if (o.complete) {
            return ErrorCode.INVALID_WRITE.code();
        }
        if (!o.writer.equals(writer)) {
            return ErrorCode.ILLEGAL_CLIENT.code();
        }
        drop(key);
        return 0;
    }

    private Result<Obj> read(String key, long now) {
        Integer e = keyError(key);
        if (e != null) {
            return Result.error(e);
        }
        Obj o = objects.get(key);
        if (o == null) {
            return Result.error(ErrorCode.OBJECT_NOT_FOUND.code());
        }
        if (!o.complete) {
            return Result.error(ErrorCode.REPLICA_IS_NOT_READY.code());
        }
        o.leaseUntil = Math.max(o.leaseUntil, now + leaseTtlMs * 1_000_000L);
        return Result.ok(o);
    }

    private Result<Boolean> exists(String key) {
        Integer e = keyError(key);
        if (e != null) {
            return Result.error(e);
        }
        Obj o = objects.get(key);
        return Result.ok(o != null && o.complete);
    }

    private int remove(String key, boolean force, long now) {
        Integer e = keyError(key);
        if (e != null) {
            return e;
        }
        Obj o = objects.get(key);
        if (o == null) {
            return ErrorCode.OBJECT_NOT_FOUND.code();
        }
        if (!o.complete) {
            return ErrorCode.REPLICA_IS_NOT_READY.code();
        }
        if (!force && o.leaseUntil > now) {
            return ErrorCode.OBJECT_HAS_LEASE.code();
        }
        drop(key);
        return 0;
    }

    private void drop(String key) {
        Obj o = objects.remove(key);
        if (o != null) {
            o.replicas.forEach(a -> a.seg.release(a.offset, a.size));
        }
    }

    // ------------------------------------------------------------------ answers

    private static Consumer<StructPackWriter> voidResult(int code) {
        return w -> writeVoid(w, code);
    }

    private static Consumer<StructPackWriter> voidResults(List<Integer> codes) {
        return w -> {
            w.length(codes.size());
            codes.forEach(c -> writeVoid(w, c));
        };
    }

    private static void writeVoid(StructPackWriter w, int code) {
        if (code == 0) {
            w.bool(true);
        } else {
            w.bool(false).i32(code);
        }
    }

    private static <T> void writeExpected(StructPackWriter w, Result<T> r, Consumer<T> value) {
        if (r.ok()) {
            w.bool(true);
            value.accept(r.value());
        } else {
            w.bool(false).i32(r.code());
        }
    }

    private static void writeReplicas(StructPackWriter w, List<Alloc> replicas, boolean complete) {
        w.length(replicas.size());
        for (Alloc a : replicas) {
            Segment s = a.seg.segment;
            w.i64(a.id).u8(0).i64(a.size).i64(s.base() + a.offset).string(s.protocol()).string(s.teEndpoint());
            w.i32((complete ? ReplicaDescriptor.Status.COMPLETE : ReplicaDescriptor.Status.PROCESSING).ordinal());
        }
    }

    private static void writeReplicaList(StructPackWriter w, Obj o, long leaseMs) {
        writeReplicas(w, o.replicas, true);
        w.i64(leaseMs).bool(o.checksum != null);
        if (o.checksum != null) {
            w.i64(o.checksum);
        }
    }

    // ------------------------------------------------------------------ frames

    private static final Set<byte[]> CLOSE_AFTER = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));

    /**
     * {@return {@code bytes}, marked so that the server closes the connection after writing them}
     *
     * @param bytes the answer
     */
    public static byte[] thenClose(byte[] bytes) {
        CLOSE_AFTER.add(bytes);
        return bytes;
    }

    static int le(byte[] b, int off) {
        return (b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24;
    }

    /**
     * {@return a reply frame: header (magic 21, version 0, err, seq, length) and body}
     *
     * @param seq  the request's sequence number
     * @param err  coro_rpc's error code (0 for a normal answer)
     * @param body the struct_pack body
     */
    public static byte[] reply(int seq, int err, byte[] body) {
        byte[] f = new byte[16 + body.length];
        f[0] = 21;
        f[2] = (byte) err;
        put(f, 4, seq);
        put(f, 8, body.length);
        System.arraycopy(body, 0, f, 16, body.length);
        return f;
    }

    /**
     * {@return a reply frame for {@code r} whose body is bytes no decoder accepts (a wrong type hash)}
     *
     * @param r the request
     */
    public static byte[] malformed(Request r) {
        return reply(r.seq(), 0, "not struct_pack".getBytes(StandardCharsets.US_ASCII));
    }

    static void put(byte[] b, int off, int v) {
        for (int i = 0; i < 4; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) {
            n += p.length;
        }
        byte[] out = new byte[n];
        int o = 0;
        for (byte[] p : parts) {
            System.arraycopy(p, 0, out, o, p.length);
            o += p.length;
        }
        return out;
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (Socket s : sockets) {
            s.close();
        }
    }
}
