package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Many initiator threads against one target; unregistering under load; nothing left after close. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ConcurrencyAndLifecycleTest {

    private static Set<String> mooncakeThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                .filter(n -> n.startsWith("mooncake-")).collect(Collectors.toSet());
    }

    private static long crc(MemorySegment s) {
        CRC32C c = new CRC32C();
        c.update(s.asByteBuffer());
        return c.getValue();
    }

    @Test
    void eightThreadsManyBatchesArriveIntactAndCloseLeavesNoThreads() throws Exception {
        Set<String> before = mooncakeThreads();
        int threads = 8;
        int batches = 40;
        int batch = 16;
        long block = 16384;
        long region = block * batch;
        try (HostMemoryAllocator alloc = new HostMemoryAllocator()) {
            HostMemoryStorage src = alloc.allocate(region * threads);
            HostMemoryStorage back = alloc.allocate(region * threads);
            HostMemoryStorage remote = alloc.allocate(region * threads);
            CoreEngine target = TcpEngines.started();
            CoreEngine initiator = TcpEngines.started();
            try {
                assertEquals(0, target.registerMemory(remote.address(), remote.byteSize(), "cpu:0"));
                assertEquals(0, initiator.batchRegisterMemory(new long[] {src.address(), back.address()},
                        new long[] {src.byteSize(), back.byteSize()}));
                String name = target.getLocalSegmentName();
                ExecutorService pool = Executors.newFixedThreadPool(threads);
                try {
                    List<Future<Integer>> results = new ArrayList<>();
                    for (int t = 0; t < threads; t++) {
                        int tt = t;
                        results.add(pool.submit(() -> {
                            long base = tt * region;
                            long[] s = new long[batch];
                            long[] b = new long[batch];
                            long[] r = new long[batch];
                            long[] l = new long[batch];
                            for (int i = 0; i < batch; i++) {
                                s[i] = src.address() + base + i * block;
                                b[i] = back.address() + base + i * block;
                                r[i] = remote.address() + base + (batch - 1 - i) * block;
                                l[i] = block;
                            }
                            MemorySegment mine = src.segment().asSlice(base, region);
                            MemorySegment mineBack = back.segment().asSlice(base, region);
                            int bad = 0;
                            for (int k = 0; k < batches; k++) {
                                TransferEngineContractTestSupport.fill(mine, tt * 100_000L + k);
                                long want = crc(mine);
                                mineBack.fill((byte) 0);
                                if (initiator.batchTransferSyncWrite(name, s, r, l) != 0
                                        || initiator.batchTransferSyncRead(name, b, r, l) != 0
                                        || crc(mineBack) != want) {
                                    bad++;
                                }
                            }
                            return bad;
                        }));
                    }
                    for (Future<Integer> f : results) {
                        assertEquals(0, f.get(100, TimeUnit.SECONDS), "batches lost or corrupted");
                    }
                } finally {
                    pool.shutdownNow();
                }
                assertTrue(mooncakeThreads().stream().anyMatch(n -> n.startsWith("mooncake-initiator-send")));
            } finally {
                initiator.close();
                target.close();
            }
            assertEquals(0, TcpTransport.in(target).openDataSessions(), "target sessions left");
        }
        Set<String> after = mooncakeThreads();
        after.removeAll(before);
        assertEquals(Set.of(), after, "threads left after close()");
    }

    @Test
    void unregisteringTargetMemoryDuringAnIncomingWriteAbortsItWithinTheBound() throws Exception {
        TcpConfig cfg = TcpEngines.config().withUnregisterWait(300);
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
                CoreEngine target = TcpEngines.started(cfg);
                Socket s = new Socket()) {
            HostMemoryStorage buf = alloc.allocate(1 << 20);
            assertEquals(0, target.registerMemory(buf.address(), 1 << 20, "cpu:0"));
            s.connect(new InetSocketAddress("127.0.0.1", TcpTransport.in(target).dataPort()), 5000);
            OutputStream out = s.getOutputStream();
            out.write(TcpWire.header(1 << 20, buf.address(), 0x81));
            byte[] ab = new byte[4096];
            java.util.Arrays.fill(ab, (byte) 0xAB);
            out.write(ab);
            out.flush();
            long t0 = System.nanoTime();
            long deadline = t0 + TimeUnit.SECONDS.toNanos(5);
            while (buf.segment().get(ValueLayout.JAVA_BYTE, 4095) != (byte) 0xAB && System.nanoTime() < deadline) {
                Thread.onSpinWait(); // until the session is inside the body
            }
            assertEquals((byte) 0xAB, buf.segment().get(ValueLayout.JAVA_BYTE, 4095));
            assertEquals(0, target.unregisterMemory(buf.address()));
            byte[] after = buf.segment().toArray(ValueLayout.JAVA_BYTE);
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 5000);
            try {
                byte[] ff = new byte[65536];
                java.util.Arrays.fill(ff, (byte) 0xFF);
                for (int i = 0; i < 15; i++) {
                    out.write(ff);
                }
                out.flush();
            } catch (IOException e) {
                // the target closed the session: expected
            }
            assertEquals(-1, buf.segment().mismatch(MemorySegment.ofArray(after)), "written after unregister");
        }
    }

    @Test
    void factoryKindTcpReturnsATcpEngineAndRdmaIsRefused() {
        try (var e = TransferEngines.create("tcp")) {
            assertTrue(e instanceof CoreEngine);
            assertEquals(-1, e.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", ""));
            assertEquals(-1, e.initialize("127.0.0.1", "etcd://x:2379", "tcp", ""));
        }
        assertTrue(TransferEngines.kinds().contains("tcp"));
        assertTrue(TransferEngines.kinds().contains("mock"));
    }
}
