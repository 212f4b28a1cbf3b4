package io.mooncake4j.sim;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * The kernel's per-thread scheduler accounting of this JVM ({@code /proc/self/task/<tid>/schedstat}:
 * nanoseconds on a CPU, nanoseconds runnable but waiting in a run queue, timeslices; and
 * {@code status}' involuntary context switches), so a benchmark can tell a thread that ran slower
 * from one that waited for a core, whatever the machine's load. Linux only; elsewhere every
 * snapshot is empty. Threads are grouped by their kernel name ({@code comm}: the Java name cut to
 * 15 characters, e.g. {@code mooncake-p-engi} for P's step loop).
 */
final class ThreadTimes {

    /** One thread's counters at one moment. */
    record Counters(String name, long cpuNanos, long waitNanos, long slices, long involuntary) {
        Counters minus(Counters o) {
            return new Counters(name, cpuNanos - o.cpuNanos, waitNanos - o.waitNanos, slices - o.slices,
                    involuntary - o.involuntary);
        }

        Counters plus(Counters o) {
            return new Counters(name, cpuNanos + o.cpuNanos, waitNanos + o.waitNanos, slices + o.slices,
                    involuntary + o.involuntary);
        }
    }

    private final Map<Long, Counters> byTid;

    private ThreadTimes(Map<Long, Counters> byTid) {
        this.byTid = byTid;
    }

    static ThreadTimes snapshot() {
        Map<Long, Counters> out = new HashMap<>();
        Path tasks = Path.of("/proc/self/task");
        if (!Files.isDirectory(tasks)) {
            return new ThreadTimes(out);
        }
        try (Stream<Path> s = Files.list(tasks)) {
            for (Path t : (Iterable<Path>) s::iterator) {
                try {
                    String comm = Files.readString(t.resolve("comm")).strip();
                    String[] st = Files.readString(t.resolve("schedstat")).strip().split("\\s+");
                    long invol = 0;
                    for (String line : Files.readAllLines(t.resolve("status"))) {
                        if (line.startsWith("nonvoluntary_ctxt_switches:")) {
                            invol = Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
                        }
                    }
                    out.put(Long.parseLong(t.getFileName().toString()), new Counters(comm, Long.parseLong(st[0]),
                            Long.parseLong(st[1]), Long.parseLong(st[2]), invol));
                } catch (IOException | RuntimeException e) {
                    // the thread ended while being read: it is left out of this snapshot
                }
            }
        } catch (IOException e) {
            return new ThreadTimes(out);
        }
        return new ThreadTimes(out);
    }

    /**
     * What each thread group spent between {@code before} and this snapshot, by kernel name (threads
     * born in between count from zero; threads gone by now are left out).
     */
    Map<String, Counters> since(ThreadTimes before) {
        Map<String, Counters> out = new TreeMap<>();
        for (Map.Entry<Long, Counters> e : byTid.entrySet()) {
            Counters now = e.getValue();
            Counters then = before.byTid.get(e.getKey());
            Counters d = then == null || !then.name().equals(now.name()) ? now : now.minus(then);
            out.merge(now.name(), d, Counters::plus);
        }
        return out;
    }

    /**
     * CPU nanoseconds the JIT's compiler threads ({@code C1 CompilerThre*}, {@code C2 CompilerThre*})
     * have used so far (threads gone by now are left out), 0 where there is no {@code /proc}.
     */
    static long jitCpuNanos() {
        ThreadTimes now = snapshot();
        long sum = 0;
        for (Counters c : now.byTid.values()) {
            if (c.name().startsWith("C1 ") || c.name().startsWith("C2 ")) {
                sum += c.cpuNanos();
            }
        }
        return sum;
    }

    /**
     * This JVM's threads whose nice value is not 0, by nice value then kernel name, with how many
     * threads share the name (from field 19 of {@code /proc/self/task/<tid>/stat}); empty where
     * there is no {@code /proc}.
     */
    static Map<Integer, Map<String, Integer>> nonZeroNice() {
        Map<Integer, Map<String, Integer>> out = new TreeMap<>();
        Path tasks = Path.of("/proc/self/task");
        if (!Files.isDirectory(tasks)) {
            return out;
        }
        try (Stream<Path> s = Files.list(tasks)) {
            for (Path t : (Iterable<Path>) s::iterator) {
                try {
                    String stat = Files.readString(t.resolve("stat"));
                    int close = stat.lastIndexOf(')');
                    String comm = stat.substring(stat.indexOf('(') + 1, close);
                    // after "(comm) ": state is field 3, nice field 19
                    int nice = Integer.parseInt(stat.substring(close + 2).split(" ")[16]);
                    if (nice != 0) {
                        out.computeIfAbsent(nice, n -> new TreeMap<>()).merge(comm, 1, Integer::sum);
                    }
                } catch (IOException | RuntimeException e) {
                    // the thread ended while being read
                }
            }
        } catch (IOException e) {
            return out;
        }
        return out;
    }

    /** The sum of {@code groups} whose name starts with {@code prefix}. */
    static Counters sum(Map<String, Counters> groups, String prefix) {
        Counters z = new Counters(prefix, 0, 0, 0, 0);
        for (Map.Entry<String, Counters> e : groups.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                z = z.plus(e.getValue());
            }
        }
        return z;
    }
}
