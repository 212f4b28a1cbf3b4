package io.mooncake4j.cli;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.DemoRunner;
import io.mooncake4j.sim.SimEngine;

import java.io.PrintStream;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * {@code bin/mooncake4j demo}: a bootstrap server, a P engine and a D engine on loopback in this
 * JVM, a synthetic workload through the real connector, every byte verified at D (see
 * {@link DemoRunner}).
 */
final class DemoCommand implements CliCommand {

    private final DemoRunner.Workers workers;
    private final DeviceMemory deviceMemory;
    /** The engines the default workers made (null with injected workers): what each transport moved. */
    private final EngineTally tally;

    DemoCommand() {
        this(new EngineTally(), CudaDeviceMemory.INSTANCE);
    }

    private DemoCommand(EngineTally tally, DeviceMemory deviceMemory) {
        this.workers = tally;
        this.deviceMemory = deviceMemory;
        this.tally = tally;
    }

    /** Real engines of the requested kind, remembered so the table can say which transport moved the KV. */
    private static final class EngineTally implements DemoRunner.Workers {
        private final List<TransferEngine> engines = new CopyOnWriteArrayList<>();

        @Override
        public SimEngine.WorkerFactory factory(String protocol) {
            return ConnectorSimWorker.factory(cfg -> {
                TransferEngine e = TransferEngines.create(protocol);
                engines.add(e);
                return e;
            });
        }

        /** Bytes per transport summed over the engines made since the last call (P's engines move the KV). */
        Map<String, Long> drain() {
            Map<String, Long> sum = new LinkedHashMap<>();
            for (TransferEngine e : engines) {
                e.bytesByTransport().forEach((k, v) -> sum.merge(k, v, Long::sum));
            }
            engines.clear();
            return sum;
        }
    }

    /** A command whose engines get their workers from {@code workers} (tests); GPU memory through CUDA. */
    DemoCommand(DemoRunner.Workers workers) {
        this(workers, CudaDeviceMemory.INSTANCE);
    }

    /**
     * A command whose engines get their workers from {@code workers} and, with {@code --device cuda},
     * their KV caches from {@code deviceMemory} (the workers' engines must reach the same memory).
     */
    DemoCommand(DemoRunner.Workers workers, DeviceMemory deviceMemory) {
        this.workers = Objects.requireNonNull(workers, "workers");
        this.deviceMemory = Objects.requireNonNull(deviceMemory, "deviceMemory");
        this.tally = null;
    }

    @Override
    public String name() {
        return "demo";
    }

    @Override
    public String summary() {
        return "run P and D engines on loopback, move a workload's KV and verify every byte";
    }

    @Override
    public String usage() {
        DemoRunner.Options d = DemoRunner.Options.defaults();
        return String.join("\n",
                "usage: bin/mooncake4j demo [flags]",
                "",
                "Starts a bootstrap server, a prefill (P) engine and a decode (D) engine in this JVM on 127.0.0.1,",
                "sends requests through a proxy like vLLM's (P: do_remote_decode, max_tokens=1; D: do_remote_prefill),",
                "lets the Mooncake connector push each request's KV from P to D, and verifies every byte at D.",
                "Prints a progress line per second and a summary table. Exit code 0 only if every request verified.",
                "",
                "flags:",
                String.format(Locale.ROOT, "  --model NAME          model preset (%s), default %s",
                        String.join(", ", ModelPreset.all().stream().filter(p -> !p.mla()).map(ModelPreset::name)
                                .toList()), d.model().name()),
                "  --model DIR           a model directory (from bin/mooncake4j make-model, or a Llama/Mistral/Qwen2",
                "                        safetensors checkpoint): Jlama behind P, D and one kv_both node, every",
                "                        token compared (with --requests, default 8; --decode-tokens, default 16;",
                "                        --protocol, default tcp; --seed; --timeout; --dtype F32|BF16, default F32;",
                "                        --layerwise: P pushes each layer's KV while the next computes; --processes:",
                "                        P, D, kv_both and proxy as separate serve/proxy processes, answers compared)",
                "  --requests N          requests to send, default " + d.requests(),
                "  --prompt-tokens N     tokens per prompt, default " + d.promptTokens(),
                "  --shared-prefix N     leading tokens shared by all prompts (prefix-cache hits), default "
                        + d.sharedPrefixTokens(),
                "  --decode-tokens N     tokens each D request generates, default " + d.decodeTokens(),
                "  --p-tp N              tensor-parallel size of P, default " + d.pTp(),
                "  --d-tp N              tensor-parallel size of D, default " + d.dTp(),
"  --engine KIND         tcp; auto or shm (the engine core with every transport that runs here, KV in",
                "                        shareable memory, so P -> D goes over shm); or mock for the in-JVM engine;",
                "                        default " + d.protocol() + " (--protocol is the same flag)",
                "  --num-blocks N        blocks per rank of each engine; default: what fits 2 GiB of KV per engine,",
                "                        at most 4 x what the requests in flight need",
                "  --concurrency N       requests in flight, default " + d.concurrency(),
                "  --seed N              workload seed, default " + d.seed(),
                "  --device cpu|cuda     where the KV caches of both engines live, default cpu; cuda needs a GPU",
                "                        and --protocol tcp (GPU memory is staged through pinned host buffers)",
                "  --gpu-id N            with --device cuda: the GPU of every P and D rank, default 0",
                "  --p-gpu N, --d-gpu N  with --device cuda: the GPU of P's / D's ranks, default --gpu-id",
                "  --timeout SECONDS     bound on the whole run, default " + d.timeout().toSeconds(),
                "  --processes           run P, D, a kv_both reference and the proxy as separate JVMs",
                "                        (bin/mooncake4j serve and proxy on 127.0.0.1), send the workload through the",
                "                        proxy (every request streamed) and check every completion against the",
                "                        reference; see docs/serving.md",
                "  --layerwise           P pushes each layer's KV while its prefill runs (layerwise_push)",
                "  --layer-compute-us N  prefill compute per layer per 1k prompt tokens, in microseconds (spent",
                "                        parked, like GPU time), default 0: the synthetic KV fill only",
                "  --warmup N            first send N requests of the same shape, not counted (with --processes",
                "                        through the same processes), so the figures are of warmed-up JVMs; default 0",
                "  --sampling prompt|kv  how the synthetic model picks tokens: prompt (default) from the prompt alone,",
                "                        D verifying the KV it received; kv from the KV each engine holds, as serve",
                "                        nodes do (P then also digests the KV it writes): the in-JVM run like for like",
                "                        with --processes, whose nodes always sample from the KV");
    }

