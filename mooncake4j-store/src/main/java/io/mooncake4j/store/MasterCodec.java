package io.mooncake4j.store;

import static io.mooncake4j.store.wire.SpType.BOOL;
import static io.mooncake4j.store.wire.SpType.INT32;
import static io.mooncake4j.store.wire.SpType.INT64;
import static io.mooncake4j.store.wire.SpType.MONOSTATE;
import static io.mooncake4j.store.wire.SpType.STRING;
import static io.mooncake4j.store.wire.SpType.UINT64;
import static io.mooncake4j.store.wire.SpType.UINT8;
import static io.mooncake4j.store.wire.SpType.struct;

import io.mooncake4j.store.wire.SpType;
import io.mooncake4j.store.wire.StructPackException;
import io.mooncake4j.store.wire.StructPackReader;
import io.mooncake4j.store.wire.StructPackWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * The master's types as struct_pack sees them (declaration order of {@code mooncake-store/include/
 * types.h}, {@code replica.h}, {@code rpc_types.h}, {@code allocator.h} at the commit named in
 * {@code docs/store.md}), the parameter lists of the RPCs the client calls, and their payload
 * encoders and decoders. {@code size_t} and {@code uintptr_t} are uint64; enums their
 * underlying integer ({@code ErrorCode}, {@code ReplicaStatus}, {@code ReplicaType},
 * {@code ClientStatus}: int32; {@code SoftPinAction}, {@code ObjectDataType}: uint8).
 */
final class MasterCodec {

    private MasterCodec() {}

    static final String SERVICE = "mooncake::WrappedMasterService::";

    // -------------------------------------------------------------- types
    /** {@code std::pair<uint64_t, uint64_t>}: trivially copyable, alignment 8. */
    static final SpType UUID = new SpType.Struct(List.of(UINT64, UINT64), 8);
    static final SpType SEGMENT = struct(UUID, STRING, UINT64, UINT64, STRING, STRING, STRING);
    static final SpType REPLICATE_CONFIG = struct(UINT64, UINT64, UINT64, UINT8, new SpType.Opt(UINT64), BOOL,
            new SpType.Vec(STRING), STRING, new SpType.Vec(STRING), BOOL, UINT8, STRING,
            new SpType.Opt(new SpType.Vec(STRING)));
    static final SpType OBJECT_META = struct(STRING, new SpType.Opt(UINT64));
    static final SpType BUFFER_DESC = struct(UINT64, UINT64, STRING, STRING);
    static final SpType MEMORY_DESC = struct(BUFFER_DESC);
    static final SpType NOF_DESC = struct(BUFFER_DESC);
    static final SpType DISK_DESC = struct(STRING, UINT64);
    static final SpType LOCAL_DISK_DESC = struct(UUID, UINT64, STRING);
    static final SpType DFS_DESC = struct(STRING, UINT64, UINT64, UINT64, INT32);
    static final SpType REPLICA_DESC = struct(UINT64,
            new SpType.Variant(List.of(MEMORY_DESC, NOF_DESC, DISK_DESC, LOCAL_DISK_DESC, DFS_DESC)), INT32);
    static final SpType REPLICA_LIST = struct(new SpType.Vec(REPLICA_DESC), UINT64, new SpType.Opt(UINT64));
    static final SpType PING_RESPONSE = struct(INT64, INT32);
    static final SpType ERROR_CODE = INT32;

    static SpType expected(SpType v) {
        return new SpType.Expected(v, ERROR_CODE);
    }

    static SpType vec(SpType e) {
        return new SpType.Vec(e);
    }

    // -------------------------------------------------------------- RPCs
    /**
     * One RPC: its qualified name, function id, parameter-list type (null for none) and result type.
     *
     * @param name   the member function's name
     * @param id     coro_rpc's function id (MD5 of the qualified name)
     * @param args   the parameter list's root type, null for a function without parameters
     * @param result the return type
     */
    record Rpc(String name, int id, SpType args, SpType result) {
        static Rpc of(String name, SpType args, SpType result) {
            return new Rpc(name, SpType.functionId(SERVICE + name), args, result);
        }
    }

