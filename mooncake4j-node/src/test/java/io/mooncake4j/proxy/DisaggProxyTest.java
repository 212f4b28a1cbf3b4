package io.mooncake4j.proxy;

import io.mooncake4j.internal.http.RawHttp;
import io.mooncake4j.internal.json.Json;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@link DisaggProxy} in front of in-process {@link FakeNode}s that speak vLLM's P/D contract. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DisaggProxyTest {

    private final List<AutoCloseable> open = new ArrayList<>();
    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    private final FakeNode.Kv kv = new FakeNode.Kv();

    @AfterEach
    void closeAll() throws Exception {
        for (int i = open.size() - 1; i >= 0; i--) {
            open.get(i).close();
        }
        client.close();
    }

    private <T extends AutoCloseable> T keep(T t) {
        open.add(t);
        return t;
    }

    /** A proxy that probes every 20 ms. */
    private DisaggProxy proxy(List<FakeNode> ps, List<FakeNode> ds) throws IOException {
        return proxy(ps, ds, Duration.ofMillis(20));
    }

    /**
     * A proxy probing at {@code interval}; the failure tests use an hour, so that only a failed request
     * (which wakes the prober) takes a node out of rotation, never a probe racing the test.
     */
    private DisaggProxy proxy(List<FakeNode> ps, List<FakeNode> ds, Duration interval) throws IOException {
        ProxyConfig.Builder b = ProxyConfig.builder().port(0).probeInterval(interval)
                .requestTimeout(Duration.ofSeconds(20));
        ps.forEach(p -> b.addPrefill(p.url(), p.bootstrapPort()));
        ds.forEach(d -> b.addDecode(d.url()));
        return keep(DisaggProxy.start(b.build()));
    }

    private static void await(BooleanSupplier cond, String what) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting for " + what);
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }

    private HttpResponse<String> post(DisaggProxy p, String path, String body) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + p.port() + path))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private CompletableFuture<HttpResponse<String>> postAsync(DisaggProxy p, String prompt, boolean stream) {
        String body = Json.write(Map.of("model", "fake", "prompt", prompt, "max_tokens", 16, "stream", stream,
                "stream_options", Map.of("include_usage", true)));
        return client.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + p.port() + "/v1/completions"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static final Pattern TEXT = Pattern.compile("\"text\":\"([^\"]*)\"");

    /** The completion text of a plain or streamed answer; null when a stream did not end with [DONE]. */
    private static String text(HttpResponse<String> r, boolean stream) {
        if (!stream) {
            @SuppressWarnings("unchecked")
            Map<String, Object> c = (Map<String, Object>) ((List<?>) Json.parseObject(r.body()).get("choices")).get(0);
            return (String) c.get("text");
        }
        if (!r.body().endsWith("data: [DONE]\n\n")) {
            return null;
        }
        StringBuilder sb = new StringBuilder();
        Matcher m = TEXT.matcher(r.body());
        while (m.find()) {
            sb.append(m.group(1));
        }
        return sb.toString();
    }

    private String health(DisaggProxy p) {
        try {
            return client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + p.port() + "/health")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
        } catch (IOException | InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    private static String errorMessage(HttpResponse<String> r) {
        @SuppressWarnings("unchecked")
        Map<String, Object> e = (Map<String, Object>) Json.parseObject(r.body()).get("error");
        return (String) e.get("message");
    }

    @Test
    void shouldAnswer503UntilEveryPrefillIsHealthyAndRegistered() throws Exception {
        FakeNode p1 = keep(FakeNode.prefill(1, kv));
        FakeNode p2 = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        p1.healthStatus = 503;
        p2.registered = false;
        DisaggProxy proxy = proxy(List.of(p1, p2), List.of(d));
        await(() -> health(proxy).contains("/health answered 503") && health(proxy).contains("lists no engine"),
                "both P's probed");

        HttpResponse<String> r = post(proxy, "/v1/completions", "{\"prompt\":\"abc\",\"max_tokens\":3}");
        assertEquals(503, r.statusCode());
        String msg = errorMessage(r);
        assertTrue(msg.contains("not ready") && msg.contains(p1.url()) && msg.contains("/health answered 503")
                && msg.contains("lists no engine"), msg);
        HttpResponse<String> h = client.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + proxy.port() + "/health")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(503, h.statusCode());
        assertTrue(d.bodies.isEmpty(), "no request may reach D before the proxy is ready");

        p1.healthStatus = 200;
        await(() -> p1.bodies.isEmpty() && !proxy.isReady() && proxy.stats().rejected() == 1, "only p2 missing");
        p2.registered = true;
        await(proxy::isReady, "ready");
        r = post(proxy, "/v1/completions", "{\"prompt\":\"abc\",\"max_tokens\":3}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(FakeNode.expected("abc"), text(r, false));
    }

    @Test
    void shouldRoundRobinOverPrefillRanksAndDecodesAndSendBothSidesConcurrently() throws Exception {
        FakeNode p1 = keep(FakeNode.prefill(2, kv)); // two DP ranks behind one bootstrap server
        FakeNode p2 = keep(FakeNode.prefill(1, kv));
        FakeNode d1 = keep(FakeNode.decode(kv));
        FakeNode d2 = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(p1, p2), List.of(d1, d2));
        await(proxy::isReady, "ready");

        List<CompletableFuture<HttpResponse<String>>> fs = new ArrayList<>();
        for (int i = 0; i < 24; i++) {
            fs.add(postAsync(proxy, "prompt-" + i, i % 2 == 1));
        }
        for (int i = 0; i < fs.size(); i++) {
            HttpResponse<String> r = fs.get(i).get();
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(FakeNode.expected("prompt-" + i), text(r, i % 2 == 1), r.body());
        }
        // 3 P ranks (p1 rank 0, p1 rank 1, p2 rank 0) and 2 D's in turn: 24 requests = 16 + 8 and 12 + 12
        assertEquals(16, p1.bodies.size());
        assertEquals(8, p2.bodies.size());
        assertEquals(12, d1.bodies.size());
        assertEquals(12, d2.bodies.size());
        assertEquals(Set.of("0", "1"), new HashSet<>(p1.dpRankHeaders));
        assertEquals(List.of(), p1.errors);
        assertEquals(List.of(), p2.errors);
        assertEquals(List.of(), d1.errors);
        assertEquals(List.of(), d2.errors);
        for (FakeNode d : List.of(d1, d2)) {
            for (Map<String, Object> b : d.bodies) {
                @SuppressWarnings("unchecked")
                Map<String, Object> kvp = (Map<String, Object>) b.get("kv_transfer_params");
                String addr = (String) kvp.get("remote_bootstrap_addr");
                assertTrue(addr.equals(p1.bootstrapAddr()) || addr.equals(p2.bootstrapAddr()), addr);
                assertTrue(((String) kvp.get("transfer_id")).startsWith("xfer-"));
                assertEquals(16L, b.get("max_tokens"), "D keeps the client's max_tokens");
                assertTrue(b.containsKey("stream_options") == Boolean.TRUE.equals(b.get("stream"))
                        || b.containsKey("stream_options"), "D keeps the client's stream_options");
            }
        }
        assertEquals(24, proxy.stats().succeeded());
    }

    /**
     * An answer larger than the JDK server's 8 KiB buffer leaves while it is written; a client that has
     * read it whole must already see it counted (the count is read once, with no waiting).
     */
    @Test
    void shouldCountAnAnswerAsSucceededBeforeAClientCanHaveReadItWhole() throws Exception {
        FakeNode p = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(p), List.of(d));
        await(proxy::isReady, "ready");
        String plain = letters(64 << 10);
        String streamed = letters(400); // one event per character: about 18 KiB
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> r = postAsync(proxy, plain, false).get();
            assertEquals(200, r.statusCode(), r.body());
            assertTrue(r.body().length() > 8 << 10, "body of " + r.body().length() + " chars");
            assertEquals(FakeNode.expected(plain), text(r, false));
            assertEquals(2 * i + 1, proxy.stats().succeeded(), "plain answer " + i + " read but not counted");
            r = postAsync(proxy, streamed, true).get();
            assertEquals(200, r.statusCode(), r.body());
            assertTrue(r.body().length() > 8 << 10, "stream of " + r.body().length() + " chars");
            assertEquals(FakeNode.expected(streamed), text(r, true));
            assertEquals(2 * i + 2, proxy.stats().succeeded(), "streamed answer " + i + " read but not counted");
        }
        assertEquals(List.of(), p.errors);
        assertEquals(List.of(), d.errors);
    }

    private static String letters(int n) {
        StringBuilder sb = new StringBuilder(n);
        for (int i = 0; i < n; i++) {
            sb.append((char) ('a' + i % 26));
        }
        return sb.toString();
    }

    @Test
    void aRequestWhosePrefillFailsIsRetriedOnceOnAnotherPrefillBeforeAnyTokenReachedTheClient() throws Exception {
        FakeNode bad = keep(FakeNode.prefill(1, kv));
        FakeNode good = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(bad, good), List.of(d), Duration.ofHours(1));
        await(proxy::isReady, "ready");
        bad.fault = FakeNode.Fault.STATUS_500;

        for (int i = 0; i < 6; i++) {
            boolean stream = i >= 3;
            HttpResponse<String> r = postAsync(proxy, "q" + i, stream).get();
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(FakeNode.expected("q" + i), text(r, stream), r.body());
        }
        assertTrue(bad.bodies.size() >= 3, "the failing P was tried first at least every other time");
        assertEquals(bad.bodies.size(), proxy.stats().retried(), "each of those was tried once more, on the other P");
        assertEquals(0, proxy.stats().failedPrefill());

        // A P that is gone (refused connection): its request is served by the other, and it leaves the rotation.
        bad.stop();
        long retriedBefore = proxy.stats().retried();
        for (int i = 0; i < 6; i++) {
            HttpResponse<String> r = postAsync(proxy, "z" + i, false).get();
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(FakeNode.expected("z" + i), text(r, false));
        }
        assertTrue(proxy.stats().retried() <= retriedBefore + 1, "a refused P leaves the rotation at once: "
                + (proxy.stats().retried() - retriedBefore) + " retried");
        assertTrue(health(proxy).contains("\"up\":false,\"dp_engine_ids\""), health(proxy));
        assertEquals(List.of(), good.errors);
    }

    @Test
    void withNoOtherPrefillTheFailureIsAnsweredWithTheNodeToBlameInAStructuredField() throws Exception {
        FakeNode bad = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(bad), List.of(d), Duration.ofHours(1));
        await(proxy::isReady, "ready");
        bad.fault = FakeNode.Fault.STATUS_500;
        HttpResponse<String> r = postAsync(proxy, "q", false).get();
        assertEquals(502, r.statusCode(), r.body());
        String msg = errorMessage(r);
        assertTrue(msg.contains("prefill node " + bad.url()) && msg.contains("500")
                && msg.contains("fake engine crashed"), msg);
        Map<?, ?> e = (Map<?, ?>) Json.parseObject(r.body()).get("error");
        assertEquals(bad.url(), String.valueOf(e.get("failed_node")).replaceAll("/$", ""));
        assertEquals("prefill", e.get("failed_role"));
        assertEquals(bad.url(), WorkloadClient.failedNode(r.body()), "the workload check reads the same field");
        assertEquals(1, proxy.stats().failedPrefill());
        assertEquals(0, proxy.stats().retried(), "no other P: nothing to retry on");

        // D's own 4xx is the client's: not retried, blamed on D
        bad.fault = FakeNode.Fault.NONE;
        d.fault = FakeNode.Fault.STATUS_400;
        HttpResponse<String> r2 = postAsync(proxy, "q2", false).get();
        assertEquals(400, r2.statusCode(), r2.body());
        assertEquals("decode", ((Map<?, ?>) Json.parseObject(r2.body()).get("error")).get("failed_role"));
    }

    @Test
    void aPrefillThatDiesWhileItsDecodePullsIsBlamedAndTheRequestIsServedByAnotherPrefill() throws Exception {
        FakeNode dying = keep(FakeNode.prefill(1, kv));
        FakeNode good = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        // no probes during the test: only the proxy's own look at P after D's 500 can find P gone
        DisaggProxy proxy = proxy(List.of(dying, good), List.of(d), Duration.ofHours(1));
        await(proxy::isReady, "ready");
        dying.fault = FakeNode.Fault.DIE_UNDER_PULL;

        for (boolean stream : new boolean[] {true, false}) {
            HttpResponse<String> r = postAsync(proxy, "pulled" + stream, stream).get();
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(FakeNode.expected("pulled" + stream), text(r, stream), r.body());
        }
        assertEquals(1, dying.bodies.size(), "the first request went to the P that died, the second not");
        assertEquals(1, proxy.stats().retried(), "D's 500 (P died under its pull) was tried once more");
        assertEquals(0, proxy.stats().failedPrefill() + proxy.stats().failedDecode());
        assertEquals(2, proxy.stats().succeeded());
        assertTrue(health(proxy).contains("\"url\":\"" + dying.url() + "\",\"bootstrap_addr\":\""
                + dying.bootstrapAddr() + "\",\"up\":false"), "the dead P left the rotation: " + health(proxy));
        assertEquals(List.of(), good.errors);
        assertEquals(List.of(), d.errors);
    }

    @Test
    void aDecodeStreamThatBreaksBeforeItsFirstByteIsServedByAnotherDecode() throws Exception {
        FakeNode p = keep(FakeNode.prefill(1, kv));
        FakeNode bad = keep(FakeNode.decode(kv));
        FakeNode good = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(p), List.of(bad, good), Duration.ofHours(1));
        await(proxy::isReady, "ready");
        bad.fault = FakeNode.Fault.BREAK_BEFORE_FIRST_BYTE;

        HttpResponse<String> r = postAsync(proxy, "headers only", true).get();
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(FakeNode.expected("headers only"), text(r, true), "the client saw none of the broken try: "
                + r.body());
        assertEquals(1, bad.bodies.size(), "the first try went to the D that broke");
        assertEquals(1, proxy.stats().retried());
        assertEquals(1, proxy.stats().succeeded());
        assertEquals(0, proxy.stats().failedDecode());
    }

    @Test
    void withNoOtherPrefillAPrefillThatDiedUnderThePullIsNamedAsTheFailedNode() throws Exception {
        FakeNode dying = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(dying), List.of(d), Duration.ofHours(1));
        await(proxy::isReady, "ready");
        dying.fault = FakeNode.Fault.DIE_UNDER_PULL;

        HttpResponse<String> r = postAsync(proxy, "alone", true).get();
        assertEquals(502, r.statusCode(), r.body());
        Map<?, ?> e = (Map<?, ?>) Json.parseObject(r.body()).get("error");
        assertEquals(dying.url(), WorkloadClient.failedNode(r.body()), "blamed on P by cause, not D's words: " + r.body());
        assertEquals("prefill", e.get("failed_role"));
        assertTrue(errorMessage(r).contains("KV load from engine " + dying.engineId(0)), r.body());
        assertEquals(1, proxy.stats().failedPrefill());
        assertEquals(0, proxy.stats().retried(), "no other P to retry on");
    }

    @Test
    void shouldGiveAClearErrorWhenADecodeFailsAndKeepServingThroughTheOthers() throws Exception {
        FakeNode p = keep(FakeNode.prefill(1, kv));
        FakeNode bad = keep(FakeNode.decode(kv));
        FakeNode good = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(p), List.of(bad, good), Duration.ofHours(1));
        await(proxy::isReady, "ready");

        bad.fault = FakeNode.Fault.STATUS_400;
        HttpResponse<String> r1 = postAsync(proxy, "a", false).get();
        HttpResponse<String> r2 = postAsync(proxy, "b", false).get();
        assertEquals(400, r1.statusCode(), "D's own 4xx is passed on");
        assertTrue(errorMessage(r1).contains("decode node " + bad.url()) && errorMessage(r1).contains("prompt too long"),
                r1.body());
        assertEquals(FakeNode.expected("b"), text(r2, false));

        bad.fault = FakeNode.Fault.BREAK_STREAM;
        HttpResponse<String> s1 = postAsync(proxy, "streamed", true).get();
        HttpResponse<String> s2 = postAsync(proxy, "other", true).get();
        assertEquals(200, s1.statusCode());
        assertTrue(text(s1, true) == null && s1.body().contains("\"error\"")
                && s1.body().contains("decode node " + bad.url()), "broken stream ends with an error event: " + s1.body());
        assertEquals(FakeNode.expected("other"), text(s2, true));

        bad.stop(); // (already stopped by its broken stream; refused from now on)
        HttpResponse<String> r3 = postAsync(proxy, "c", false).get();
        HttpResponse<String> r4 = postAsync(proxy, "d", false).get();
        HttpResponse<String> r5 = postAsync(proxy, "e", true).get();
        // the refused D took no byte to the client: the request is tried once more on the other D
        assertEquals(200, r3.statusCode(), r3.body());
        assertEquals(FakeNode.expected("c"), text(r3, false));
        assertEquals(1, proxy.stats().retried());
        assertEquals(FakeNode.expected("d"), text(r4, false));
        assertEquals(FakeNode.expected("e"), text(r5, true), "the refused D left the rotation");
        assertTrue(health(proxy).contains("\"up\":false,\"problem\":\"connection refused\""), health(proxy));
        assertEquals(List.of(), good.errors);
    }

    @Test
    void shouldTakeNodesThatStopOrDrainOutOfRotationBeforeARequestFailsOnThem() throws Exception {
        FakeNode p1 = keep(FakeNode.prefill(1, kv));
        FakeNode p2 = keep(FakeNode.prefill(1, kv));
        FakeNode d1 = keep(FakeNode.decode(kv));
        FakeNode d2 = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(p1, p2), List.of(d1, d2));
        await(proxy::isReady, "ready");
        p2.stop();
        d2.healthStatus = 503; // a draining serve node
        await(() -> health(proxy).contains("\"url\":\"" + p2.url() + "\",\"bootstrap_addr\":\"" + p2.bootstrapAddr()
                + "\",\"up\":false") && health(proxy).contains("\"url\":\"" + d2.url() + "\",\"up\":false"),
                "p2 and d2 out of rotation");
        for (int i = 0; i < 6; i++) {
            HttpResponse<String> r = postAsync(proxy, "w" + i, i % 2 == 0).get();
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(FakeNode.expected("w" + i), text(r, i % 2 == 0));
        }
        assertEquals(List.of(), d2.bodies, "no request reaches a draining D");
        d2.healthStatus = 200;
        await(() -> health(proxy).contains("\"url\":\"" + d2.url() + "\",\"up\":true"), "d2 back");
        assertEquals(200, postAsync(proxy, "x", false).get().statusCode());
        assertEquals(200, postAsync(proxy, "y", false).get().statusCode());
        assertEquals(1, d2.bodies.size(), "d2 is back in the rotation");
    }

    @Test
    void shouldRejectBadRequestsWithOpenAiErrors() throws Exception {
        FakeNode p = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        DisaggProxy proxy = proxy(List.of(p), List.of(d));
        await(proxy::isReady, "ready");

        HttpResponse<String> r = post(proxy, "/v1/completions", "{not json");
        assertEquals(400, r.statusCode());
        assertTrue(errorMessage(r).contains("not a JSON object"), r.body());
        r = post(proxy, "/v1/nothing", "{}");
        assertEquals(404, r.statusCode());
        assertTrue(errorMessage(r).contains("/v1/completions"), r.body());
        HttpResponse<String> models = client.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + proxy.port() + "/v1/models")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, models.statusCode());
        assertTrue(models.body().contains("\"fake\""), models.body());
        assertTrue(p.bodies.isEmpty() && d.bodies.isEmpty(), "rejected requests reach no node");
        assertEquals(1, proxy.stats().rejected(), "the bad body; an unknown route is no proxied request");
    }

    @Test
    void shouldAnswer413ToAClientThatSendsAnOversizedBodyWholeBeforeReading() throws Exception {
        FakeNode p = keep(FakeNode.prefill(1, kv));
        FakeNode d = keep(FakeNode.decode(kv));
        int limit = 1 << 20;
        DisaggProxy proxy = keep(DisaggProxy.start(ProxyConfig.builder().port(0).probeInterval(Duration.ofMillis(20))
                .maxBodyBytes(limit).addPrefill(p.url(), p.bootstrapPort()).addDecode(d.url()).build()));
        await(proxy::isReady, "ready");
        for (boolean chunked : new boolean[] {false, true}) {
            try (RawHttp c = new RawHttp(proxy.port())) {
                // 3 MiB past the limit: more than loopback's socket buffers hold, within the 4 x limit read away
                c.post("/v1/completions", 4L * limit - 1000, chunked);
                RawHttp.Reply r = c.reply();
                assertEquals(413, r.status(), r.head());
                assertTrue(r.body().contains("exceeds " + limit + " bytes"), r.body());
                c.get("/health");
                assertEquals(200, c.reply().status(), "the connection is still good");
            }
        }
        assertTrue(p.bodies.isEmpty() && d.bodies.isEmpty(), "rejected requests reach no node");
        assertEquals(2, proxy.stats().rejected());
    }

    @Test
    void shouldRejectConfigurationsThatCannotWork() {
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder().addDecode("http://127.0.0.1:1").build());
        assertTrue(e.getMessage().contains("--prefill"), e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder().addPrefill("localhost:8100"));
        assertTrue(e.getMessage().contains("http://host:port"), e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> ProxyConfig.builder().addPrefill("http://127.0.0.1:8100", 70000));
        assertTrue(e.getMessage().contains("1..65535"), e.getMessage());
        assertEquals("http://[::1]:8998", new ProxyConfig.PrefillNode(URI.create("http://[::1]:8100"), 8998)
                .bootstrapAddr());
    }
}
