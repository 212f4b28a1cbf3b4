package io.mooncake4j.cli;

import io.mooncake4j.http.HttpLimits;
import io.mooncake4j.proxy.DisaggProxy;
import io.mooncake4j.proxy.ProxyConfig;
import io.mooncake4j.proxy.ProxyStats;

import java.io.PrintStream;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * {@code bin/mooncake4j proxy}: the disaggregated-serving router ({@link DisaggProxy}) with the command line
 * of vLLM's example Mooncake proxy: {@code --prefill URL [BOOTSTRAP_PORT]} and {@code --decode URL}, each
 * repeatable, {@code --host}, {@code --port}. Runs until SIGTERM / SIGINT.
 */
final class ProxyCommand implements CliCommand {

    /** Set by tests: stops a running proxy (instead of a signal). */
    private final CountDownLatch stop;

    ProxyCommand() {
        this(null);
    }

    ProxyCommand(CountDownLatch stop) {
        this.stop = stop;
    }

    @Override
    public String name() {
        return "proxy";
    }

    @Override
    public String summary() {
        return "route requests to prefill and decode nodes (vLLM's Mooncake proxy contract, XpYd)";
    }

    @Override
    public String usage() {
        return String.join("\n",
                "usage: bin/mooncake4j proxy --prefill URL [BOOTSTRAP_PORT] ... --decode URL ... [flags]",
                "",
                "The router of a disaggregated deployment, with the contract of vLLM's",
                "examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py: each POST /v1/completions or",
                "/v1/chat/completions goes to the next prefill (P) DP rank with do_remote_decode and max_tokens=1 and,",
                "at the same time and with the same transfer_id, to the next decode (D) node with do_remote_prefill;",
                "D's answer (SSE when stream=true) is passed through. Until every P answers GET /health and lists its",
                "engines on its bootstrap server (GET /query) requests get 503. A failing P or D gives the client an",
                "OpenAI-style JSON error naming the node; a node that cannot be reached leaves the rotation until its",
                "probes succeed again. Works in front of bin/mooncake4j serve nodes and vLLM nodes alike.",
                "",
                "flags:",
                "  --prefill URL [PORT]   a P node (http://host:port) and its bootstrap port (default "
                        + ProxyConfig.DEFAULT_BOOTSTRAP_PORT + ",",
                "                         'none' = default); repeat for several P's",
                "  --decode URL           a D node; repeat for several D's",
                "  --host ADDR            address to listen on, default 127.0.0.1",
                "  --port N               port to listen on, default 8000 (0: any free port, printed on start)",
                "  --request-timeout S    bound on one request, seconds, default 600",
                "  --max-in-flight N      requests handled at once (more get 503), default 4096; a request counts",
                "                         once its body has arrived",
                String.join("\n", HttpLimits.usage()),
                "",
                "The --http-* limits may also come from the environment variables named in brackets.");
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) throws Exception {
        ProxyConfig config = parse(flags.raw(), System.getenv());
        if (System.getProperty("jdk.httpclient.keepalive.timeout") == null) {
            // Drop idle connections to the nodes before their servers do (a POST on a connection the
            // server just closed is not retried and would fail a request).
            System.setProperty("jdk.httpclient.keepalive.timeout", "5");
        }
        try (DisaggProxy proxy = DisaggProxy.start(config)) {
            out.printf(Locale.ROOT, "mooncake4j proxy: listening on http://%s:%d, %d prefill, %d decode; "
                    + "waiting for the prefill nodes%n", config.host(), proxy.port(), config.prefill().size(),
                    config.decode().size());
            out.flush();
            CountDownLatch done = stop != null ? stop : new CountDownLatch(1);
            Thread hook = new Thread(done::countDown, "mooncake-proxy-shutdown");
            if (stop == null) {
                Runtime.getRuntime().addShutdownHook(hook);
            }
            Thread readyLog = Thread.ofVirtual().name("mooncake-proxy-ready").start(() -> {
                try {
                    while (!proxy.isReady()) {
                        if (done.await(50, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                            return;
                        }
                    }
                    out.printf(Locale.ROOT, "mooncake4j proxy: ready on port %d%n", proxy.port());
                    out.flush();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            done.await();
            readyLog.interrupt();
            ProxyStats s = proxy.stats();
            out.printf(Locale.ROOT, "mooncake4j proxy: stopping; %d requests, %d ok, %d failed at P, %d failed at D, "
                    + "%d rejected%n", s.requests(), s.succeeded(), s.failedPrefill(), s.failedDecode(), s.rejected());
            out.flush();
        }
        return 0;
    }

    /** The configuration the arguments ask for; {@code --prefill} takes a URL and an optional port. */
    static ProxyConfig parse(List<String> args) {
        return parse(args, Map.of());
    }

    /** As {@link #parse(List)}, with the {@code --http-*} limits defaulting to {@code env}'s. */
    static ProxyConfig parse(List<String> args, Map<String, String> env) {
        ProxyConfig.Builder b = ProxyConfig.builder();
        Map<String, String> httpFlags = new HashMap<>();
        int nPrefill = 0;
        int nDecode = 0;
        for (int i = 0; i < args.size(); i++) {
            String a = args.get(i);
            String name = a;
            String inline = null;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                name = a.substring(0, eq);
                inline = a.substring(eq + 1);
            }
            name = name.replace('_', '-');
            switch (name) {
                case "--prefill" -> {
                    String url = inline != null ? inline : value(args, i++, name);
                    int port = ProxyConfig.DEFAULT_BOOTSTRAP_PORT;
                    if (i + 1 < args.size() && !args.get(i + 1).startsWith("--")) {
                        String p = args.get(++i);
                        if (!p.equalsIgnoreCase("none")) {
                            port = port(p, "--prefill " + url + " BOOTSTRAP_PORT");
                        }
                    }
                    try {
                        b.addPrefill(url, port);
                    } catch (IllegalArgumentException e) {
                        throw new Flags.UsageException("--prefill: " + e.getMessage());
                    }
                    nPrefill++;
                }
                case "--decode" -> {
                    String url = inline != null ? inline : value(args, i++, name);
                    try {
                        b.addDecode(url);
                    } catch (IllegalArgumentException e) {
                        throw new Flags.UsageException("--decode: " + e.getMessage());
                    }
                    nDecode++;
                }
                case "--host" -> b.host(inline != null ? inline : value(args, i++, name));
                case "--port" -> {
                    int p = port0(inline != null ? inline : value(args, i++, name));
                    b.port(p);
                }
                case "--request-timeout" -> b.requestTimeout(Duration.ofSeconds(
                        positive(inline != null ? inline : value(args, i++, name), name)));
                case "--max-in-flight" -> b.maxInFlight(
                        (int) Math.min(Integer.MAX_VALUE, positive(inline != null ? inline : value(args, i++, name), name)));
                case "--http-header-timeout", "--http-idle-timeout", "--http-min-body-rate", "--http-body-grace",
                        "--http-max-header-bytes", "--http-body-slots", "--http-body-slots-per-client",
                        "--http-in-flight-per-client", "--http-body-deadline-rate", "--http-ipv4-prefix",
                        "--http-ipv6-prefix", "--http-max-connections" ->
                        httpFlags.put(name.substring(2), inline != null ? inline : value(args, i++, name));
                default -> throw new Flags.UsageException(a.startsWith("-")
                        ? "unknown flag " + a
                        : "unexpected argument '" + a + "' (a bootstrap port goes right after its --prefill URL)");
            }
        }
        if (nPrefill == 0) {
            throw new Flags.UsageException("at least one --prefill URL [BOOTSTRAP_PORT] is needed");
        }
        if (nDecode == 0) {
            throw new Flags.UsageException("at least one --decode URL is needed");
        }
        try {
            b.http(HttpLimits.from(httpFlags::get, env));
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new Flags.UsageException(e.getMessage());
        }
    }

    private static String value(List<String> args, int i, String name) {
        if (i + 1 >= args.size() || args.get(i + 1).startsWith("--")) {
            throw new Flags.UsageException(name + " needs a value");
        }
        return args.get(i + 1);
    }

    private static int port(String v, String what) {
        int p = port0(v);
        if (p == 0) {
            throw new Flags.UsageException(what + " must be within 1..65535, got " + v);
        }
        return p;
    }

    private static int port0(String v) {
        try {
            int p = Integer.parseInt(v);
            if (p < 0 || p > 65535) {
                throw new NumberFormatException();
            }
            return p;
        } catch (NumberFormatException e) {
            throw new Flags.UsageException("a port must be a number within 0..65535 (or 'none' for a bootstrap "
                    + "port), got '" + v + "'");
        }
    }

    private static long positive(String v, String name) {
        try {
            long n = Long.parseLong(v);
            if (n <= 0) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            throw new Flags.UsageException(name + " must be a positive integer, got '" + v + "'");
        }
    }
}
