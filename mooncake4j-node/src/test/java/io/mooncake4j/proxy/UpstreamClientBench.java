package io.mooncake4j.proxy;

import io.mooncake4j.http.HttpFront;
import io.mooncake4j.http.HttpLimits;
import org.eclipse.jetty.client.BytesRequestContent;
import org.eclipse.jetty.client.HttpClient;
import org.eclipse.jetty.client.InputStreamResponseListener;
import org.eclipse.jetty.http.HttpMethod;
import org.eclipse.jetty.util.thread.QueuedThreadPool;

import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The proxy's upstream client, same run: {@link Http1Client} against Jetty 12's
 * {@code org.eclipse.jetty.client.HttpClient}, each sending {@code n} POSTs the way the proxy calls P and D
 * (a JSON body of about 1 KiB, the answer read as a stream to its end) from {@code concurrency} virtual
 * threads to one node over loopback. The node is an {@link HttpFront} (the nodes' own Jetty server) that
 * answers {@code /json} with a 400-byte JSON body and {@code /sse} with 33 server-sent events, each
 * flushed. Rounds alternate the order (A B, B A, B A, A B, ...) after a warm-up of a quarter round each.
 * Not a test (no assertions; a status other than 200 stops it). Per round: wall time, requests per second,
 * and the CPU time of the whole process per request (the node's share is the same for both clients, so
 * the difference is the clients'). {@code vt}: Jetty's client runs its work on virtual threads. Run:
 *
 * <pre>
 * mvn -B -o -q -pl mooncake4j-node -am test-compile dependency:build-classpath \
 *     -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test
 * java -cp mooncake4j-node/target/test-classes:mooncake4j-node/target/classes:$(cat mooncake4j-node/target/test.classpath) \
 *     io.mooncake4j.proxy.UpstreamClientBench [concurrency] [n json] [n sse] [rounds] [vt]
 * </pre>
 */
public final class UpstreamClientBench {

    private interface Client {
        int call(URI uri, byte[] body) throws Exception;
    }

    private UpstreamClientBench() {
    }

    public static void main(String[] args) throws Exception {
        int concurrency = args.length > 0 ? Integer.parseInt(args[0]) : 16;
        int nJson = args.length > 1 ? Integer.parseInt(args[1]) : 4000;
        int nSse = args.length > 2 ? Integer.parseInt(args[2]) : 1000;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 8;
        boolean jettyVirtual = args.length > 4 && args[4].equals("vt");
        byte[] json = ("{\"id\":\"cmpl-x\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\""
                + "x".repeat(300) + "\",\"finish_reason\":\"length\"}]}").getBytes(StandardCharsets.UTF_8);
        byte[] event = "data: {\"id\":\"cmpl-x\",\"choices\":[{\"index\":0,\"text\":\" tok\"}]}\n\n"
                .getBytes(StandardCharsets.UTF_8);
        byte[] request = ("{\"model\":\"m\",\"prompt\":\"" + "p".repeat(900) + "\",\"max_tokens\":32}")
                .getBytes(StandardCharsets.UTF_8);
        io.mooncake4j.http.Routes.BodyRoute answer = (ex, body) -> {
            if (ex.path().equals("/sse")) {
                ex.setHeader("Content-Type", "text/event-stream");
                ex.sendResponseHeaders(200, 0);
                try (OutputStream out = ex.responseBody()) {
                    for (int i = 0; i < 32; i++) {
                        out.write(event);
                        out.flush();
                    }
                    out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
                }
            } else {
                ex.setHeader("Content-Type", "application/json");
                ex.sendResponseHeaders(200, json.length);
                try (OutputStream out = ex.responseBody()) {
                    out.write(json);
                }
            }
        };
        HttpFront node = HttpFront.start("bench-node-", "127.0.0.1", 0, 1024, HttpLimits.defaults(),
                io.mooncake4j.http.Routes.builder(HttpLimits.defaults(), 1 << 20, (ex, r) -> new byte[0],
                                (ex, allowed) -> ex.sendResponseHeaders(404, -1))
                        .withBody("POST", "/sse", answer)
                        .withBody("POST", "/json", answer)
                        .build());
        Http1Client ours = new Http1Client(Http1Client.Limits.defaults(Duration.ofSeconds(10)),
                Thread.ofVirtual().name("bench-http1-", 0).factory());
        HttpClient jetty = new HttpClient();
        if (jettyVirtual) {
            QueuedThreadPool pool = new QueuedThreadPool();
            pool.setName("bench-jetty");
            pool.setVirtualThreadsExecutor(Executors.newVirtualThreadPerTaskExecutor());
            jetty.setExecutor(pool);
        }
        jetty.setMaxConnectionsPerDestination(1024);
        jetty.setIdleTimeout(2000); // as Http1Client's idle pool
        jetty.start();
        Client a = (uri, body) -> {
            try (Http1Client.Response r = ours.send(Http1Client.Request.post(uri,
                    Map.of("Content-Type", "application/json"), body, Duration.ofSeconds(30)))) {
                drain(r.body());
                return r.statusCode();
            }
        };
        Client b = (uri, body) -> {
            InputStreamResponseListener listener = new InputStreamResponseListener();
            jetty.newRequest(uri).method(HttpMethod.POST).headers(h -> h.put("Content-Type", "application/json"))
                    .body(new BytesRequestContent(body)).idleTimeout(30, TimeUnit.SECONDS).send(listener);
            org.eclipse.jetty.client.Response r = listener.get(30, TimeUnit.SECONDS);
            drain(listener.getInputStream());
            return r.getStatus();
        };
        String jettyName = jettyVirtual ? "Jetty-vt" : "Jetty";
        var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        System.out.printf(Locale.ROOT, "concurrency %d, %d cores, load %.1f%n", concurrency,
                Runtime.getRuntime().availableProcessors(), os.getSystemLoadAverage());
        try {
            for (String mode : new String[] {"json", "sse"}) {
                URI uri = URI.create("http://127.0.0.1:" + node.port() + "/" + mode);
                int n = mode.equals("sse") ? nSse : nJson;
                run(a, uri, request, n / 4, concurrency);
                run(b, uri, request, n / 4, concurrency);
                double[] wall = new double[2];
                double[] cpu = new double[2];
                for (int r = 0; r < rounds; r++) {
                    boolean oursFirst = r % 4 == 0 || r % 4 == 3;
                    for (int k = 0; k < 2; k++) {
                        int which = (k == 0) == oursFirst ? 0 : 1;
                        long c0 = os.getProcessCpuTime();
                        long t0 = System.nanoTime();
                        run(which == 0 ? a : b, uri, request, n, concurrency);
                        double w = (System.nanoTime() - t0) / 1e9;
                        double c = (os.getProcessCpuTime() - c0) / 1e9;
                        wall[which] += w;
                        cpu[which] += c;
                        System.out.printf(Locale.ROOT, "%s round %d %-8s %d requests: %.2f s, %.0f req/s, "
                                + "%.0f us CPU per request (process), load %.1f%n", mode, r,
                                which == 0 ? "Http1" : jettyName, n, w, n / w, c * 1e6 / n, os.getSystemLoadAverage());
                    }
                }
                long total = (long) n * rounds;
                System.out.printf(Locale.ROOT, "%s total: Http1 %.0f req/s, %.0f us CPU/req | %s %.0f req/s, "
                        + "%.0f us CPU/req | %s/Http1: throughput %.2fx, CPU per request %.2fx%n", mode,
                        total / wall[0], cpu[0] * 1e6 / total, jettyName, total / wall[1], cpu[1] * 1e6 / total,
                        jettyName, wall[0] / wall[1], cpu[1] / cpu[0]);
            }
        } finally {
            jetty.stop();
            ours.close();
            node.close();
        }
    }

    private static void drain(InputStream in) throws Exception {
        try (in) {
            byte[] buf = new byte[16 << 10];
            while (in.read(buf) >= 0) {
                // the proxy copies D's answer through; here it is only read
            }
        }
    }

    private static void run(Client c, URI uri, byte[] body, int n, int concurrency) throws Exception {
        AtomicInteger left = new AtomicInteger(n);
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> fs = new ArrayList<>();
            for (int i = 0; i < concurrency; i++) {
                fs.add(pool.submit(() -> {
                    while (left.getAndDecrement() > 0) {
                        int status = c.call(uri, body);
                        if (status != 200) {
                            throw new IllegalStateException("status " + status);
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        }
    }
}