    @Override
    public Set<String> flagNames() {
        return Set.of("model", "requests", "prompt-tokens", "shared-prefix", "decode-tokens", "p-tp", "d-tp", "engine",
                "protocol", "num-blocks", "concurrency", "seed", "device", "gpu-id", "p-gpu", "d-gpu", "timeout", "processes",
                "layerwise", "layer-compute-us", "warmup", "sampling", "dtype");
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) {
        String modelDir = flags.string("model", null);
        if (modelDir != null && (modelDir.contains("/") || java.nio.file.Files.isDirectory(java.nio.file.Path.of(modelDir)))) {
            // a model directory, not a preset name: the real model (io.mooncake4j.model.ModelDemo)
            try {
                var mo = new io.mooncake4j.model.ModelDemo.Options(
                        java.nio.file.Path.of(modelDir), flags.string("dtype", "F32"), flags.positiveInt("requests", 8),
                        flags.positiveInt("decode-tokens", 16), flags.string("protocol", "tcp"), flags.longValue("seed", 7),
                        java.time.Duration.ofSeconds(flags.positiveInt("timeout", 120)), flags.bool("layerwise", false));
                if (flags.bool("processes", false)) {
                    String opts = System.getenv(ProcessDemo.CHILD_JAVA_OPTS_ENV);
                    return ModelProcessDemo.run(mo, out, err, java.nio.file.Path.of(System.getProperty("java.io.tmpdir")),
                            opts == null || opts.isBlank() ? List.of() : List.of(opts.trim().split("\\s+")));
                }
                return io.mooncake4j.model.ModelDemo.run(mo, out);
            } catch (IllegalArgumentException e) {
                err.println("demo: " + e.getMessage());
                return 2;
            } catch (Exception e) {
                err.println("demo: " + e);
                return 1;
            }
        }
        boolean processes = flags.bool("processes", false);
        int warmup = flags.intValue("warmup", 0);
        if (warmup < 0) {
            throw new Flags.UsageException("--warmup must be >= 0, got " + warmup);
        }
        DemoRunner.Options o = parse(flags);
        if (processes) {
            if (flags.string("sampling", "kv").equalsIgnoreCase("prompt")) {
                throw new Flags.UsageException("--processes runs serve nodes, which always sample from the KV "
                        + "(--sampling kv); --sampling prompt is for the in-JVM demo");
            }
            if (o.onGpu() || !o.protocol().equals("tcp") || o.numBlocks() != 0) {
                throw new Flags.UsageException("--processes runs serve nodes over TCP with KV in host memory; "
                        + "it takes no --device cuda, --num-blocks, and no --protocol but tcp");
            }
            try {
                return ProcessDemo.run(o, warmup, out, err);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                err.println("mooncake4j demo: interrupted");
                return 1;
            } catch (Exception e) {
                err.println("mooncake4j demo --processes: " + e.getMessage());
                return 1;
            }
        }
        if (o.onGpu()) {
            for (int gpu : new int[] {o.pGpu(), o.dGpu()}) {
                try {
                    deviceMemory.checkLocation("cuda:" + gpu);
                } catch (RuntimeException e) {
                    err.println("mooncake4j demo: --device cuda: KV caches cannot go to cuda:" + gpu + ": "
                            + e.getMessage());
                    err.println("mooncake4j demo: nothing was started; run without --device cuda (or with "
                            + "--device cpu) to keep the KV caches in host memory");
                    return 1;
                }
            }
        }
        if (warmup > 0) {
            DemoRunner.Report w = DemoRunner.run(withRequests(o, warmup), workers,
                    new PrintStream(java.io.OutputStream.nullOutputStream(), true, java.nio.charset.StandardCharsets.UTF_8),
                    deviceMemory);
            out.printf(Locale.ROOT, "mooncake4j demo: warm-up of %d requests: %d ok, %.1f s (not counted below)%n",
                    warmup, w.ok(), w.wallSeconds());
            if (w.exitCode() != 0) {
                w.print(out);
                return w.exitCode();
            }
        }
        if (tally != null) {
            tally.drain(); // the warm-up's engines are closed; count the measured run only
        }
        boolean byThread = "1".equals(System.getenv(ProcessDemo.THREAD_CPU_ENV))
                && java.nio.file.Files.isDirectory(java.nio.file.Path.of("/proc/self/task"));
        long pid = ProcessHandle.current().pid();
        Map<String, Long> threadsAtStart = byThread ? ProcessDemo.ThreadTicks.of(pid) : Map.of();
        DemoRunner.Report r = DemoRunner.run(o, workers, out, deviceMemory);
        Map<String, String> extra = new LinkedHashMap<>();
        if (byThread) {
            StringBuilder b = new StringBuilder();
            ProcessDemo.ThreadTicks.delta(threadsAtStart, ProcessDemo.ThreadTicks.of(pid)).forEach((k, v) -> {
                if (v >= 5) {
                    b.append(b.isEmpty() ? "" : ", ").append(String.format(Locale.ROOT, "%s %.2f", k,
                            v / (double) ProcessDemo.ThreadTicks.HZ));
                }
            });
            extra.put("CPU by thread group", b + " (s; " + ProcessDemo.THREAD_CPU_ENV + "=1; the run with its "
                    + "engines' start and stop; Linux thread names are cut at 15 characters)");
        }
        Map<String, Long> by = tally == null ? Map.of() : tally.drain();
        if (!by.isEmpty()) {
            StringBuilder b = new StringBuilder();
            by.forEach((k, v) -> b.append(b.isEmpty() ? "" : ", ")
                    .append(k).append(' ').append(Bytes.human(v)));
            extra.put("KV by transport", b + " (handed to each by the engines, P's writes)");
        }
        r.print(out, extra);
        return r.exitCode();
    }

