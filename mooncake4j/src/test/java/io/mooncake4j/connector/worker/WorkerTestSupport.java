package io.mooncake4j.connector.worker;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** Shared inputs of the worker tests. */
public final class WorkerTestSupport {

    private WorkerTestSupport() {}

    /** Waits (at most 20 s, polling every 2 ms) until {@code c} holds, else fails naming {@code what}. */
    public static void await(BooleanSupplier c, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() - deadline < 0, what + ": not within 20 s");
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(2));
        }
    }

    static MooncakeConnectorConfig config(KvRole role) {
        return MooncakeConnectorConfig.builder()
                .kvRole(role)
                .engineId("test-engine")
                .protocol("tcp")
                .hostname("127.0.0.1")
                .build();
    }

    /** Names of live threads that belong to mooncake4j. */
    static List<String> liveMooncakeThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(Thread::isAlive)
                .map(Thread::getName)
                .filter(n -> n.startsWith("mooncake-"))
                .sorted()
                .toList();
    }

    /**
     * Names of mooncake4j threads still alive after waiting up to {@code within} for each to exit
     * (a terminated executor's thread may still be on its way out when {@code close()} returns).
     */
    static List<String> mooncakeThreadsAliveAfter(Duration within) {
        long deadline = System.nanoTime() + within.toNanos();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("mooncake-")) {
                try {
                    t.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
        }
        return liveMooncakeThreads();
    }

    /**
     * Heals JeroMQ 0.6.0's lost poller registration of a new connection, for tests that use JeroMQ as
     * the independent ZMTP peer: its I/O-thread poller ({@code zmq.poll.Poller}) can lose the selector
     * registration of a connection whose connecter handle is swapped for the stream engine's in one loop
     * iteration, and the engine then never hears of readable or writable data. A socket bound to an
     * OS-assigned loopback port and closed makes {@code ctx}'s I/O thread register its handles afresh.
     * Harmless when nothing is lost.
     */
    public static void nudgeIoThread(ZContext ctx) {
        try (ZMQ.Socket s = ctx.createSocket(SocketType.PAIR)) {
            s.setLinger(0);
            s.bindToRandomPort("tcp://127.0.0.1");
        }
    }
}
