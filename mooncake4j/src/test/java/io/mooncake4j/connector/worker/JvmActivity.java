package io.mooncake4j.connector.worker;

import java.lang.reflect.Method;
import java.util.List;

/**
 * The JVM's own work that competes with a probe's threads for the cores (not a test): the JIT
 * compilers' accumulated time and the garbage collectors' count and time, from
 * {@code java.lang.management} through reflection (the module does not require
 * {@code java.management}; core reflection reads any module). Each figure is -1 where the JVM does
 * not offer it.
 */
final class JvmActivity {

    private JvmActivity() {
    }

    /** Milliseconds the JIT compilers have spent so far (all compiler threads), or -1. */
    static long compileMillis() {
        try {
            Class<?> mf = Class.forName("java.lang.management.ManagementFactory");
            Object bean = mf.getMethod("getCompilationMXBean").invoke(null);
            if (bean == null) {
                return -1;
            }
            Class<?> type = Class.forName("java.lang.management.CompilationMXBean");
            if (!(Boolean) type.getMethod("isCompilationTimeMonitoringSupported").invoke(bean)) {
                return -1;
            }
            return (Long) type.getMethod("getTotalCompilationTime").invoke(bean);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return -1;
        }
    }

    /**
     * CPU nanoseconds the JIT compiler threads ({@code C1/C2 CompilerThread*}) have used so far, from
     * {@link ThreadSchedStats} (Linux), else -1. Unlike {@link #compileMillis} (elapsed time per
     * compilation, which grows while a compiler thread waits for a core) it is the compilers' load.
     */
    static long jitCpuNanos() {
        java.util.Map<String, long[]> all = ThreadSchedStats.snapshot();
        if (all.isEmpty()) {
            return -1;
        }
        long sum = 0;
        for (java.util.Map.Entry<String, long[]> e : all.entrySet()) {
            String name = e.getKey().substring(e.getKey().indexOf('/') + 1);
            if (name.startsWith("C1 Compiler") || name.startsWith("C2 Compiler")) {
                sum += e.getValue()[0];
            }
        }
        return sum;
    }

    /** {collections so far, their milliseconds so far}, over every collector, or {-1, -1}. */
    static long[] gc() {
        try {
            Class<?> mf = Class.forName("java.lang.management.ManagementFactory");
            Class<?> type = Class.forName("java.lang.management.GarbageCollectorMXBean");
            Method count = type.getMethod("getCollectionCount");
            Method time = type.getMethod("getCollectionTime");
            long n = 0;
            long ms = 0;
            for (Object bean : (List<?>) mf.getMethod("getGarbageCollectorMXBeans").invoke(null)) {
                n += Math.max(0, (Long) count.invoke(bean));
                ms += Math.max(0, (Long) time.invoke(bean));
            }
            return new long[] {n, ms};
        } catch (ReflectiveOperationException | RuntimeException e) {
            return new long[] {-1, -1};
        }
    }
}