    /** {@code o} with {@code requests} requests and another seed (a warm-up of the same shape). */
    static DemoRunner.Options withRequests(DemoRunner.Options o, int requests) {
        return new DemoRunner.Options(o.model(), requests, o.promptTokens(), o.sharedPrefixTokens(), o.decodeTokens(),
                o.pTp(), o.dTp(), o.protocol(), o.numBlocks(), o.concurrency(), o.seed() + 1, o.timeout(), o.device(),
                o.pGpu(), o.dGpu(), o.layerwise(), o.layerCompute(), o.sampling());
    }

    /** The options the flags ask for (rejects unknown flags). */
    static DemoRunner.Options parse(Flags flags) {
        DemoRunner.Options d = DemoRunner.Options.defaults();
        List<String> demoModels = ModelPreset.all().stream().filter(p -> !p.mla()).map(ModelPreset::name).toList();
        String modelName = flags.string("model", d.model().name());
        ModelPreset model = ModelPreset.all().stream().filter(p -> p.name().equals(modelName)).findFirst()
                .orElse(null);
        if (model == null || model.mla()) {
            throw new Flags.UsageException("--model " + modelName + ": "
                    + (model == null ? "unknown model preset" : "an MLA model; the demo's synthetic model needs K/V heads")
                    + "; the demo runs " + String.join(", ", demoModels));
        }
        String protocol = engineFlag(flags, d.protocol());
        int requests = positive(flags, "requests", d.requests());
        int promptTokens = positive(flags, "prompt-tokens", d.promptTokens());
        int shared = flags.intValue("shared-prefix", Math.min(d.sharedPrefixTokens(), promptTokens / 8));
        if (shared < 0 || shared > promptTokens) {
            throw new Flags.UsageException("--shared-prefix must be within 0..--prompt-tokens, got " + shared);
        }
        int decode = positive(flags, "decode-tokens", d.decodeTokens());
        int pTp = positive(flags, "p-tp", d.pTp());
        int dTp = positive(flags, "d-tp", d.dTp());
        for (int tp : new int[] {pTp, dTp}) {
            try {
                model.kvHeadsPerRank(tp);
            } catch (IllegalArgumentException e) {
                throw new Flags.UsageException("--" + (tp == pTp ? "p-tp " : "d-tp ") + tp + ": " + e.getMessage());
            }
        }
        int numBlocks = flags.intValue("num-blocks", 0);
        if (numBlocks < 0) {
            throw new Flags.UsageException("--num-blocks must be >= 0 (0 = auto), got " + numBlocks);
        }
        int concurrency = positive(flags, "concurrency", d.concurrency());
        long seed = flags.longValue("seed", d.seed());
        int timeout = positive(flags, "timeout", (int) d.timeout().toSeconds());
        String device = flags.string("device", "cpu").toLowerCase(Locale.ROOT);
        if (!device.equals("cpu") && !device.equals("cuda")) {
            throw new Flags.UsageException("--device must be cpu or cuda, got '" + device + "'");
        }
        int gpu = nonNegative(flags, "gpu-id", 0);
        int pGpu = nonNegative(flags, "p-gpu", gpu);
        int dGpu = nonNegative(flags, "d-gpu", gpu);
        if (device.equals("cuda") && (protocol.equals("auto") || protocol.equals("shm"))) {
            throw new Flags.UsageException("--device cuda needs --engine tcp: --engine " + protocol
                    + " puts the KV in shareable host memory");
        }
        if (device.equals("cuda") && protocol.equals("mock")) {
            throw new Flags.UsageException("--device cuda needs --engine tcp: the mock engine copies KV with the "
                    + "CPU and would touch GPU memory directly");
        }
        boolean layerwise = flags.bool("layerwise", false);
        int layerUs = flags.intValue("layer-compute-us", 0);
        if (layerUs < 0) {
            throw new Flags.UsageException("--layer-compute-us must be >= 0, got " + layerUs);
        }
        if (layerwise && device.equals("cuda")) {
            throw new Flags.UsageException("--layerwise needs --device cpu: the synthetic model writes GPU caches "
                    + "in whole forward passes");
        }
        String samplingName = flags.string("sampling", "prompt").toLowerCase(Locale.ROOT);
        SimEngine.Sampling sampling = switch (samplingName) {
            case "prompt" -> SimEngine.Sampling.PROMPT;
            case "kv" -> SimEngine.Sampling.KV;
            default -> throw new Flags.UsageException("--sampling must be prompt or kv, got '" + samplingName + "'");
        };
        flags.rejectUnknown();
        flags.rejectPositional();
        return new DemoRunner.Options(model, requests, promptTokens, shared, decode, pTp, dTp, protocol, numBlocks,
                concurrency, seed, Duration.ofSeconds(timeout), device, pGpu, dGpu, layerwise,
                Duration.ofNanos(layerUs * 1000L), sampling);
    }

    /** {@code --engine}, or its other spelling {@code --protocol}; both given must agree. */
    private static String engineFlag(Flags flags, String def) {
        String engine = flags.string("engine", null);
        String protocol = flags.string("protocol", null);
        if (engine != null && protocol != null && !engine.equalsIgnoreCase(protocol)) {
            throw new Flags.UsageException("--engine " + engine + " and --protocol " + protocol
                    + " disagree (they are the same flag)");
        }
        String v = (engine != null ? engine : protocol != null ? protocol : def).toLowerCase(Locale.ROOT);
        if (!v.equals("tcp") && !v.equals("mock") && !v.equals("auto") && !v.equals("shm")) {
            throw new Flags.UsageException("--engine must be tcp, auto, shm or mock, got '" + v + "'");
        }
        return v;
    }

    private static int nonNegative(Flags flags, String name, int def) {
        int v = flags.intValue(name, def);
        if (v < 0) {
            throw new Flags.UsageException("--" + name + " must be a GPU index >= 0, got " + v);
        }
        return v;
    }

    private static int positive(Flags flags, String name, int def) {
        int v = flags.intValue(name, def);
        if (v <= 0) {
            throw new Flags.UsageException("--" + name + " must be positive, got " + v);
        }
        return v;
    }
}
