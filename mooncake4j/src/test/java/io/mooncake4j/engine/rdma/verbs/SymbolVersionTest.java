package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * libibverbs exports two ABIs of its oldest verbs: {@code IBVERBS_1.0} (pre-rdma-core structs)
 * and the default {@code IBVERBS_1.1}, which the layouts mirror. {@code SymbolLookup} resolves a
 * name like {@code dlsym}; this checks it lands on the 1.1 version and not on the 1.0 one.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
class SymbolVersionTest {

    private static final List<String> VERSIONED = List.of("ibv_get_device_list", "ibv_free_device_list",
            "ibv_open_device", "ibv_close_device", "ibv_query_device", "ibv_query_port", "ibv_query_gid",
            "ibv_alloc_pd", "ibv_dealloc_pd", "ibv_reg_mr", "ibv_dereg_mr", "ibv_create_cq", "ibv_destroy_cq",
            "ibv_create_qp", "ibv_modify_qp", "ibv_destroy_qp");

    @Test
    void lookupShouldResolveTheIbverbs11VersionOfEveryVersionedVerb() throws Throwable {
        assumeTrue(Verbs.UNAVAILABLE == null, () -> "libibverbs unusable: " + Verbs.UNAVAILABLE);
        Linker linker = Linker.nativeLinker();
        Optional<MemorySegment> dlopenSym = linker.defaultLookup().find("dlopen");
        Optional<MemorySegment> dlvsymSym = linker.defaultLookup().find("dlvsym");
        Optional<MemorySegment> dlcloseSym = linker.defaultLookup().find("dlclose");
        assumeTrue(dlopenSym.isPresent() && dlvsymSym.isPresent() && dlcloseSym.isPresent(), "glibc dl* not found");
        MethodHandle dlclose = linker.downcallHandle(dlcloseSym.get(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
        MethodHandle dlopen = linker.downcallHandle(dlopenSym.get(), FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        MethodHandle dlvsym = linker.downcallHandle(dlvsymSym.get(), FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup lib = SymbolLookup.libraryLookup(Verbs.LIBRARY, arena);
            MemorySegment handle = (MemorySegment) dlopen.invokeExact(arena.allocateFrom(Verbs.LIBRARY), 2 /* RTLD_NOW */);
            assertNotEquals(MemorySegment.NULL, handle);
            try {
                checkVersions(lib, handle, dlvsym, arena);
            } finally {
                int rc = (int) dlclose.invokeExact(handle);
                assertEquals(0, rc, "dlclose");
            }
        }
    }

    private static void checkVersions(SymbolLookup lib, MemorySegment handle, MethodHandle dlvsym, Arena arena)
            throws Throwable {
        for (String name : VERSIONED) {
            MemorySegment v11 = (MemorySegment) dlvsym.invokeExact(handle, arena.allocateFrom(name),
                    arena.allocateFrom("IBVERBS_1.1"));
            MemorySegment v10 = (MemorySegment) dlvsym.invokeExact(handle, arena.allocateFrom(name),
                    arena.allocateFrom("IBVERBS_1.0"));
            long found = lib.find(name).orElseThrow().address();
            assertEquals(v11.address(), found, name + " must resolve to IBVERBS_1.1");
            assertNotEquals(v10.address(), found, name + " resolved to the IBVERBS_1.0 compat version");
        }
    }
}
