package io.mooncake4j.internal.sys;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.OptionalLong;

/**
 * Reads process resource limits with {@code getrlimit(2)} through FFM. Linux only; on other
 * systems, or when native access is not enabled, every limit reads as unknown.
 */
public final class ResourceLimits {

    /** {@code RLIMIT_MEMLOCK} on Linux (x86-64 and aarch64, asm-generic/resource.h). */
    static final int RLIMIT_MEMLOCK = 8;
    /** {@code RLIM_INFINITY}: all bits set. */
    public static final long UNLIMITED = -1L;

    // struct rlimit { rlim_t rlim_cur; rlim_t rlim_max; };  rlim_t = unsigned long
    private static final StructLayout RLIMIT = MemoryLayout.structLayout(
            ValueLayout.JAVA_LONG.withName("rlim_cur"),
            ValueLayout.JAVA_LONG.withName("rlim_max"));

    private static final MethodHandle GETRLIMIT = lookup();

    private ResourceLimits() {}

    private static MethodHandle lookup() {
        if (!System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).contains("linux")) {
            return null;
        }
        try {
            Linker linker = Linker.nativeLinker();
            return linker.defaultLookup().find("getrlimit")
                    .map(addr -> linker.downcallHandle(addr,
                            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS)))
                    .orElse(null);
        } catch (RuntimeException e) { // IllegalCallerException without --enable-native-access in some modes
            return null;
        }
    }

    /**
     * The soft {@code RLIMIT_MEMLOCK} in bytes: {@link #UNLIMITED} for no limit, empty when it
     * cannot be read.
     */
    public static OptionalLong memlockSoftLimit() {
        if (GETRLIMIT == null) {
            return OptionalLong.empty();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment rl = arena.allocate(RLIMIT);
            int rc = (int) GETRLIMIT.invokeExact(RLIMIT_MEMLOCK, rl);
            if (rc != 0) {
                return OptionalLong.empty();
            }
            return OptionalLong.of(rl.get(ValueLayout.JAVA_LONG, 0));
        } catch (Throwable t) {
            return OptionalLong.empty();
        }
    }

    /**
     * The locked-memory limit that applies to this process: {@link #UNLIMITED} when it has
     * {@code CAP_IPC_LOCK} (the kernel then does not enforce {@code RLIMIT_MEMLOCK} on mlock or
     * RDMA pinning), else {@link #memlockSoftLimit()}.
     */
    public static OptionalLong effectiveMemlockLimit() {
        return Capabilities.hasIpcLock() ? OptionalLong.of(UNLIMITED) : memlockSoftLimit();
    }

    /** Human form of a limit: {@code unlimited} or a byte count with a binary unit. */
    public static String describe(long limit) {
        if (limit == UNLIMITED) {
            return "unlimited";
        }
        return Bytes.human(limit);
    }
}
