package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.store.wire.StructPack;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.lang.reflect.Field;
import java.lang.reflect.GenericArrayType;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.lang.reflect.WildcardType;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * One error model: store outcomes are codes or {@link Result}s, a miss is told from a failure, wrong
 * arguments are a {@link StoreException} naming them before anything is sent, nothing else escapes
 * (not even an answer the types refuse), and the public API shows only exported types.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StoreErrorModelTest {

    private static StoreException invalid(Executable call, String named) {
        StoreException e = assertThrows(StoreException.class, call::execute);
        assertEquals(ErrorCode.INVALID_PARAMS.code(), e.errorCode(), e.getMessage());
        assertTrue(e.getMessage().contains(named), "'" + e.getMessage() + "' should name " + named);
        return e;
    }

    @Test
    void wrongArgumentsAreNamedBeforeAnythingIsSent() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient c = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 1L << 20))) {
            int before = m.calls("BatchGetReplicaList") + m.calls("GetReplicaList");
            invalid(() -> c.batchGetInto(List.of("a", "b"), new long[1], new long[2]), "2 keys but 1 addresses");
            invalid(() -> c.batchGetIntoMultiBuffers(List.of("a"), new long[][] {{1, 2}}, new long[][] {{1}}),
                    "key 0 (a): 2 addresses but 1 sizes");
            invalid(() -> c.batchPutFrom(List.of("a"), new long[1], new long[0], ReplicateConfig.defaults()), "sizes");
            invalid(() -> c.batchPutFromMultiBuffers(List.of("a"), new long[][] {{1}}, new long[][] {{-5}},
                    ReplicateConfig.defaults()), "negative size -5");
            invalid(() -> c.isExist(null), "key is null");
            invalid(() -> c.batchIsExist(Arrays.asList("a", null)), "keys[1] is null");
            invalid(() -> c.put("k", null, ReplicateConfig.defaults()), "value is null");
            invalid(() -> c.put("k", new byte[1], null), "config is null");
            invalid(() -> ReplicateConfig.defaults().withReplicaNum(0), "replicaNum must be at least 1");
            invalid(() -> MasterClient.parseAddress("nohost"), "host:port");
            invalid(() -> c.master().batchPutStart(c.clientId(), List.of("a"), new long[2], ReplicateConfig.defaults()),
                    "1 keys but 2 lengths");
            invalid(() -> Result.error(0), "not 0");
            assertEquals(before, m.calls("BatchGetReplicaList") + m.calls("GetReplicaList"));
            assertEquals(0, m.calls("BatchPutStart") + m.calls("PutStart"));
        }
    }

    @Test
    void aMissIsNotAFailure() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient c = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 1L << 20)
                        .withTimings(java.time.Duration.ofMillis(1500), java.time.Duration.ofSeconds(30)))) {
            Result<byte[]> miss = c.getValue("absent");
            assertTrue(miss.missing(), miss.toString());
            assertEquals(ErrorCode.OBJECT_NOT_FOUND, miss.errorCode());
            assertEquals(0, c.put("here", new byte[] {1, 2, 3}, ReplicateConfig.defaults()));
            Result<byte[]> hit = c.getValue("here");
            assertTrue(hit.ok());
            assertArrayEquals(new byte[] {1, 2, 3}, hit.value());
            m.silent(true);
            Result<byte[]> failed = c.getValue("here");
            assertFalse(failed.ok() || failed.missing(), failed.toString());
            assertEquals(ErrorCode.RPC_TIMEOUT, failed.errorCode());
            m.silent(false);
            MasterProcess.await("answers again", () -> c.getValue("here").ok(), FakeMasterStoreTest.WAIT);
            m.failKey("broken", ErrorCode.INVALID_REPLICA);
            assertEquals(ErrorCode.INVALID_REPLICA, c.getValue("broken").errorCode());
        }
    }

    @Test
    void anAnswerTheTypesRefuseIsRpcFailNotAStrayException() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient c = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 1L << 20))) {
            // expected<bool> holding "error 0": well-formed bytes, a value no Result may hold
            m.fault(r -> "ExistKey".equals(r.rpcName()) ? FakeMaster.reply(r.seq(), 0,
                    StructPack.encode(MasterCodec.EXIST_KEY.result(), w -> w.bool(false).i32(0))) : null);
            assertEquals(ErrorCode.RPC_FAIL.code(), c.isExist("k"));
            StoreException e = assertThrows(StoreException.class, () -> c.master().existKey("k"));
            assertEquals(ErrorCode.RPC_FAIL.code(), e.errorCode());
            assertTrue(e.getMessage().contains("undecodable answer"), e.getMessage());
            m.fault(null);
            assertEquals(0, c.isExist("k"));
        }
    }

    @Test
    void aClosedClientIsAnInvalidUse() throws Exception {
        try (FakeMaster m = new FakeMaster()) {
            MooncakeStoreClient c = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 1L << 20));
            c.close();
            invalid(() -> c.getValue("k"), "closed");
            invalid(() -> c.put("k", new byte[1], ReplicateConfig.defaults()), "closed");
            invalid(() -> c.batchGetInto(List.of("k"), new long[1], new long[1]), "closed");
            assertEquals(1, c.healthCheck());
        }
    }

    private static Set<String> exported(Class<?> inModule) throws Exception {
        Path where = Path.of(inModule.getProtectionDomain().getCodeSource().getLocation().toURI());
        ModuleReference ref = ModuleFinder.of(where).findAll().iterator().next();
        Set<String> out = new HashSet<>();
        for (ModuleDescriptor.Exports e : ref.descriptor().exports()) {
            if (!e.isQualified()) {
                out.add(e.source());
            }
        }
        return out;
    }

    private static void collect(Type t, List<Class<?>> out) {
        switch (t) {
            case Class<?> c -> out.add(c.isArray() ? c.componentType() : c);
            case ParameterizedType p -> {
                collect(p.getRawType(), out);
                Arrays.stream(p.getActualTypeArguments()).forEach(a -> collect(a, out));
            }
            case GenericArrayType g -> collect(g.getGenericComponentType(), out);
            case WildcardType w -> {
                Arrays.stream(w.getUpperBounds()).forEach(a -> collect(a, out));
                Arrays.stream(w.getLowerBounds()).forEach(a -> collect(a, out));
            }
            default -> { }
        }
    }

    @Test
    void thePublicApiShowsOnlyExportedTypes() throws Exception {
        Set<String> ok = new HashSet<>(exported(TransferEngine.class));
        Set<String> own = exported(MooncakeStoreClient.class);
        assertEquals(Set.of("io.mooncake4j.store", "io.mooncake4j.store.connector"), own); // the store connector (#32)
        ok.addAll(own);
        List<String> leaks = new ArrayList<>();
        for (Class<?> c : List.of(MooncakeStoreClient.class, MasterClient.class, StoreConfig.class, ReplicateConfig.class,
                Result.class, ErrorCode.class, StoreException.class, ReplicaList.class, ReplicaDescriptor.class,
                Segment.class, Uuid.class, PingResult.class)) {
            List<java.lang.reflect.Member> members = new ArrayList<>();
            members.addAll(Arrays.asList(c.getDeclaredMethods()));
            members.addAll(Arrays.asList(c.getDeclaredConstructors()));
            members.addAll(Arrays.asList(c.getDeclaredFields()));
            for (java.lang.reflect.Member mb : members) {
                if (!Modifier.isPublic(mb.getModifiers()) || mb.isSynthetic()) {
                    continue;
                }
                List<Class<?>> types = new ArrayList<>();
                if (mb instanceof Method me) {
                    collect(me.getGenericReturnType(), types);
                }
                if (mb instanceof java.lang.reflect.Executable ex) {
                    Arrays.stream(ex.getGenericParameterTypes()).forEach(t -> collect(t, types));
                    Arrays.stream(ex.getGenericExceptionTypes()).forEach(t -> collect(t, types));
                }
                if (mb instanceof Field f) {
                    collect(f.getGenericType(), types);
                }
                for (Class<?> t : types) {
                    String pkg = t.getPackageName();
                    if (!t.isPrimitive() && !pkg.startsWith("java.") && !ok.contains(pkg)) {
                        leaks.add(c.getSimpleName() + "." + mb.getName() + " shows " + t.getName());
                    }
                }
            }
        }
        assertEquals(List.of(), leaks);
    }
}
