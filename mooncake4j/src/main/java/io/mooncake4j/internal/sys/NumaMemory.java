package io.mooncake4j.internal.sys;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * The NUMA node a page of this process's memory lives on: {@code move_pages(2)} with no target
 * nodes, which only reports each page's node (the query {@code numa_move_pages(0, n, pages, NULL,
 * status, 0)} of libnuma). Called through libc's {@code syscall(3)} because glibc has no wrapper
 * (libnuma is not assumed). Linux x86-64 and aarch64 only; elsewhere, without native access, on
 * a kernel without NUMA support ({@code ENOSYS}) or for a page not mapped yet, the answer is -1.
 */
public final class NumaMemory {

    private static final long SYS_MOVE_PAGES = syscallNumber();
    private static final MethodHandle SYSCALL = lookup();

    private NumaMemory() {}

    private static long syscallNumber() {
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            return -1;
        }
        return switch (arch) {
            case "amd64", "x86_64" -> 279;
            case "aarch64", "arm64" -> 239;
            default -> -1;
        };
    }

    private static MethodHandle lookup() {
        if (SYS_MOVE_PAGES < 0) {
            return null;
        }
        try {
            Linker linker = Linker.nativeLinker();
            // long syscall(long number, ...): here (pid, count, pages, nodes, status, flags)
            FunctionDescriptor fd = FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                    ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.ADDRESS,
                    ValueLayout.ADDRESS, ValueLayout.JAVA_INT);
            return linker.defaultLookup().find("syscall")
                    .map(a -> linker.downcallHandle(a, fd, Linker.Option.firstVariadicArg(1))).orElse(null);
        } catch (RuntimeException e) { // IllegalCallerException without native access
            return null;
        }
    }

    /** The NUMA node of the page holding {@code address}, or -1 when unknown. */
    public static int nodeOf(long address) {
        if (SYSCALL == null || address == 0) {
            return -1;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pages = arena.allocate(ValueLayout.ADDRESS);
            pages.set(ValueLayout.JAVA_LONG, 0, address & ~4095L);
            MemorySegment status = arena.allocate(ValueLayout.JAVA_INT);
            status.set(ValueLayout.JAVA_INT, 0, -1);
            long rc = (long) SYSCALL.invokeExact(SYS_MOVE_PAGES, 0, 1L, pages, MemorySegment.NULL, status, 0);
            int node = status.get(ValueLayout.JAVA_INT, 0);
            return rc == 0 && node >= 0 ? node : -1; // a negative status is -errno (e.g. -ENOENT: not mapped)
        } catch (Throwable t) {
            return -1;
        }
    }
}
