package io.mooncake4j.internal.sys;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * Per-thread scheduling knobs for latency-critical threads (completion pollers), through FFM.
 * Linux only; elsewhere, or without native access, every call reports false and changes nothing.
 */
public final class ThreadTuning {

    /** {@code PR_SET_TIMERSLACK} ({@code linux/prctl.h}). */
    static final int PR_SET_TIMERSLACK = 29;
    private static final MethodHandle PRCTL = lookup();

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