    static final SpType KEYS = vec(STRING);
    static final SpType VOID = expected(MONOSTATE);
    static final Rpc SERVICE_READY = Rpc.of("ServiceReady", null, expected(STRING));
    static final Rpc PING = Rpc.of("Ping", UUID, expected(PING_RESPONSE));
    static final Rpc MOUNT_SEGMENT = Rpc.of("MountSegment", struct(SEGMENT, UUID), VOID);
    static final Rpc REMOUNT_SEGMENT = Rpc.of("ReMountSegment", struct(vec(SEGMENT), UUID), VOID);
    static final Rpc UNMOUNT_SEGMENT = Rpc.of("UnmountSegment", struct(UUID, UUID), VOID);
    static final Rpc PUT_START = Rpc.of("PutStart", struct(UUID, STRING, UINT64, REPLICATE_CONFIG, STRING),
            expected(vec(REPLICA_DESC)));
    static final Rpc PUT_END = Rpc.of("PutEnd", struct(UUID, OBJECT_META, INT32, STRING), VOID);
    static final Rpc PUT_REVOKE = Rpc.of("PutRevoke", struct(UUID, STRING, INT32, STRING), VOID);
    static final Rpc BATCH_PUT_START = Rpc.of("BatchPutStart",
            struct(UUID, KEYS, vec(UINT64), REPLICATE_CONFIG, STRING), vec(expected(vec(REPLICA_DESC))));
    static final Rpc BATCH_PUT_END = Rpc.of("BatchPutEnd", struct(UUID, vec(OBJECT_META), INT32, STRING), vec(VOID));
    static final Rpc BATCH_PUT_REVOKE = Rpc.of("BatchPutRevoke", struct(UUID, KEYS, INT32, STRING), vec(VOID));
    static final Rpc GET_REPLICA_LIST = Rpc.of("GetReplicaList", struct(STRING, STRING), expected(REPLICA_LIST));
    static final Rpc BATCH_GET_REPLICA_LIST = Rpc.of("BatchGetReplicaList", struct(KEYS, STRING),
            vec(expected(REPLICA_LIST)));
    static final Rpc EXIST_KEY = Rpc.of("ExistKey", struct(STRING, STRING), expected(BOOL));
    static final Rpc BATCH_EXIST_KEY = Rpc.of("BatchExistKey", struct(KEYS, STRING), vec(expected(BOOL)));
    static final Rpc REMOVE = Rpc.of("Remove", struct(STRING, BOOL, STRING), VOID);
    static final Rpc BATCH_REMOVE = Rpc.of("BatchRemove", struct(KEYS, BOOL, STRING), vec(VOID));
    static final Rpc REMOVE_ALL = Rpc.of("RemoveAll", struct(BOOL, STRING), INT64);

    /** Every RPC the client calls (golden files cover each). */
    static final List<Rpc> ALL = List.of(SERVICE_READY, PING, MOUNT_SEGMENT, REMOUNT_SEGMENT, UNMOUNT_SEGMENT,
            PUT_START, PUT_END, PUT_REVOKE, BATCH_PUT_START, BATCH_PUT_END, BATCH_PUT_REVOKE, GET_REPLICA_LIST,
            BATCH_GET_REPLICA_LIST, EXIST_KEY, BATCH_EXIST_KEY, REMOVE, BATCH_REMOVE, REMOVE_ALL);

    // the overwrite path and removal by pattern (LMCache's and SGLang's upsert*, remove_by_regex)
    static final Rpc UPSERT_START = Rpc.of("UpsertStart", struct(UUID, STRING, UINT64, REPLICATE_CONFIG, STRING),
            expected(vec(REPLICA_DESC)));
    static final Rpc UPSERT_END = Rpc.of("UpsertEnd", struct(UUID, OBJECT_META, INT32, STRING), VOID);
    static final Rpc UPSERT_REVOKE = Rpc.of("UpsertRevoke", struct(UUID, STRING, INT32, STRING), VOID);
    static final Rpc BATCH_UPSERT_START = Rpc.of("BatchUpsertStart",
            struct(UUID, KEYS, vec(UINT64), REPLICATE_CONFIG, STRING), vec(expected(vec(REPLICA_DESC))));
    static final Rpc BATCH_UPSERT_END = Rpc.of("BatchUpsertEnd", struct(UUID, vec(OBJECT_META), STRING), vec(VOID));
    static final Rpc BATCH_UPSERT_REVOKE = Rpc.of("BatchUpsertRevoke", struct(UUID, KEYS, STRING), vec(VOID));
    static final Rpc REMOVE_BY_REGEX = Rpc.of("RemoveByRegex", struct(STRING, BOOL, STRING), expected(INT64));

    /**
     * RPCs beyond the golden-file set: their parameter lists follow Mooncake's declarations (the
     * batch upsert end and revoke take no ReplicaType); a real master checks them in RealMasterTest.
     */
    static final List<Rpc> EXTRA = List.of(UPSERT_START, UPSERT_END, UPSERT_REVOKE, BATCH_UPSERT_START,
            BATCH_UPSERT_END, BATCH_UPSERT_REVOKE, REMOVE_BY_REGEX);

