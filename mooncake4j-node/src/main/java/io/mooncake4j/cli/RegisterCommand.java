package io.mooncake4j.cli;

import io.mooncake4j.MooncakeException;
import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.worker.EngineInitializationException;
import io.mooncake4j.connector.worker.KvRegistration;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.connector.worker.RegisteredRegion;
import io.mooncake4j.connector.worker.RegistrationPlan;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.MemoryStorage;
import io.mooncake4j.memory.ModelPreset;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * {@code bin/mooncake4j register}: allocates host KV caches for a model preset, registers them
 * through a {@link MooncakeConnectorWorker} and prints the registration plan, so a deployment can
 * check registration (bytes, storages, locked-memory limit) before serving.
 */
final class RegisterCommand implements CliCommand {

    @Override
    public String name() {
        return "register";
    }

    @Override
    public String summary() {
        return "allocate host KV caches for a model, register them, print the registration plan";
    }

    @Override
    public String usage() {
        return """
                usage: bin/mooncake4j register [flags]
                  --model NAME         model preset: %s (default llama-3-8b)
                  --num-blocks N       KV blocks per layer (default 256)
                  --layout L           fused | split-kv | mla | shared (default fused; mla for MLA models)
                  --tp N               tensor-parallel size; KV heads are split across ranks (default 1)
                  --engine KIND        transfer engine: %s (default mock: in-JVM, no network)
                  --protocol P         the protocol the engine is initialised with (default: the engine's,
                                       tcp for mock)
                  --role R             kv_producer | kv_consumer | kv_both (default kv_producer)
                  --json               print the plan as JSON
                  --fail-register      make the mock engine fail registration (shows the failure path)"""
                .formatted(ModelPreset.all().stream().map(ModelPreset::name).toList(), TransferEngines.kinds());
    }

    @Override
    public Set<String> flagNames() {
        return Set.of("model", "num-blocks", "layout", "tp", "engine", "protocol", "role", "json", "fail-register");
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) {
        ModelPreset preset;
        KvCacheLayout layout;
        KvRole role;
        String modelName = flags.string("model", "llama-3-8b");
        int numBlocks = flags.positiveInt("num-blocks", 256);
        String layoutName = flags.string("layout", null);
        int tp = flags.positiveInt("tp", 1);
        String engineKind = flags.string("engine", "mock").toLowerCase(Locale.ROOT);
        if (!TransferEngines.kinds().contains(engineKind)) {
            throw new Flags.UsageException("--engine must be one of " + String.join(", ", TransferEngines.kinds())
                    + ", got '" + engineKind + "'");
        }
        String defaultProtocol = switch (engineKind) {
            case "rdma" -> "rdma";
            case "auto" -> "auto";
            default -> "tcp";
        };
        String protocol = flags.string("protocol", defaultProtocol).toLowerCase(Locale.ROOT);
        if (!engineKind.equals("mock") && !engineKind.equals("auto") && !protocol.equals(defaultProtocol)) {
            throw new Flags.UsageException("--protocol " + protocol + " does not fit --engine " + engineKind
                    + " (the " + engineKind + " engine speaks " + defaultProtocol + ")");
        }
        String roleName = flags.string("role", "kv_producer");
        boolean json = flags.bool("json", false);
        boolean failRegister = flags.bool("fail-register", false);
        flags.rejectUnknown();
        flags.rejectPositional();
        try {
            preset = ModelPreset.byName(modelName);
        } catch (IllegalArgumentException e) {
            throw new Flags.UsageException("--model: " + e.getMessage());
        }
        try {
            layout = layoutName == null ? (preset.mla() ? KvCacheLayout.MLA : KvCacheLayout.FUSED)
                    : KvCacheLayout.byName(layoutName);
        } catch (IllegalArgumentException e) {
            throw new Flags.UsageException("--layout: " + e.getMessage());
        }
        try {
            role = KvRole.parse(roleName);
        } catch (IllegalArgumentException | MooncakeException e) {
            throw new Flags.UsageException("--role: " + e.getMessage());
        }
        try {
            preset.kvHeadsPerRank(tp);
        } catch (IllegalArgumentException e) {
            throw new Flags.UsageException("--tp " + tp + ": " + e.getMessage());
        }
        if (failRegister && !engineKind.equals("mock")) {
            throw new Flags.UsageException("--fail-register works only with --engine mock, got --engine " + engineKind);
        }
        MooncakeConnectorConfig config = MooncakeConnectorConfig.builder()
                .kvRole(role)
                .engineId("mooncake4j-register")
                .protocol(protocol)
                .hostname("127.0.0.1")
                .tp(0, tp)
                .build();
        try (HostMemoryAllocator alloc = new HostMemoryAllocator();
             TransferEngine engine = TransferEngines.create(engineKind)) {
            if (failRegister && engine instanceof ScriptedTransferEngine scripted) {
                scripted.script(EngineMethod.BATCH_REGISTER_MEMORY).alwaysReturn(ErrorCodes.INVALID_ARGUMENT);
            }
            KvCaches caches = KvCaches.allocate(preset, tp, numBlocks, layout, alloc::allocate);
            MooncakeConnectorWorker started;
            try {
                started = new MooncakeConnectorWorker(config, engine, caches.config());
            } catch (EngineInitializationException e) {
                String why = TransferEngines.lastError(engine);
                err.printf(Locale.ROOT, "mooncake4j register: --engine %s did not start (initialize returned %d)%s; "
                                + "try --engine tcp, or --engine mock to see the plan without a network%n", engineKind,
                        e.returnCode(), why == null ? "" : ": " + why);
                return 1;
            }
            try (MooncakeConnectorWorker worker = started) {
                RegistrationPlan plan = worker.planRegistration(caches.tensorsByLayer());
                if (!json) {
                    printPlan(out, preset, layout, tp, numBlocks, engineKind, role, plan);
                }
                KvRegistration reg;
                try {
                    reg = worker.registerKvCaches(plan);
                } catch (MooncakeException e) {
                    if (json) {
                        Map<String, Object> root = jsonRoot(preset, layout, tp, numBlocks, engineKind, role, plan);
                        root.put("registered", false);
                        root.put("error", e.getMessage());
                        out.println(Json.write(root));
                    }
                    err.println("mooncake4j register: " + e.getMessage());
                    return 1;
                }
                if (json) {
                    Map<String, Object> root = jsonRoot(preset, layout, tp, numBlocks, engineKind, role, plan);
                    root.put("registered", true);
                    root.put("rpc_port", worker.rpcPort());
                    root.put("side_channel_port", worker.sideChannelPort());
                    out.println(Json.write(root));
                } else {
                    out.printf(Locale.ROOT, "registered: %d storage(s) in one batchRegisterMemory call, "
                                    + "%d transfer region(s)%n", reg.storages().size(), reg.regionCount());
                    out.printf(Locale.ROOT, "engine rpc port %d; side channel %s%n", worker.rpcPort(),
                            role.isConsumer() ? "none (kv_consumer)" : "tcp://127.0.0.1:" + worker.sideChannelPort());
                }
                return 0;
            }
        }
    }

