package io.mooncake4j.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The workload client's streamed answers are read in bounded lines and a bounded total. */
@Timeout(60)
class WorkloadClientStreamLimitTest {

    private interface Body {
        void write(OutputStream out) throws IOException;
    }

    /** Runs {@code check} against a one-route server that streams {@code body} as server-sent events. */
    private static void withStreamingServer(Body body, Consumer<URI> check) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 8);
        ExecutorService exec = Executors.newVirtualThreadPerTaskExecutor();
        server.setExecutor(exec);
        server.createContext("/", (HttpExchange ex) -> {
            try (ex) {
                ex.getRequestBody().readAllBytes();
                ex.getResponseHeaders().add("Content-Type", "text/event-stream");
                ex.sendResponseHeaders(200, 0);
                try (OutputStream out = ex.getResponseBody()) {
                    body.write(out);
                } catch (IOException e) {
                    // the client stopped reading at its bound and closed the connection
                }
            }
        });
        server.start();
        try {
            check.accept(URI.create("http://127.0.0.1:" + server.getAddress().getPort()));
        } finally {
            server.stop(0);
            exec.shutdownNow();
            try {
                exec.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static WorkloadClient.Outcome sendStreamed(URI base) {
        WorkloadClient.Options o = new WorkloadClient.Options(base, base, "tiny", 1, 1, new int[] {4}, 0, 0,
                new int[] {2}, 1, 0, 1, 0, null, null, Duration.ofSeconds(30), 0);
        try (WorkloadClient c = new WorkloadClient(o)) {
            WorkloadClient.Item it = new WorkloadClient.Item(0, false, true, new int[] {1, 2, 3, 4}, null, 2);
            return c.send(base, it, true, System.nanoTime() + TimeUnit.SECONDS.toNanos(30));
        }
    }

    @Test
    void aLineThatNeverEndsIsAnErrorNotTheClientsMemory() throws IOException {
        byte[] chunk = new byte[64 << 10];
        Arrays.fill(chunk, (byte) 'a');
        withStreamingServer(out -> {
            out.write("data: ".getBytes(StandardCharsets.US_ASCII));
            for (int i = 0; i < 2 * (WorkloadClient.MAX_STREAM_LINE_CHARS / chunk.length) + 1; i++) {
                out.write(chunk);
            }
        }, base -> {
            WorkloadClient.Outcome r = sendStreamed(base);
            assertNull(r.text(), "no text from an endless line");
            assertNotNull(r.error());
            assertTrue(r.error().contains("a stream line is longer than " + WorkloadClient.MAX_STREAM_LINE_CHARS),
                    r.error());
        });
    }

    @Test
    void aStreamThatNeverEndsIsAnError() throws IOException {
        byte[] comment = (":" + "x".repeat(1022) + "\n").getBytes(StandardCharsets.US_ASCII); // ignored lines
        withStreamingServer(out -> {
            for (long sent = 0; sent <= WorkloadClient.MAX_STREAM_CHARS; sent += comment.length) {
                out.write(comment);
            }
        }, base -> {
            WorkloadClient.Outcome r = sendStreamed(base);
            assertNotNull(r.error());
            assertTrue(r.error().contains("the stream is longer than " + WorkloadClient.MAX_STREAM_CHARS), r.error());
        });
    }

    @Test
    void aWellFormedStreamStillReadsToItsText() throws IOException {
        withStreamingServer(out -> {
            out.write(("data: {\"choices\":[{\"text\":\"he\"}]}\r\n\r\n"
                    + "data: {\"choices\":[{\"text\":\"llo\"}]}\n\n"
                    + "data: [DONE]\n\n").getBytes(StandardCharsets.UTF_8));
        }, base -> {
            WorkloadClient.Outcome r = sendStreamed(base);
            assertNull(r.error(), () -> "error: " + r.error());
            assertEquals("hello", r.text());
            assertTrue(r.ttftNanos() > 0);
        });
    }

    @Test
    void linesEndAtNewlineWithAnOptionalCarriageReturn() throws IOException {
        try (WorkloadClient.BoundedLines in = new WorkloadClient.BoundedLines(new ByteArrayInputStream(
                "a\r\nb\n\nc".getBytes(StandardCharsets.UTF_8)))) {
            assertEquals("a", in.readLine());
            assertEquals("b", in.readLine());
            assertEquals("", in.readLine());
            assertEquals("c", in.readLine());
            assertNull(in.readLine());
        }
    }
}
