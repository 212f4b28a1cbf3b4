package io.mooncake4j.internal.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.BitSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class ThreadTuningTest {

    @Test
    void cpuListsParseAsTheKernelWritesThem() {
        BitSet b = ThreadTuning.parseCpuList("0-3,8,10-11\n");
        assertEquals("{0, 1, 2, 3, 8, 10, 11}", b.toString());
        assertTrue(ThreadTuning.parseCpuList("").isEmpty());
        assertTrue(ThreadTuning.parseCpuList("3-1").isEmpty());
        assertTrue(ThreadTuning.parseCpuList("x").isEmpty());
    }

    @Test
    void aPollerStyleThreadCanSetItsTimerSlackAndAffinity() throws Exception {
        java.nio.file.Path status = java.nio.file.Path.of("/proc/self/status");
        org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.exists(status), "Linux procfs needed");
        int allowed = 0; // the first CPU of this process's cpuset
        for (String line : java.nio.file.Files.readAllLines(status)) {
            if (line.startsWith("Cpus_allowed_list:")) {
                allowed = ThreadTuning.parseCpuList(line.substring(line.indexOf(':') + 1)).nextSetBit(0);
            }
        }
        int cpu = allowed;
        boolean[] ok = new boolean[3];
        Thread t = Thread.ofPlatform().start(() -> {
            ok[0] = ThreadTuning.setTimerSlackNanos(1_000);
            BitSet one = new BitSet();
            one.set(cpu);
            ok[1] = ThreadTuning.bindToCpus(one);
            ok[2] = ThreadTuning.bindToCpus(new BitSet());
        });
        t.join();
        assertTrue(ok[0], "PR_SET_TIMERSLACK");
        assertTrue(ok[1], "sched_setaffinity to CPU " + cpu);
        assertFalse(ok[2], "an empty set changes nothing");
    }

    @Test
    void aThreadCanLowerItsOwnPriorityAndTheThreadsItStartsInheritIt() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.exists(java.nio.file.Path.of("/proc/self/stat")),
                "Linux needed");
        int[] seen = new int[4];
        boolean[] ok = new boolean[3];
        Thread t = Thread.ofPlatform().start(() -> {
            seen[0] = ThreadTuning.nice();
            ok[0] = ThreadTuning.setNice(seen[0] + 3 > 19 ? 19 : seen[0] + 3);
            seen[1] = ThreadTuning.nice();
            Thread child = Thread.ofPlatform().start(() -> seen[2] = ThreadTuning.nice());
            try {
                child.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            ok[1] = ThreadTuning.setNice(20);
            ok[2] = ThreadTuning.setNice(-21);
            seen[3] = ThreadTuning.nice();
        });
        t.join();
        int main = ThreadTuning.nice();
        assertTrue(ok[0], "setpriority");
        assertEquals(Math.min(19, seen[0] + 3), seen[1], "the thread's own nice value");
        assertEquals(seen[1], seen[2], "a thread started afterwards inherits it");
        assertFalse(ok[1] || ok[2], "out of range: refused");
        assertEquals(seen[1], seen[3], "a refused value changes nothing");
        assertEquals(seen[0], main, "per thread: the caller's is unchanged");
    }
}
