package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.proxy.ProxyConfig;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ProxyCommandTest {

    @Test
    void shouldReadRepeatedPrefillsWithOptionalBootstrapPortsLikeVllmsProxy() {
        ProxyConfig c = ProxyCommand.parse(List.of("--prefill", "http://10.0.0.1:8100", "9000", "--prefill",
                "http://10.0.0.2:8100", "--prefill", "http://10.0.0.3:8100", "none", "--decode", "http://10.0.0.4:8200",
                "--decode=http://10.0.0.5:8200", "--port", "0", "--host", "0.0.0.0", "--request-timeout", "30"));
        assertEquals(List.of("http://10.0.0.1:9000", "http://10.0.0.2:8998", "http://10.0.0.3:8998"),
                c.prefill().stream().map(ProxyConfig.PrefillNode::bootstrapAddr).toList());
        assertEquals(List.of(URI.create("http://10.0.0.4:8200"), URI.create("http://10.0.0.5:8200")),
                c.decode().stream().map(ProxyConfig.DecodeNode::url).toList());
        assertEquals(0, c.port());
        assertEquals("0.0.0.0", c.host());
        assertEquals(Duration.ofSeconds(30), c.requestTimeout());
        assertEquals(8000, ProxyCommand.parse(List.of("--prefill", "http://a:1", "--decode", "http://b:2")).port());
    }

    @Test
    void shouldRejectBadCommandLinesWithUsageErrors() {
        assertTrue(message("--decode", "http://b:2").contains("--prefill"));
        assertTrue(message("--prefill", "http://a:1").contains("--decode"));
        assertTrue(message("--prefill", "http://a:1", "x", "--decode", "http://b:2").contains("'x'"));
        assertTrue(message("--prefill", "http://a:1", "--decode", "http://b:2", "stray").contains("unexpected argument"));
        assertTrue(message("--prefill", "a:1", "--decode", "http://b:2").contains("http://host:port"));
        assertTrue(message("--prefill", "http://a:1", "--decode", "http://b:2", "--prot", "1").contains("unknown flag"));
        assertTrue(message("--prefill", "http://a:1", "--decode", "http://b:2", "--port").contains("needs a value"));
        assertTrue(message("--prefill", "http://a:1", "--decode", "http://b:2/v1").contains("no path"));
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = Main.run(new String[] {"proxy", "--decode", "http://b:2"}, new PrintStream(new ByteArrayOutputStream()),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, rc);
        String text = err.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("mooncake4j proxy: ") && text.contains("--prefill"), text);
        assertFalse(text.contains("usage: bin/mooncake4j proxy"), "one error line, no usage dump: " + text);
    }

    @Test
    void shouldTakeTheHttpLimitsFromFlagsOverTheEnvironment() {
        ProxyConfig c = ProxyCommand.parse(List.of("--prefill", "http://a:1", "--decode", "http://b:2",
                "--http-header-timeout", "3", "--http-body-slots-per-client=4", "--http-in-flight-per-client", "100"),
                Map.of(io.mooncake4j.http.HttpLimits.ENV_HEADER_TIMEOUT, "9",
                        io.mooncake4j.http.HttpLimits.ENV_MIN_BODY_RATE, "512"));
        assertEquals(Duration.ofSeconds(3), c.http().headerTimeout());
        assertEquals(4, c.http().bodySlotsPerClient());
        assertEquals(100, c.http().inFlightPerClient());
        assertEquals(512, c.http().minBodyRate());
        assertTrue(message("--prefill", "http://a:1", "--decode", "http://b:2", "--http-body-slots", "x")
                .contains("--http-body-slots"));
    }

    private static String message(String... args) {
        return assertThrows(Flags.UsageException.class, () -> ProxyCommand.parse(List.of(args))).getMessage();
    }

    @Test
    void shouldServe503UntilItsPrefillIsUpAndStopCleanly() throws Exception {
        CountDownLatch stop = new CountDownLatch(1);
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8);
        // Port 1 on loopback: nothing listens, so the prefill never becomes ready.
        CompletableFuture<Integer> rc = CompletableFuture.supplyAsync(() -> {
            try {
                return new ProxyCommand(stop).run(Flags.parse(List.of("--prefill", "http://127.0.0.1:1", "--decode",
                        "http://127.0.0.1:1", "--port", "0")), out, out);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        Pattern listening = Pattern.compile("listening on http://127\\.0\\.0\\.1:(\\d+)");
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        Matcher m;
        while (!(m = listening.matcher(buf.toString(StandardCharsets.UTF_8))).find()) {
            assertTrue(System.nanoTime() < end, "no listening line: " + buf);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
        int port = Integer.parseInt(m.group(1));
        try (HttpClient c = HttpClient.newHttpClient()) {
            HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port
                    + "/v1/completions")).POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"x\"}")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(503, r.statusCode());
            assertTrue(r.body().contains("not ready") && r.body().contains("http://127.0.0.1:1"), r.body());
        }
        stop.countDown();
        assertEquals(0, rc.get(20, TimeUnit.SECONDS));
        assertTrue(buf.toString(StandardCharsets.UTF_8).contains("stopping; 0 requests"), buf.toString());
    }
}
