package io.mooncake4j.engine.tcp;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Not a test: what loopback TCP carries on this machine when the bytes come from and go to a
 * large buffer, as a transfer engine's do (1 GiB of registered memory, each request at another
 * offset), against the same stream from and into one small buffer that stays in the cache, as
 * {@code iperf3}'s does. One writer and one reader thread, blocking sockets, {@code chunk} bytes
 * per write and per read (the reader fills a chunk before moving on), no framing at all. Rounds
 * interleave the four placements.
 *
 * <pre>
 * java -cp target/test-classes:target/classes io.mooncake4j.engine.tcp.LoopbackCeiling [rounds] [seconds] [chunk ...]
 * </pre>
 */
public final class LoopbackCeiling {

    private static final long BIG = 1L << 30;

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        List<Integer> chunks = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            chunks.add(Integer.parseInt(args[i]));
        }
        if (chunks.isEmpty()) {
            chunks = List.of(64 << 10, 1 << 20);
        }
        try (Arena arena = Arena.ofShared()) {
            MemorySegment src = arena.allocate(BIG, 4096);
            MemorySegment dst = arena.allocate(BIG, 4096);
            src.fill((byte) 1); // every page touched before anything is timed
            dst.fill((byte) 2);
            System.out.printf(Locale.ROOT, "round\tchunk\tsource\tdestination\tGB/s%n");
            for (int r = 1; r <= rounds; r++) {
                for (int chunk : chunks) {
                    for (String placement : new String[] {"hot/hot", "big/hot", "hot/big", "big/big"}) {
                        boolean bigSrc = placement.startsWith("big");
                        boolean bigDst = placement.endsWith("big");
                        double gbs = run(src, dst, chunk, bigSrc, bigDst, seconds);
                        System.out.printf(Locale.ROOT, "%d\t%d\t%s\t%s\t%.2f%n", r, chunk, bigSrc ? "1GiB" : "hot",
                                bigDst ? "1GiB" : "hot", gbs);
                    }
                }
            }
        }
    }

    /** Views of consecutive {@code chunk}-byte slices of {@code seg} (all of it, or only the first). */
    private static ByteBuffer[] views(MemorySegment seg, int chunk, boolean big) {
        int n = big ? (int) (BIG / chunk) : 1;
        ByteBuffer[] v = new ByteBuffer[n];
        for (int i = 0; i < n; i++) {
            v[i] = seg.asSlice((long) i * chunk, chunk).asByteBuffer();
        }
        return v;
    }

    private static double run(MemorySegment src, MemorySegment dst, int chunk, boolean bigSrc, boolean bigDst,
            double seconds) throws Exception {
        ByteBuffer[] out = views(src, chunk, bigSrc);
        ByteBuffer[] in = views(dst, chunk, bigDst);
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress("127.0.0.1", 0));
            try (SocketChannel writer = SocketChannel.open(server.getLocalAddress());
                    SocketChannel reader = server.accept()) {
                writer.socket().setTcpNoDelay(true);
                long deadline = System.nanoTime() + (long) (seconds * 1e9);
                CompletableFuture<Void> sending = CompletableFuture.runAsync(() -> {
                    try {
                        int i = 0;
                        while (System.nanoTime() < deadline) {
                            ByteBuffer b = out[i];
                            b.clear();
                            while (b.hasRemaining()) {
                                writer.write(b);
                            }
                            i = i + 1 == out.length ? 0 : i + 1;
                        }
                        writer.shutdownOutput();
                    } catch (IOException e) {
                        throw new IllegalStateException(e);
                    }
                }, r -> new Thread(r, "ceiling-writer").start());
                long bytes = 0;
                long t0 = System.nanoTime();
                int i = 0;
                while (true) {
                    ByteBuffer b = in[i];
                    b.clear();
                    int got = 0;
                    while (b.hasRemaining()) {
                        int n = reader.read(b);
                        if (n < 0) {
                            break;
                        }
                        got += n;
                    }
                    bytes += got;
                    if (b.hasRemaining()) {
                        break;
                    }
                    i = i + 1 == in.length ? 0 : i + 1;
                }
                long t1 = System.nanoTime();
                sending.get(30, TimeUnit.SECONDS);
                return bytes / ((t1 - t0) / 1e9) / 1e9;
            }
        }
    }
}
