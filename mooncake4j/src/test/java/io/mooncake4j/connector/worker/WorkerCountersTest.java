package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The public counters carry the bootstrap server's closed connections and the listener's dropped answers. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WorkerCountersTest {

    @Test
    void theLaunchedBootstrapServersEvictionsAreCounted() throws IOException {
        List<Socket> idle = new ArrayList<>();
        try (PdTestbed bed = new PdTestbed()) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            assertEquals(WorkerCounters.BootstrapClosed.NONE, p.worker.counters().bootstrapClosed());
            int cap = p.worker.bootstrapServer().orElseThrow().limits().maxConnections();
            for (int i = 0; i < cap + 4; i++) {
                Socket s = new Socket();
                idle.add(s);
                s.connect(new InetSocketAddress("127.0.0.1", p.worker.bootstrapServerPort()), 10_000);
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (p.worker.counters().bootstrapClosed().evicted() < 4) {
                assertTrue(System.nanoTime() < end, "evictions counted: " + p.worker.counters().bootstrapClosed());
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
            }
            assertEquals(p.worker.bootstrapServer().orElseThrow().evictedConnections(),
                    p.worker.counters().bootstrapClosed().evicted());
            WorkerCounters.AnswersDropped a = p.worker.counters().answersDropped();
            assertEquals(p.worker.listenerStats().answers().dropped(), a.total());
        } finally {
            for (Socket s : idle) {
                s.close();
            }
        }
    }
}