    /** {@code ReplicaType::ALL}: finish or revoke every synchronous replica of the put. */
    static final int REPLICA_TYPE_ALL = 4;

    // -------------------------------------------------------------- writers
    static void uuid(StructPackWriter w, Uuid u) {
        w.i64(u.first()).i64(u.second());
    }

    static void strings(StructPackWriter w, List<String> l) {
        w.length(l.size());
        for (String s : l) {
            w.string(s);
        }
    }

    static void segment(StructPackWriter w, Segment s) {
        uuid(w, s.id());
        w.string(s.name()).i64(s.base()).i64(s.size()).string(s.teEndpoint()).string(s.protocol()).string(s.hostId());
    }

    static void replicateConfig(StructPackWriter w, ReplicateConfig c) {
        w.i64(c.replicaNum()).i64(c.nofReplicaNum()).i64(c.dfsReplicaNum()).u8(c.softPinAction());
        w.bool(c.softPinTtlMs() != null);
        if (c.softPinTtlMs() != null) {
            w.i64(c.softPinTtlMs());
        }
        w.bool(c.withHardPin());
        strings(w, c.preferredSegments());
        w.string(c.preferredSegment());
        strings(w, c.preferredNofSegments());
        w.bool(c.preferAllocInSameNode()).u8(c.dataType()).string(c.hostId());
        w.bool(c.groupIds() != null);
        if (c.groupIds() != null) {
            strings(w, c.groupIds());
        }
    }

    static void objectMeta(StructPackWriter w, String key, Long checksum) {
        w.string(key).bool(checksum != null);
        if (checksum != null) {
            w.i64(checksum);
        }
    }

    // -------------------------------------------------------------- readers
    static <T> Result<T> expected(StructPackReader r, Function<StructPackReader, T> value) {
        if (r.bool()) {
            return Result.ok(value.apply(r));
        }
        int code = r.i32();
        if (code == 0) {
            throw new StructPackException("an expected<> holding the error OK");
        }
        return Result.error(code);
    }

    static Result<Void> expectedVoid(StructPackReader r) {
        return expected(r, x -> null);
    }

    static <T> List<T> list(StructPackReader r, int minBytes, Function<StructPackReader, T> element) {
        int n = r.count(minBytes);
        List<T> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(element.apply(r));
        }
        return out;
    }

    static Long optionalU64(StructPackReader r) {
        return r.bool() ? r.i64() : null;
    }

    static Uuid uuid(StructPackReader r) {
        return new Uuid(r.i64(), r.i64());
    }

    static Segment segment(StructPackReader r) {
        return new Segment(uuid(r), r.string(), r.i64(), r.i64(), r.string(), r.string(), r.string());
    }

    static ReplicaDescriptor replica(StructPackReader r) {
        long id = r.i64();
        int index = r.u8();
        ReplicaDescriptor.Kind kind;
        long size = 0;
        long address = 0;
        String protocol = "";
        String endpoint = "";
        String path = "";
        switch (index) {
            case 0, 1 -> {
                kind = index == 0 ? ReplicaDescriptor.Kind.MEMORY : ReplicaDescriptor.Kind.NOF;
                size = r.i64();
                address = r.i64();
                protocol = r.string();
                endpoint = r.string();
            }
            case 2 -> {
                kind = ReplicaDescriptor.Kind.DISK;
                path = r.string();
                size = r.i64();
            }
            case 3 -> {
                kind = ReplicaDescriptor.Kind.LOCAL_DISK;
                uuid(r);
                size = r.i64();
                endpoint = r.string();
            }
            case 4 -> {
                kind = ReplicaDescriptor.Kind.DFS;
                path = r.string();
                address = r.i64();
                size = r.i64();
                r.i64();
                r.i32();
            }
            default -> throw new StructPackException("unknown replica descriptor variant index " + index
                    + " (this client knows 0-4)");
        }
        ReplicaDescriptor.Status status = ReplicaDescriptor.Status.of(r.i32());
        return new ReplicaDescriptor(id, kind, size, address, protocol, endpoint, path, status);
    }

    static List<ReplicaDescriptor> replicas(StructPackReader r) {
        // the smallest descriptor: id 8 + index 1 + a disk descriptor (1 + 8) + status 4
        return list(r, 22, MasterCodec::replica);
    }

    static ReplicaList replicaList(StructPackReader r) {
        return new ReplicaList(replicas(r), r.i64(), optionalU64(r));
    }

    static PingResult ping(StructPackReader r) {
        return new PingResult(r.i64(), r.i32());
    }
}
