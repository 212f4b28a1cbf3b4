package io.mooncake4j.fuzz;

import io.mooncake4j.connector.bootstrap.BootstrapAddresses;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.BootstrapException;
import io.mooncake4j.connector.bootstrap.BootstrapQueryResult;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.internal.json.Json;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Random;

/**
 * Attacks the bootstrap HTTP server: random bytes, broken request lines and headers, lying
 * {@code Content-Length}s, and {@code /register} bodies of random JSON. Every request whose head
 * is complete must get an HTTP answer with a JSON body; everything else must be closed in time.
 */
public final class BootstrapHttpFuzzTarget implements FuzzTarget {

    private static final String ENGINE = "fuzz-engine";
    private static final String ADDR = "tcp://127.0.0.1:5555";
    private MooncakeBootstrapServer server;
    private BootstrapClient client;
    private String url;

    @Override
    public String port() {
        return "bootstrap-http";
    }

    @Override
    public void start() {
        server = new MooncakeBootstrapServer("127.0.0.1", 0,
                MooncakeBootstrapServer.Limits.defaults().withConnections(3_000, 256));
        server.start();
        url = BootstrapAddresses.httpUrl("127.0.0.1", server.port());
        client = new BootstrapClient();
        client.register(url, new RegisterWorkerPayload(ENGINE, 0, 0, 0, ADDR), Duration.ofSeconds(10));
    }

    private static String registerBody(Random r) {
        String[] keys = {"engine_id", "dp_rank", "tp_rank", "pp_rank", "addr"};
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (String k : keys) {
            if (r.nextInt(8) == 0) {
                continue; // missing field
            }
            sb.append(first ? "" : ",").append('"').append(k).append("\":");
            first = false;
            if (r.nextInt(3) == 0) {
                sb.append(k.endsWith("rank") ? String.valueOf(1 + r.nextInt(100_000)) : "\"e" + r.nextInt(1000) + "\"");
            } else {
                sb.append(FuzzIo.jsonValue(r, 0));
            }
        }
        return sb.append('}').toString();
    }

    private static byte[] request(String method, String path, String extraHeaders, byte[] body, long declared) {
        String head = String.format(Locale.ROOT, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s\r\n", method, path,
                extraHeaders, declared >= 0 ? "Content-Length: " + declared + "\r\n" : "");
        return FuzzIo.concat(head.getBytes(StandardCharsets.ISO_8859_1), body);
    }

    @Override
    public void runCase(Random r) throws Exception {
        byte[] req;
        boolean complete; // a whole head (and a body as long as declared): an answer is owed
        switch (r.nextInt(7)) {
            case 0 -> {
                req = FuzzIo.randomBytes(r, 512);
                complete = false;
            }
            case 1, 2 -> {
                byte[] body = registerBody(r).getBytes(StandardCharsets.UTF_8);
                req = request("POST", "/register", "Content-Type: application/json\r\n", body, body.length);
                complete = true;
            }
            case 3 -> {
                byte[] body = FuzzIo.mutate(r, registerBody(r).getBytes(StandardCharsets.UTF_8));
                long declared = switch (r.nextInt(5)) {
                    case 0 -> -1;
                    case 1 -> body.length + 1 + r.nextInt(100); // longer than sent: EOF inside the body
                    case 2 -> 1L << 40;
                    default -> body.length;
                };
                req = request("POST", "/register", "", body, declared);
                complete = declared >= 0 && declared <= body.length || declared == 1L << 40;
            }
            case 4 -> {
                String[] methods = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "G\u0001T"};
                String[] paths = {"/query", "/register", "/", "/query?x=1", "/%00", "/" + "a".repeat(2000)};
                req = request(methods[r.nextInt(methods.length)], paths[r.nextInt(paths.length)], "", new byte[0], -1);
                complete = true;
            }
            case 5 -> {
                String[] headers = {"X: " + "y".repeat(20_000) + "\r\n", "no-colon\r\n", "Content-Length: x\r\n",
                    "Content-Length: 1\r\nContent-Length: 2\r\n", "Transfer-Encoding: chunked\r\n",
                    "Expect: 100-continue\r\n", ": empty\r\n"};
                req = request("POST", "/register", headers[r.nextInt(headers.length)], new byte[0], -1);
                complete = true;
            }
            default -> {
                req = FuzzIo.mutate(r, request("GET", "/query", "", new byte[0], -1));
                complete = false;
            }
        }
        FuzzIo.Reply reply = FuzzIo.exchange(server.port(), req, 4 << 20);
        if (complete) {
            String all = new String(reply.bytes(), StandardCharsets.UTF_8);
            if (all.startsWith("HTTP/1.1 100 Continue\r\n\r\n")) {
                all = all.substring("HTTP/1.1 100 Continue\r\n\r\n".length());
            }
            int split = all.indexOf("\r\n\r\n");
            if (!all.startsWith("HTTP/1.1 ") || split < 0) {
                throw new AssertionError("no HTTP answer to a complete request (" + req.length + " bytes): '"
                        + all.substring(0, Math.min(80, all.length())) + "'");
            }
            int status = Integer.parseInt(all.substring(9, 12));
            if (status >= 500) {
                throw new AssertionError("HTTP " + status + " answer: " + all);
            }
            Object json = Json.parse(all.substring(split + 4));
            if (!(json instanceof Map<?, ?>)) {
                throw new AssertionError("answer body is not a JSON object: " + all);
            }
        }
    }

    @Override
    public void checkStillServing() {
        BootstrapQueryResult q = client.query(url);
        Map<Integer, String> pps = q.engine(ENGINE).orElseThrow(() -> new AssertionError("engine lost"))
                .workerAddr().get(0);
        if (pps == null || !ADDR.equals(pps.get(0))) {
            throw new AssertionError("registration lost or changed: " + q);
        }
        try {
            client.register(url, new RegisterWorkerPayload(ENGINE, 0, 0, 0, "tcp://127.0.0.1:6666"),
                    Duration.ofSeconds(10));
            throw new AssertionError("a duplicate registration was accepted");
        } catch (BootstrapException e) {
            if (e.statusCode() != 400) {
                throw new AssertionError("duplicate registration answered " + e.statusCode() + ", expected 400", e);
            }
        }
    }

    @Override
    public void close() {
        if (client != null) {
            client.close();
        }
        if (server != null) {
            server.close();
        }
    }
}
