package io.mooncake4j.internal.sys;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * Per-thread scheduling knobs for latency-critical threads (completion pollers) and background ones
 * (P's transfer threads, {@link #setNice}), through FFM.
 * Linux only; elsewhere, or without native access, every call reports false and changes nothing.
 */
public final class ThreadTuning {

    /** {@code PR_SET_TIMERSLACK} ({@code linux/prctl.h}). */
    static final int PR_SET_TIMERSLACK = 29;
    private static final MethodHandle PRCTL = lookup();
    private static final MethodHandle SCHED_SETAFFINITY = lookupAffinity();
    /** {@code PRIO_PROCESS} ({@code sys/resource.h}); with who = 0 Linux applies it to the calling thread. */
    static final int PRIO_PROCESS = 0;
    private static final MethodHandle SETPRIORITY = lookupPriority("setpriority", true);
    private static final MethodHandle GETPRIORITY = lookupPriority("getpriority", false);

    private ThreadTuning() {}

    private static MethodHandle lookup() {
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            return null;
        }
        try {
            Linker linker = Linker.nativeLinker();
            // int prctl(int option, ...): here (option, unsigned long slack)
            return linker.defaultLookup().find("prctl").map(a -> linker.downcallHandle(a,
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG),
                    Linker.Option.firstVariadicArg(1))).orElse(null);
        } catch (RuntimeException e) { // IllegalCallerException without native access
            return null;
        }
    }

    private static MethodHandle lookupAffinity() {
        if (PRCTL == null) {
            return null;
        }
        try {
            Linker linker = Linker.nativeLinker();
            // int sched_setaffinity(pid_t pid, size_t cpusetsize, const cpu_set_t *mask); pid 0 = this thread
            return linker.defaultLookup().find("sched_setaffinity").map(a -> linker.downcallHandle(a,
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG,
                            ValueLayout.ADDRESS))).orElse(null);
        } catch (RuntimeException e) {
            return null;
        }
    }

    private static MethodHandle lookupPriority(String name, boolean set) {
        if (PRCTL == null) {
            return null;
        }
        try {
            Linker linker = Linker.nativeLinker();
            // int setpriority(int which, id_t who, int prio); int getpriority(int which, id_t who)
            FunctionDescriptor fd = set
                    ? FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                            ValueLayout.JAVA_INT)
                    : FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT);
            return linker.defaultLookup().find(name).map(a -> linker.downcallHandle(a, fd)).orElse(null);
        } catch (RuntimeException e) {
            return null;
        }
    }

    /**
     * Sets the calling thread's nice value ({@code setpriority(PRIO_PROCESS, 0, nice)}: on Linux a
     * per-thread attribute, inherited by the threads it starts afterwards). Raising it (a lower
     * priority: the thread yields a contended core to nice-0 threads) needs no privilege; lowering
     * it below the current value usually does. True when the kernel accepted it.
     *
     * @param nice -20 (highest priority) to 19 (lowest)
     */
    public static boolean setNice(int nice) {
        if (SETPRIORITY == null || nice < -20 || nice > 19) {
            return false;
        }
        try {
            return (int) SETPRIORITY.invokeExact(PRIO_PROCESS, 0, nice) == 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /**
     * The calling thread's nice value ({@code getpriority(PRIO_PROCESS, 0)}), or
     * {@link Integer#MIN_VALUE} where it cannot be read (not Linux, no native access).
     */
    public static int nice() {
        if (GETPRIORITY == null) {
            return Integer.MIN_VALUE;
        }
        try {
            return (int) GETPRIORITY.invokeExact(PRIO_PROCESS, 0);
        } catch (Throwable t) {
            return Integer.MIN_VALUE;
        }
    }

    /**
     * Restricts the calling thread to {@code cpus} ({@code sched_setaffinity(0, ...)}). True when
     * the kernel accepted it; false (and nothing changed) for an empty set or when it refused
     * (for example CPUs outside this process's cpuset).
     */
    public static boolean bindToCpus(java.util.BitSet cpus) {
        if (SCHED_SETAFFINITY == null || cpus.isEmpty()) {
            return false;
        }
        long[] words = cpus.toLongArray();
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment mask = arena.allocate(ValueLayout.JAVA_LONG, Math.max(16, words.length));
            for (int i = 0; i < words.length; i++) {
                mask.setAtIndex(ValueLayout.JAVA_LONG, i, words[i]);
            }
            return (int) SCHED_SETAFFINITY.invokeExact(0, mask.byteSize(), mask) == 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /** CPUs of a Linux cpulist ({@code "0-15,32-47"}, as in {@code /sys/devices/system/node/node0/cpulist}); empty when malformed. */
    public static java.util.BitSet parseCpuList(String list) {
        java.util.BitSet out = new java.util.BitSet();
        try {
            for (String part : list.strip().split(",")) {
                if (part.isBlank()) {
                    continue;
                }
                int dash = part.indexOf('-');
                int from = Integer.parseInt((dash < 0 ? part : part.substring(0, dash)).strip());
                int to = dash < 0 ? from : Integer.parseInt(part.substring(dash + 1).strip());
                if (from < 0 || to < from || to > 65535) {
                    return new java.util.BitSet();
                }
                out.set(from, to + 1);
            }
        } catch (NumberFormatException e) {
            return new java.util.BitSet();
        }
        return out;
    }

    /**
     * Sets the calling thread's timer slack ({@code prctl(PR_SET_TIMERSLACK)}): how much later
     * than asked the kernel may end a timed sleep so that it can batch wake-ups. The default, 50 µs,
     * turns a 20 µs park into about 70 µs. True when the kernel accepted it.
     */
    public static boolean setTimerSlackNanos(long nanos) {
        if (PRCTL == null || nanos <= 0) {
            return false;
        }
        try {
            return (int) PRCTL.invokeExact(PR_SET_TIMERSLACK, nanos) == 0;
        } catch (Throwable t) {
            return false;
        }
    }
}
