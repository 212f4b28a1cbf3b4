package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The second process of {@link ShmTwoProcessTest}: a shareable buffer (1 MiB, pattern 1) and a
 * private one (64 KiB, pattern 2), registered with an {@link ShmTransport}; prints
 * {@code DESC <descriptor JSON>}, then answers {@code check shared|private <seed>} with
 * {@code OK} or {@code BAD <offset>} and {@code quit} by exiting.
 */
public final class ShmChild {

    private ShmChild() {}

    public static void main(String[] args) throws Exception {
        try (HostMemoryAllocator alloc = new HostMemoryAllocator(); Arena arena = Arena.ofShared()) {
            HostMemoryStorage shared = alloc.allocateShareable(1 << 20);
            MemorySegment priv = arena.allocate(64 << 10, 4096);
            ShmFixtures.fill(shared.segment(), 1);
            ShmFixtures.fill(priv, 2);
            ShmTransport t = new ShmTransport();
            t.install(null);
            List<LocalBuffer> bufs = List.of(LocalBuffer.of(shared.address(), shared.byteSize(), "cpu:0"),
                    LocalBuffer.of(priv.address(), priv.byteSize(), "cpu:0"));
            t.registerBuffers(bufs);
            String json = ShmFixtures.describe("child:1", bufs, t).toJson().strip();
            System.out.println("DESC " + json);
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                String[] w = line.split(" ");
                if (w[0].equals("quit")) {
                    break;
                }
                if (w[0].equals("check")) {
                    MemorySegment s = w[1].equals("shared") ? shared.segment() : priv;
                    long bad = ShmFixtures.firstMismatch(s, Long.parseLong(w[2]));
                    System.out.println(bad < 0 ? "OK" : "BAD " + bad);
                    System.out.flush();
                }
            }
            t.uninstall();
        }
    }
}
