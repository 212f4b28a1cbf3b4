package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.store.wire.StructPack;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Lifecycle and liveness against {@link FakeMaster} through the real socket: close waits for a call
 * in flight (or fails it) before freeing memory; timeouts on a connection that answers nothing drop
 * it and the next call reconnects, while a slow call on a live connection does not; async calls
 * return before the connection exists; a read whose replica is unreachable is read from another.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StoreLivenessTest {

    private static final Duration WAIT = FakeMasterStoreTest.WAIT;

    private static byte[] voidOk(MasterCodec.Rpc rpc) {
        return StructPack.encode(rpc.result(), w -> w.bool(true));
    }

    @Test
    void closeWaitsForAGetInFlightWhichStillSucceeds() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient holder = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 4L << 20))) {
            MooncakeStoreClient c = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 0)
                    .withTimings(Duration.ofSeconds(5), Duration.ofSeconds(30)));
            byte[] v = RealMasterTest.pattern(200_000, 3);
            assertEquals(0, c.put("inflight", v, ReplicateConfig.defaults()));
            // hold the master's answer to the get until close has begun
            m.fault(r -> {
                if ("GetReplicaList".equals(r.rpcName())) {
                    try {
                        release.await(60, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return null;
            });
            AtomicReference<Result<byte[]>> got = new AtomicReference<>();
            long[] at = new long[2];
            Thread getter = Thread.ofPlatform().start(() -> {
                got.set(c.getValue("inflight"));
                at[0] = System.nanoTime();
            });
            MasterProcess.await("the get at the master", () -> m.calls("GetReplicaList") == 1, WAIT);
            assertEquals(1, c.callsInFlight());
            Thread closer = Thread.ofPlatform().start(() -> {
                c.close();
                at[1] = System.nanoTime();
            });
            MasterProcess.await("close to begin", c::isClosed, WAIT);
            release.countDown();
            getter.join(WAIT.toMillis());
            closer.join(WAIT.toMillis());
            assertFalse(getter.isAlive() || closer.isAlive());
            assertTrue(got.get().ok(), got.get().toString());
            assertArrayEquals(v, got.get().value());
            assertTrue(at[0] - at[1] <= 0, "close returned before the get it waited for");
        } finally {
            release.countDown();
        }
    }

    @Test
    void closeFailsAGetWhoseAnswerNeverComesWithinTheDeadline() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        try (FakeMaster m = new FakeMaster()) {
            MooncakeStoreClient c = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 1L << 20)
                    .withTimings(Duration.ofSeconds(30), Duration.ofSeconds(30)));
            m.fault(r -> {
                if ("GetReplicaList".equals(r.rpcName())) {
                    try {
                        release.await(60, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return null;
            });
            CompletableFuture<Result<byte[]>> got = CompletableFuture.supplyAsync(() -> c.getValue("never"));
            MasterProcess.await("the get at the master", () -> m.calls("GetReplicaList") == 1, WAIT);
            // the call deadline is 30 s; close waits its grace (2 s), then fails the call by dropping
            // the master connection, waits for it to end, and only then frees
            long t0 = System.nanoTime();
            c.close();
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(got.isDone(), "close returned while the get was still in flight");
            assertTrue(ms >= MooncakeStoreClient.CLOSE_GRACE.toMillis() - 100 && ms < 20_000, "close took " + ms + " ms");
            assertEquals(ErrorCode.RPC_FAIL, got.join().errorCode());
            assertEquals(0, c.callsInFlight());
        } finally {
            release.countDown();
        }
    }

    @Test
    void timeoutsOnASilentConnectionDropItAndTheNextCallReconnects() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MasterClient c = new MasterClient(m.address(), Duration.ofMillis(1500), "default")) {
            assertEquals(Result.ok(false), c.existKey("k"));
            m.silent(true);
            for (int i = 0; i < 2; i++) {
                StoreExceptionCheck.code(ErrorCode.RPC_TIMEOUT, () -> c.existKey("k"));
            }
            assertEquals(1, c.rpc().silentDrops());
            m.silent(false);
            assertEquals(Result.ok(false), c.existKey("k"));
            assertEquals(2, c.connects());
            assertEquals(2, m.connections());
        }
    }

    @Test
    void aSlowCallOnALiveConnectionDoesNotDropIt() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MasterClient c = new MasterClient(m.address(), Duration.ofSeconds(2), "default")) {
            m.fault(r -> "GetReplicaList".equals(r.rpcName()) ? FakeMaster.NO_ANSWER : null);
            for (int i = 1; i <= 3; i++) {
                CompletableFuture<Integer> slow = CompletableFuture.supplyAsync(() -> {
                    try {
                        c.getReplicaList("slow");
                        return 0;
                    } catch (StoreException e) {
                        return e.errorCode();
                    }
                });
                int n = i;
                MasterProcess.await("the slow call sent", () -> m.calls("GetReplicaList") == n, WAIT);
                // an answer after the slow call was sent: the connection is alive
                assertEquals(Result.ok(false), c.existKey("k"));
                assertEquals(ErrorCode.RPC_TIMEOUT.code(), slow.join());
            }
            assertEquals(0, c.rpc().silentDrops());
            assertEquals(1, c.connects());
        }
    }

    @Test
    void anAsyncCallReturnsBeforeTheConnectionExists() throws Exception {
        // a listener whose accept queue is full: connecting to it hangs (the SYNs are dropped)
        try (ServerSocket full = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            List<Socket> fillers = new ArrayList<>();
            try {
                for (int i = 0; i < 8; i++) {
                    Socket s = new Socket();
                    try {
                        s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), full.getLocalPort()), 200);
                        fillers.add(s);
                    } catch (java.io.IOException e) {
                        s.close();
                        break;
                    }
                }
                try (MasterClient c = new MasterClient(
                        new InetSocketAddress(InetAddress.getLoopbackAddress(), full.getLocalPort()), Duration.ofSeconds(2),
                        "default")) {
                    long t0 = System.nanoTime();
                    CompletableFuture<Result<PingResult>> f = c.pingAsync(Uuid.random());
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    assertTrue(ms < 1_000, "pingAsync blocked " + ms + " ms");
                    // nobody answers: the call ends at its deadline, as an exception of the one type
                    Throwable e = assertThrowsCompletion(f);
                    assertTrue(e instanceof StoreException, e.toString());
                    int code = ((StoreException) e).errorCode();
                    assertTrue(code == ErrorCode.RPC_TIMEOUT.code() || code == ErrorCode.RPC_FAIL.code(), e.toString());
                }
            } finally {
                for (Socket s : fillers) {
                    s.close();
                }
            }
        }
    }

    private static Throwable assertThrowsCompletion(CompletableFuture<?> f) {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            return e.getCause();
        } catch (Exception e) {
            throw new AssertionError("no outcome within 30 s", e);
        }
        throw new AssertionError("the call succeeded against a master that cannot answer");
    }

    @Test
    void aReadWhoseReplicaIsUnreachableIsReadFromTheOtherReplica() throws Exception {
        try (FakeMaster m = new FakeMaster();
                MooncakeStoreClient h2 = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 4L << 20));
                MooncakeStoreClient reader = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 0))) {
            MooncakeStoreClient h1 = MooncakeStoreClient.setup(FakeMasterStoreTest.config(m, 4L << 20));
            ReplicateConfig two = new ReplicateConfig(2, 0, 0, ReplicateConfig.SOFT_PIN_PRESERVE, null, false,
                    List.of(h1.getHostname(), h2.getHostname()), "", List.of(), false, 0, "", null);
            byte[] v = RealMasterTest.pattern(100_000, 9);
            assertEquals(0, reader.put("twice", v, two));
            assertEquals(List.of(h1.getHostname(), h2.getHostname()), m.placement("twice"));
            // h1 goes away while the master still lists its replica (its unmount never arrives)
            m.fault(r -> "UnmountSegment".equals(r.rpcName())
                    ? FakeMaster.reply(r.seq(), 0, voidOk(MasterCodec.UNMOUNT_SEGMENT)) : null);
            h1.close();
            assertEquals(List.of(h1.getHostname(), h2.getHostname()), m.placement("twice"));
            Result<byte[]> got = reader.getValue("twice");
            assertTrue(got.ok(), got.toString());
            assertArrayEquals(v, got.value());
            m.fault(null);
        }
    }

    /** Asserts a StoreException with a code. */
    static final class StoreExceptionCheck {
        static void code(ErrorCode code, org.junit.jupiter.api.function.Executable call) {
            StoreException e = org.junit.jupiter.api.Assertions.assertThrows(StoreException.class, call);
            assertEquals(code.code(), e.errorCode(), e.getMessage());
        }
    }
}