    private static Map<String, Object> jsonRoot(ModelPreset preset, KvCacheLayout layout, int tp, int numBlocks,
                                                String engine, KvRole role, RegistrationPlan plan) {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("model", preset.name());
        root.put("layout", layout.cliName());
        root.put("tp", tp);
        root.put("num_blocks", numBlocks);
        root.put("engine", engine);
        root.put("role", role.wireName());
        root.put("plan", plan.toJsonTree());
        return root;
    }

    private static void printPlan(PrintStream out, ModelPreset preset, KvCacheLayout layout, int tp, int numBlocks,
                                  String engine, KvRole role, RegistrationPlan plan) {
        out.printf(Locale.ROOT, "model %s, layout %s, tp %d, %d blocks per layer, engine %s, protocol %s, role %s%n",
                preset.name(), layout.cliName(), tp, numBlocks, engine, plan.protocol(), role.wireName());
        out.println();
        out.printf(Locale.ROOT, "regions (%d, in layer order):%n", plan.regions().size());
        out.printf(Locale.ROOT, "  %-4s %-32s %5s %5s %-18s %10s %12s %6s%n",
                "#", "layer", "index", "group", "base", "block_len", "kv_block_len", "blocks");
        int i = 0;
        for (RegisteredRegion r : plan.regions()) {
            out.printf(Locale.ROOT, "  %-4d %-32s %5d %5d 0x%016x %10d %12d %6d%n", i++, r.layerName(),
                    r.layerIndex(), r.groupIndex(), r.baseAddress(), r.blockLen(), r.kvBlockLen(), r.numBlocks());
        }
        if (!plan.skippedLayers().isEmpty()) {
            out.printf(Locale.ROOT, "skipped (no KV spec): %s%n", plan.skippedLayers());
        }
        out.println();
        out.printf(Locale.ROOT, "unique storages (%d, registered in one batch):%n", plan.storages().size());
        out.printf(Locale.ROOT, "  %-4s %-18s %14s %10s %-8s %7s%n", "#", "address", "bytes", "size", "location",
                "regions");
        i = 0;
        for (MemoryStorage s : plan.storages()) {
            out.printf(Locale.ROOT, "  %-4d 0x%016x %14d %10s %-8s %7d%n", i++, s.address(), s.byteSize(),
                    Bytes.human(s.byteSize()), s.location(), plan.regionCount(s));
        }
        out.println();
        out.printf(Locale.ROOT, "total: %s (%d bytes) at %s%n", Bytes.human(plan.totalBytes()), plan.totalBytes(),
                plan.locations());
        out.printf(Locale.ROOT, "memlock (RLIMIT_MEMLOCK soft): %s%n", plan.memlockText());
        plan.memlockWarning().ifPresent(w -> out.println("warning: " + w));
        plan.locationProblem().ifPresent(p -> out.println("error: " + p));
        out.println();
    }
}
