package io.mooncake4j.connector.worker;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * Per-thread scheduler figures of this process for the probes (not a test): each thread's CPU time
 * and its time waiting on a run queue (runnable, no core), from Linux's
 * {@code /proc/self/task/<tid>/schedstat}; empty where that does not exist. Keys are
 * {@code tid/name} (the name as the kernel keeps it, at most 15 characters).
 */
final class ThreadSchedStats {

    private ThreadSchedStats() {
    }

    /** {@code tid/name} to {CPU time, run-queue wait}, ns. */
    static Map<String, long[]> snapshot() {
        Map<String, long[]> out = new HashMap<>();
        File[] tasks = new File("/proc/self/task").listFiles();
        if (tasks == null) {
            return out;
        }
        for (File task : tasks) {
            try {
                String comm = Files.readString(task.toPath().resolve("comm")).strip();
                String[] f = Files.readString(task.toPath().resolve("schedstat")).strip().split(" ");
                out.put(task.getName() + "/" + comm, new long[] {Long.parseLong(f[0]), Long.parseLong(f[1])});
            } catch (IOException | RuntimeException e) {
                // the thread ended meanwhile
            }
        }
        return out;
    }

    /** {@code after - before} per thread (a thread born in between counts from zero). */
    static Map<String, long[]> diff(Map<String, long[]> before, Map<String, long[]> after) {
        Map<String, long[]> out = new HashMap<>();
        after.forEach((k, a) -> {
            long[] b = before.getOrDefault(k, new long[2]);
            out.put(k, new long[] {a[0] - b[0], a[1] - b[1]});
        });
        return out;
    }

    /** Adds {@code d} into {@code sum}, per thread name (the tid dropped: two workers' threads share names). */
    static void addByName(Map<String, long[]> sum, Map<String, long[]> d) {
        d.forEach((k, v) -> {
            String name = k.substring(k.indexOf('/') + 1);
            long[] s = sum.computeIfAbsent(name + " [" + k.substring(0, k.indexOf('/')) + "]", x -> new long[2]);
            s[0] += v[0];
            s[1] += v[1];
        });
    }

    /** The threads whose run-queue wait grew by 0.2 ms or more, or that ran 1 ms or more: {@code tid/name=waited/ran} µs. */
    static String notable(Map<String, long[]> d) {
        StringBuilder sb = new StringBuilder("waited/ran us:");
        new TreeMap<>(d).forEach((k, v) -> {
            if (v[1] >= 200_000 || v[0] >= 1_000_000) {
                sb.append(' ').append(k).append('=').append(v[1] / 1000).append('/').append(v[0] / 1000);
            }
        });
        return sb.toString();
    }
}
