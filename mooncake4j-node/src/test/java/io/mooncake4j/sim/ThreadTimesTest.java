package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.sys.ThreadTuning;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The bench's reading of the kernel's per-thread figures ({@link ThreadTimes}). */
@Timeout(value = 20, unit = TimeUnit.SECONDS)
class ThreadTimesTest {

    @Test
    void aThreadThatLoweredItsPriorityIsListedAtItsNiceValueAndItsChildrenWithIt() throws Exception {
        Assumptions.assumeTrue(Files.isDirectory(Path.of("/proc/self/task")), "Linux procfs needed");
        CountDownLatch niced = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        boolean[] ok = new boolean[1];
        // names of at most 15 characters: the kernel keeps them whole
        Thread t = Thread.ofPlatform().name("ttft-nice-test").start(() -> {
            ok[0] = ThreadTuning.setNice(17);
            Thread child = Thread.ofPlatform().name("ttft-nice-child").start(() -> {
                niced.countDown();
                awaitQuietly(done);
            });
            awaitQuietly(done);
            try {
                child.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        try {
            assertTrue(niced.await(10, TimeUnit.SECONDS), "the child started");
            Map<Integer, Map<String, Integer>> n = ThreadTimes.nonZeroNice();
            assertTrue(ok[0], "setpriority");
            assertEquals(1, n.getOrDefault(17, Map.of()).getOrDefault("ttft-nice-test", 0), n.toString());
            assertEquals(1, n.getOrDefault(17, Map.of()).getOrDefault("ttft-nice-child", 0), n.toString());
        } finally {
            done.countDown();
            t.join();
        }
    }

    @Test
    void theCompilerThreadsCpuTimeNeverGoesBackwards() {
        Assumptions.assumeTrue(Files.isDirectory(Path.of("/proc/self/task")), "Linux procfs needed");
        long a = ThreadTimes.jitCpuNanos();
        long b = ThreadTimes.jitCpuNanos();
        assertTrue(a > 0, "a JVM that ran JUnit has compiled something: " + a);
        assertTrue(b >= a, a + " then " + b);
    }

    private static void awaitQuietly(CountDownLatch l) {
        try {
            l.await(15, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
