package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The data port's status frames for pipelined WRITEs all arrive, in order, whether the client
 * streams its requests back to back, waits for each status, or shuts down its output right after
 * its last request.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DataPortPipeliningTest {

    private static final int BLOCK = 64 * 1024;
    private static final int COUNT = 26; // 1.6 MiB, more than the socket buffers hold at first
    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine engine;
    private HostMemoryStorage buf;

    @BeforeEach
    void start() {
        engine = TcpEngines.started();
        buf = alloc.allocate((long) BLOCK * COUNT);
        assertEquals(0, engine.registerMemory(buf.address(), (long) BLOCK * COUNT, "cpu:0"));
    }

    @AfterEach
    void stop() {
        engine.close();
        alloc.close();
    }

    private static byte[] body(int k) {
        byte[] b = new byte[BLOCK];
        for (int i = 0; i < BLOCK; i++) {
            b[i] = (byte) (i * 31 + k * 7 + 1);
        }
        return b;
    }

    /** All requests in one stream (headers and bodies back to back), optionally followed by a half-close. */
    private byte[] send(boolean halfClose) throws Exception {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", TcpTransport.in(engine).dataPort()), 5000);
            s.setSoTimeout(20_000);
            ByteArrayOutputStream all = new ByteArrayOutputStream();
            for (int k = 0; k < COUNT; k++) {
                all.write(TcpWire.header(BLOCK, buf.address() + (long) k * BLOCK, TcpWire.OP_WRITE | TcpWire.V2_FLAG));
                all.write(body(k));
            }
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            // the reader runs alongside: the target's replies must not wait for the whole stream
            var statuses = new java.util.concurrent.CompletableFuture<byte[]>();
            Thread reader = Thread.ofVirtual().start(() -> {
                try {
                    statuses.complete(in.readNBytes(COUNT * TcpWire.STATUS_BYTES));
                } catch (Exception e) {
                    statuses.completeExceptionally(e);
                }
            });
            out.write(all.toByteArray());
            out.flush();
            if (halfClose) {
                s.shutdownOutput();
            }
            byte[] got = statuses.get(20, TimeUnit.SECONDS);
            reader.join();
            return got;
        }
    }

    private void assertAllOk(byte[] statuses) {
        assertEquals(COUNT * TcpWire.STATUS_BYTES, statuses.length, "one status frame per request");
        for (int k = 0; k < COUNT; k++) {
            byte[] one = java.util.Arrays.copyOfRange(statuses, k * 8, k * 8 + 8);
            assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), one, "status of request " + k);
            assertArrayEquals(body(k), buf.segment().asSlice((long) k * BLOCK, BLOCK).toArray(ValueLayout.JAVA_BYTE),
                    "body of request " + k);
        }
    }

    @Test
    void pipelinedWritesGetEveryStatusInOrder() throws Exception {
        assertAllOk(send(false));
    }

    @Test
    void statusFramesAreSentAfterAHalfClose() throws Exception {
        assertAllOk(send(true));
    }

    @Test
    void aClientWaitingForEachStatusIsAnsweredWithoutFurtherInput() throws Exception {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", TcpTransport.in(engine).dataPort()), 5000);
            s.setSoTimeout(20_000);
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            for (int k = 0; k < 4; k++) {
                out.write(TcpWire.header(BLOCK, buf.address() + (long) k * BLOCK, TcpWire.OP_WRITE | TcpWire.V2_FLAG));
                out.write(body(k));
                // nothing follows until this status comes
                assertArrayEquals(TcpWire.status(TcpWire.STATUS_OK), in.readNBytes(8), "status of request " + k);
            }
        }
    }
}
