package io.mooncake4j.cli;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import io.mooncake4j.http.HttpLimits;
import io.mooncake4j.serve.ServeNode;
import io.mooncake4j.serve.ServeOptions;

import java.io.PrintStream;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * {@code bin/mooncake4j serve}: one serving node (a {@link ServeNode}) until SIGTERM or Ctrl-C, which
 * drain it and exit 0.
 */
final class ServeCommand implements CliCommand {

    static final String DEFAULT_KV_TRANSFER_CONFIG = "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_both\"}";
    static final long DEFAULT_KV_BYTES_PER_RANK = 1L << 30;

    @Override
    public String name() {
        return "serve";
    }

    @Override
    public String summary() {
        return "run one serving node (P, D or both) with vLLM's OpenAI-compatible HTTP contract";
    }

    @Override
    public String usage() {
        return String.join("\n",
                "usage: bin/mooncake4j serve [flags]",
                "",
                "Runs one serving node like `vllm serve` in a Mooncake P/D deployment: the reference serving engine",
                "(scheduler, TP workers with the Mooncake connector, a synthetic model) behind an HTTP server with",
                "GET /health, GET /v1/models, POST /v1/completions and POST /v1/chat/completions (stream or not),",
                "honouring kv_transfer_params as vLLM's MooncakeConnector does. A P (or kv_both) node runs the",
                "bootstrap server. SIGTERM or Ctrl-C drains the node (no new requests, in-flight ones finish, KV held",
                "for decode nodes is pulled) and exits 0. See docs/serve.md.",
                "",
                "flags:",
                String.format(Locale.ROOT, "  --model NAME                  model preset (%s), default %s",
                        String.join(", ", ModelPreset.all().stream().filter(p -> !p.mla()).map(ModelPreset::name)
                                .toList()), ModelPreset.LLAMA_3_8B.name()),
                "  --model DIR                   a model directory (make-model --tiny DIR, or a Llama/Mistral/Qwen2",
                "                                safetensors checkpoint): real text through Jlama (TP 1, host memory)",
                "  --dtype F32|BF16              with --model DIR: the KV and activation dtype, default F32",
                "  --served-model-name NAME      the name clients use as \"model\", default the preset's",
                "  --host ADDR                   address of the HTTP and bootstrap servers, default 0.0.0.0",
                "  --port N                      HTTP port (0 = any free port), default 8000",
                "  --tensor-parallel-size N, -tp N   TP workers in this process, default 1",
                "  --kv-transfer-config JSON     vLLM's kv_transfer_config: kv_connector, kv_role, engine_id (a uuid4",
                "                                when absent), kv_connector_extra_config (mooncake_protocol, default",
                "                                rdma as vLLM; num_workers; bootstrap_server_address); default",
                "                                " + DEFAULT_KV_TRANSFER_CONFIG,
                "                                or {\"kv_connector\":\"MooncakeStoreConnector\",...} with --model DIR:",
                "                                the fleet's KV pool in Mooncake Store (MOONCAKE_CONFIG_PATH; docs/store-connector.md)",
                "                                or vLLM's MultiConnector of MooncakeConnector, then MooncakeStoreConnector",
                "  --prefix-caching-hash-algo A  sha256 (default) or sha256_cbor: the store connector's block hash",
                "  --num-gpu-blocks N            KV blocks per TP rank (overrides --kv-cache-memory)",
                "  --kv-cache-memory SIZE        KV memory per TP rank (e.g. 512M, 2G), default 1G",
                "  --device cpu|cuda             where the KV caches live, default cpu; cuda needs a real engine (tcp, or auto:\n"
                + "                                cuda-ipc between processes on one machine)",
                "  --gpu-id N                    with --device cuda: the GPU of every rank, default 0",
                "  --transfer-engine KIND        tcp, rdma, auto, or mock (in-JVM, tests); default the",
                "                                kv_transfer_config's mooncake_protocol",
                "  --max-model-len N             longest prompt + completion in tokens, default what the KV holds",
                "  --max-num-seqs N              requests the engine runs at once, default 64",
                "  --max-num-batched-tokens N    prompt tokens per engine step, default 8192",
                "  --max-pending N               requests accepted at once (more get 503), default 1024",
                "  --drain-timeout SECONDS       how long SIGTERM waits for in-flight requests, default 30",
                String.join("\n", HttpLimits.usage()),
                "",
                "environment: VLLM_MOONCAKE_BOOTSTRAP_PORT (bootstrap server port, default 8998; 0 = any free port),",
                "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT (seconds P holds KV for a decode node, default 480),",
                "VLLM_HOST_IP (the address advertised to peers; default --host, or this host's address).");
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) throws Exception {
        String modelFlag = flags.string("model", ModelPreset.LLAMA_3_8B.name());
        io.mooncake4j.sim.KvPool.Factory pool = storePool(flags, System.getenv(), modelFlag);
        ServeOptions o;
        ServeNode node;
        if (isModelDirectory(modelFlag)) {
            // vLLM's convention: --model names a checkpoint directory; a preset name keeps the synthetic model
            io.mooncake4j.model.JlamaModel model;
            try {
                model = io.mooncake4j.model.JlamaModel.load(java.nio.file.Path.of(modelFlag),
                        flags.string("dtype", "F32"));
            } catch (IllegalArgumentException e) {
                throw new Flags.UsageException("--model " + modelFlag + ": " + e.getMessage());
            }
            try {
                o = parse(flags, System.getenv(), model);
            } catch (RuntimeException e) {
                model.close();
                throw e;
            }
            String kind = o.transferEngine();
            node = ServeNode.startWithModel(o, model, cfg -> TransferEngines.create(kind), pool);
        } else {
            o = parse(flags, System.getenv());
            node = ServeNode.start(o, o.device().equals("cuda") ? CudaDeviceMemory.INSTANCE : null);
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            err.println("mooncake4j serve: stopping: draining for up to " + o.drainTimeout().toSeconds() + " s");
            node.close();
            err.println("mooncake4j serve: stopped");
            out.flush();
            err.flush();
            stopped.countDown();
            // a JVM ended by SIGTERM exits 143; a drained node exits 0
            Runtime.getRuntime().halt(0);
        }, "mooncake-serve-shutdown-0");
        Runtime.getRuntime().addShutdownHook(hook);
        out.println(node.describe());
        out.println("mooncake4j serve: ready on " + node.url());
        out.flush();
        while (!stopped.await(1, TimeUnit.SECONDS)) {
            Throwable f = node.engine().failure();
            if (f != null) {
                Runtime.getRuntime().removeShutdownHook(hook);
                err.println("mooncake4j serve: the engine stopped after an error: " + f);
                node.close();
                return 1;
            }
        }
        return 0;
    }

    /** The node the flags and {@code env} ask for (rejects unknown flags). */
    static ServeOptions parse(Flags flags, Map<String, String> env) {
        return parse(flags, env, null);
    }

    /** Whether {@code --model} names a model directory (a path) rather than a preset. */
    static boolean isModelDirectory(String model) {
        return model.contains("/") || java.nio.file.Files.isDirectory(java.nio.file.Path.of(model));
    }

    /**
     * As {@link #parse(Flags, Map)}; with {@code real} the KV shape is the real model's (TP 1, host memory,
     * blocks of 16), the served name its directory's, and the longest request its context.
     */
    static ServeOptions parse(Flags flags, Map<String, String> env, io.mooncake4j.model.JlamaModel real) {
        ModelPreset model;
        try {
            model = real != null ? real.kvShape(16)
                    : ModelPreset.byName(flags.string("model", ModelPreset.LLAMA_3_8B.name()));
        } catch (IllegalArgumentException e) {
            // a bare name is a preset; a checkpoint is a directory, which this node does not download
            throw new Flags.UsageException(real == null ? e.getMessage() + "; or a checkpoint directory (this node "
                    + "does not download models)" : e.getMessage());
        }
        if (model.mla()) {
            throw new Flags.UsageException("--model " + model.name() + " is an MLA model; the synthetic model needs "
                    + "K/V heads (use llama-3-8b, llama-3-70b or tiny)");
        }
        String served = flags.string("served-model-name", real != null
                ? String.valueOf(real.dir().toAbsolutePath().normalize().getFileName()) : model.name());
        String host = flags.string("host", "0.0.0.0");
        int port = flags.intValue("port", 8000);
        if (port < 0 || port > 65535) {
            throw new Flags.UsageException("--port must be in 0..65535, got " + port);
        }
        int tp = flags.has("tp") ? flags.intValue("tp", 1) : flags.intValue("tensor-parallel-size", 1);
        if (tp <= 0) {
            throw new Flags.UsageException("--tensor-parallel-size must be positive, got " + tp);
        }
        try {
            model.kvHeadsPerRank(tp);
        } catch (IllegalArgumentException e) {
            throw new Flags.UsageException("--tensor-parallel-size: " + e.getMessage());
        }
        String json = flags.string("kv-transfer-config", DEFAULT_KV_TRANSFER_CONFIG);
        json = KvConnectors.split(json).p2p(); // the store connector's part is storePool's
        String hostname = advertisedHost(host, env);
        MooncakeConnectorConfig connector;
        try {
            connector = MooncakeConnectorConfig.fromKvTransferConfigJson(json, env).hostname(hostname).tp(0, tp)
                    .build();
        } catch (MooncakeConfigException e) {
            throw new Flags.UsageException("--kv-transfer-config: " + e.getMessage());
        }
        int numBlocks;
        if (flags.has("num-gpu-blocks")) {
            numBlocks = flags.intValue("num-gpu-blocks", 0);
            if (numBlocks <= 0) {
                throw new Flags.UsageException("--num-gpu-blocks must be positive, got " + numBlocks);
            }
            flags.string("kv-cache-memory", null);
        } else {
            long bytes = flags.longValue("kv-cache-memory", DEFAULT_KV_BYTES_PER_RANK);
            long perBlock = (long) model.numLayers() * model.pageBytes(tp);
            if (bytes < perBlock) {
                throw new Flags.UsageException(String.format(Locale.ROOT, "--kv-cache-memory %d is less than one "
                        + "block of model %s at TP %d (%d bytes)", bytes, model.name(), tp, perBlock));
            }
            numBlocks = ServeOptions.blocksFor(model, tp, bytes);
        }
        String device = flags.string("device", "cpu").toLowerCase(Locale.ROOT);
        if (!device.equals("cpu") && !device.equals("cuda")) {
            throw new Flags.UsageException("--device must be cpu or cuda, got '" + device + "'");
        }
        int gpu = flags.intValue("gpu-id", 0);
        if (gpu < 0) {
            throw new Flags.UsageException("--gpu-id must be >= 0, got " + gpu);
        }
        String engine = flags.string("transfer-engine", connector.protocol()).toLowerCase(Locale.ROOT);
        if (!TransferEngines.kinds().contains(engine)) {
            throw new Flags.UsageException("--transfer-engine must be one of " + TransferEngines.kinds() + ", got '"
                    + engine + "'");
        }
        if (device.equals("cuda") && engine.equals("mock")) {
            throw new Flags.UsageException("--device cuda needs a real transfer engine (tcp): the mock engine copies "
                    + "KV with the CPU");
        }
        int capacity = (int) Math.min(Integer.MAX_VALUE, (long) numBlocks * model.blockSize());
        if (real != null) {
            if (tp != 1 || !device.equals("cpu")) {
                throw new Flags.UsageException("a model directory runs at --tensor-parallel-size 1 on --device cpu");
            }
            capacity = Math.min(capacity, real.contextLength());
        }
        int maxModelLen = flags.intValue("max-model-len", capacity);
        if (maxModelLen <= 1 || maxModelLen > capacity) {
            throw new Flags.UsageException(String.format(Locale.ROOT, "--max-model-len must be in 2..%d (what %d "
                    + "blocks of %d tokens hold), got %d", capacity, numBlocks, model.blockSize(), maxModelLen));
        }
        int maxNumSeqs = positive(flags, "max-num-seqs", 64);
        int batched = positive(flags, "max-num-batched-tokens", 8192);
        int pending = positive(flags, "max-pending", 1024);
        int drain = flags.intValue("drain-timeout", 30);
        if (drain < 0) {
            throw new Flags.UsageException("--drain-timeout must be >= 0, got " + drain);
        }
        HttpLimits http;
        try {
            http = HttpLimits.from(name -> flags.string(name, null), env);
        } catch (IllegalArgumentException e) {
            throw new Flags.UsageException(e.getMessage());
        }
        flags.rejectUnknown();
        return new ServeOptions(model, served, host, port, connector, numBlocks, device, gpu, engine, maxModelLen,
                maxNumSeqs, batched, pending, Duration.ofSeconds(drain), http);
    }

    /**
     * The store connector's pool when {@code --kv-transfer-config} names {@code MooncakeStoreConnector}
     * (with {@code --model DIR}), else null; {@code --prefix-caching-hash-algo} picks the block hash.
     */
    static io.mooncake4j.sim.KvPool.Factory storePool(Flags flags, Map<String, String> env, String modelFlag) {
        String json = KvConnectors.split(flags.string("kv-transfer-config", DEFAULT_KV_TRANSFER_CONFIG)).store();
        String algo = flags.string("prefix-caching-hash-algo", "sha256");
        if (json == null) {
            return null;
        }
        if (!isModelDirectory(modelFlag)) {
            throw new Flags.UsageException("--kv-transfer-config MooncakeStoreConnector needs --model DIR (a real model)");
        }
        try {
            return io.mooncake4j.sim.StoreKvPool.factory(io.mooncake4j.store.connector.StoreConnectorConfig.from(json, env,
                    java.nio.file.Path.of(modelFlag).toAbsolutePath().normalize().toString(), algo));
        } catch (MooncakeConfigException e) {
            throw new Flags.UsageException("--kv-transfer-config: " + e.getMessage());
        }
    }

    /** vLLM's {@code get_ip()}: {@code VLLM_HOST_IP}, else the bind address, else this host's address. */
    static String advertisedHost(String host, Map<String, String> env) {
        String ip = env.get("VLLM_HOST_IP");
        if (ip != null && !ip.isBlank()) {
            return ip.trim();
        }
        if (!host.equals("0.0.0.0") && !host.equals("::")) {
            return host;
        }
        try {
            return InetAddress.getLocalHost().getHostAddress();
        } catch (UnknownHostException e) {
            throw new Flags.UsageException("cannot find this host's address (" + e.getMessage() + "); set VLLM_HOST_IP "
                    + "or --host to the address peers reach this node at");
        }
    }

    private static int positive(Flags flags, String name, int def) {
        int v = flags.intValue(name, def);
        if (v <= 0) {
            throw new Flags.UsageException("--" + name + " must be positive, got " + v);
        }
        return v;
    }
}
