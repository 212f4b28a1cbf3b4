package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Gathering writes through sendmsg on a duplicate descriptor, on a loopback socket pair. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GatherWriterTest {

    private final Arena arena = Arena.ofShared();
    private ServerSocketChannel server;
    private SocketChannel client;
    private SocketChannel accepted;
    private GatherWriter gather;

    @BeforeEach
    void open() throws IOException {
        server = ServerSocketChannel.open();
        server.setOption(StandardSocketOptions.SO_RCVBUF, 32 * 1024); // inherited: small, fixed buffers
        server.bind(new InetSocketAddress("127.0.0.1", 0));
        client = SocketChannel.open(server.getLocalAddress());
        accepted = server.accept();
        gather = new GatherWriter();
    }

    @AfterEach
    void close() throws IOException {
        gather.close();
        client.close();
        accepted.close();
        server.close();
        arena.close();
    }

    private MemorySegment pattern(int bytes) {
        MemorySegment m = arena.allocate(bytes);
        for (int i = 0; i < bytes; i++) {
            m.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
        }
        return m;
    }

    private static byte[] concat(MemorySegment m, long[][] pieces) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (long[] p : pieces) {
            out.writeBytes(m.asSlice(p[0], p[1]).toArray(ValueLayout.JAVA_BYTE));
        }
        return out.toByteArray();
    }

    private byte[] readExactly(int n) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(n);
        while (b.hasRemaining()) {
            if (accepted.read(b) < 0) {
                throw new IOException("EOF after " + b.position() + " of " + n + " bytes");
            }
        }
        return b.array();
    }

    @Test
    void availableWhereTheTestsRun() {
        // surefire passes --add-exports java.base/sun.nio.ch=ALL-UNNAMED, as bin/mooncake4j does:
        // the engine tests then run the gathering path
        assertNull(GatherWriter.unavailableReason());
    }

    @Test
    void sendsThePiecesInOrderAndMergesAdjacentOnes() throws Exception {
        MemorySegment m = pattern(300_000);
        long[][] pieces = {{0, 10}, {10, 20}, {100_000, 150_000}, {40, 5}, {299_999, 1}};
        gather.bind(client);
        for (long[] p : pieces) {
            assertTrue(gather.hasRoom(1));
            gather.add(m.address() + p[0], p[1]);
        }
        assertEquals(4, gather.pieces(), "the second piece continues the first");
        int total = 10 + 20 + 150_000 + 5 + 1;
        assertEquals(total, gather.pending());
        CompletableFuture<byte[]> got = CompletableFuture.supplyAsync(() -> {
            try {
                return readExactly(total);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        });
        while (!gather.isEmpty()) {
            gather.writeOnce();
        }
        assertEquals(0, gather.pieces());
        assertArrayEquals(concat(m, pieces), got.get(30, TimeUnit.SECONDS));
    }

    @Test
    void partialWritesOnANonBlockingSocketResumeWhereTheyStopped() throws Exception {
        client.configureBlocking(false);
        client.setOption(StandardSocketOptions.SO_SNDBUF, 32 * 1024);
        MemorySegment m = pattern(8_200_000);
        long[][] pieces = new long[40][];
        for (int k = 0; k < pieces.length; k++) {
            pieces[k] = new long[] {k * 200_003L + 1, 200_000}; // not adjacent: 40 pieces
        }
        gather.bind(client);
        for (long[] p : pieces) {
            gather.add(m.address() + p[0], p[1]);
        }
        assertEquals(40, gather.pieces());
        ByteArrayOutputStream received = new ByteArrayOutputStream();
        ByteBuffer buf = ByteBuffer.allocate(64 * 1024);
        int wouldBlock = 0;
        while (!gather.isEmpty()) {
            if (gather.writeOnce() == 0) {
                wouldBlock++;
                buf.clear();
                int r = accepted.read(buf); // blocking: the writer filled the socket
                received.write(buf.array(), 0, r);
            }
        }
        int total = 40 * 200_000;
        received.writeBytes(readExactly(total - received.size()));
        assertTrue(wouldBlock > 0, "8 MB never filled a 32 KiB socket");
        assertArrayEquals(concat(m, pieces), received.toByteArray());
    }

    @Test
    void aWriteAfterShutdownFailsWithItsErrno() throws Exception {
        MemorySegment m = pattern(1000);
        gather.bind(client);
        client.shutdownOutput();
        gather.add(m.address(), 1000);
        IOException e = assertThrows(IOException.class, () -> {
            while (!gather.isEmpty()) {
                gather.writeOnce();
            }
        });
        assertTrue(e.getMessage().contains("EPIPE"), e.getMessage());
        gather.clear();
        assertTrue(gather.isEmpty());
    }

    @Test
    void theDuplicateIsClosedOnUnbindAndOnRebinding() throws Exception {
        // counted per socket (the link targets of /proc/self/fd), so that descriptors other threads
        // open or close meanwhile do not matter
        Map<String, Long> base = socketDescriptors();
        gather.bind(client);
        assertTrue(gather.boundTo(client));
        String clientSocket = duplicated(base, socketDescriptors());
        gather.bind(client); // same channel: nothing new
        assertEquals(base.get(clientSocket) + 1, socketDescriptors().get(clientSocket));
        gather.bind(accepted); // another channel: the first duplicate is closed
        assertTrue(gather.boundTo(accepted));
        Map<String, Long> rebound = socketDescriptors();
        assertEquals(base.get(clientSocket), rebound.get(clientSocket));
        String acceptedSocket = duplicated(base, rebound);
        assertTrue(!acceptedSocket.equals(clientSocket));
        gather.unbind();
        Map<String, Long> after = socketDescriptors();
        assertEquals(base.get(clientSocket), after.get(clientSocket));
        assertEquals(base.get(acceptedSocket), after.get(acceptedSocket));
    }

    /** The one socket that already had descriptors in {@code before} and has one more in {@code now}. */
    private static String duplicated(Map<String, Long> before, Map<String, Long> now) {
        List<String> more = before.keySet().stream().filter(k -> now.getOrDefault(k, 0L) == before.get(k) + 1)
                .toList();
        assertEquals(1, more.size(), "sockets with one more descriptor: " + more);
        return more.get(0);
    }

    @Test
    void aClosedChannelIsNotBound() throws Exception {
        client.close();
        assertThrows(ClosedChannelException.class, () -> gather.bind(client));
        assertTrue(!gather.boundTo(client));
    }

    /** Descriptors per socket ({@code socket:[inode]}) of this process. */
    private static Map<String, Long> socketDescriptors() throws IOException {
        Map<String, Long> out = new HashMap<>();
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            for (Path fd : (Iterable<Path>) fds::iterator) {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    if (target.startsWith("socket:")) {
                        out.merge(target, 1L, Long::sum);
                    }
                } catch (IOException e) {
                    // closed meanwhile (the listing's own descriptor among them)
                }
            }
        }
        return out;
    }
}
