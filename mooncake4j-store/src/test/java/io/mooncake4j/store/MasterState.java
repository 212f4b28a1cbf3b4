package io.mooncake4j.store;

import io.mooncake4j.store.MasterCodec.Rpc;
import io.mooncake4j.store.wire.StructPackException;
import io.mooncake4j.store.wire.StructPackReader;
import io.mooncake4j.store.wire.StructPackWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * {@link FakeMaster}'s state and answers: clients and their segments, objects placed in mounted
 * segments (first fit, 64-byte aligned), leases, client expiry, per-key errors. {@link #apply} reads one
 * request's arguments, changes the state and returns the writer of the answer. Guarded by this.
 */
final class MasterState {

    /** Per-key error codes the fault hook set ({@link FakeMaster#failKey}). */
    final Map<String, Integer> keyErrors = new ConcurrentHashMap<>();
    private final Map<Uuid, Client> clients = new HashMap<>();
    private final Map<Uuid, Seg> segs = new LinkedHashMap<>();
    private final Map<String, Obj> objects = new LinkedHashMap<>();
    private final Random random = new Random(1);
    private long nextReplicaId = 1;
    private long viewVersion = 1;
    volatile long leaseTtlMs = 10_000;
    volatile long clientTtlNanos = Duration.ofSeconds(10).toNanos();
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

    /**
     * Expires a client now, as its TTL running out would: its segments are unmounted and the
     * objects with replicas in them dropped; its next Ping is answered NEED_REMOUNT.
     *
     * @param id the client
     * @return whether the master knew the client
     */
    synchronized boolean expireClient(Uuid id) {
        return expire(id);
    }

    /** Forgets everything, as a restarted master: clients, segments, objects; a new view version. */
    synchronized void restart() {
        clients.clear();
        segs.clear();
        objects.clear();
        viewVersion++;
    }

    // ------------------------------------------------------------------ observation

    /** {@return the keys of complete objects, in put order} */
    synchronized List<String> keys() {
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
    synchronized boolean holds(String key) {
        Obj o = objects.get(key);
        return o != null && o.complete;
    }

    /**
     * {@return the names of the segments holding {@code key}'s replicas (empty if none)}
     *
     * @param key the key
     */
    synchronized List<String> placement(String key) {
        Obj o = objects.get(key);
        List<String> out = new ArrayList<>();
        if (o != null) {
            o.replicas.forEach(a -> out.add(a.seg.segment.name()));
        }
        return out;
    }

    /** {@return the mounted segments} */
    synchronized List<Segment> mounted() {
        List<Segment> out = new ArrayList<>();
        segs.values().forEach(s -> out.add(s.segment));
        return out;
    }

    /**
     * {@return whether the master counts {@code id} as a live client}
     *
     * @param id the client
     */
    synchronized boolean knows(Uuid id) {
        return clients.containsKey(id);
    }



    /** Reads the arguments, changes the state, and returns the writer of the answer's payload. */
    synchronized Consumer<StructPackWriter> apply(Rpc rpc, StructPackReader r) {
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
                Result<Boolean> e = exists(key, now);
                return w -> writeExpected(w, e, b -> w.bool(b));
            }
            case "BatchExistKey" -> {
                List<String> keys = strings(r);
                r.string();
                List<Result<Boolean>> out = new ArrayList<>();
                keys.forEach(k -> out.add(exists(k, now)));
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

    /** ExistKey: like GetReplicaList, a hit grants a read lease (Mooncake's documented behaviour). */
    private Result<Boolean> exists(String key, long now) {
        Integer e = keyError(key);
        if (e != null) {
            return Result.error(e);
        }
        Obj o = objects.get(key);
        boolean hit = o != null && o.complete;
        if (hit) {
            o.leaseUntil = Math.max(o.leaseUntil, now + leaseTtlMs * 1_000_000L);
        }
        return Result.ok(hit);
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
}
