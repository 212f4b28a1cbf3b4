package io.mooncake4j.serve;

import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.http.HttpLimits;
import io.mooncake4j.memory.ModelPreset;

import java.time.Duration;
import java.util.Objects;

/**
 * What one serving node runs ({@code bin/mooncake4j serve} flags, see {@code docs/serve.md}).
 *
 * @param model               the model shape
 * @param servedModelName     the name clients give as {@code model} and {@code /v1/models} lists
 * @param host                the address the HTTP server and the bootstrap server bind
 * @param port                the HTTP port; 0 = any free port
 * @param connector           the connector configuration: role, engine id, TP size, protocol,
 *                            {@code VLLM_MOONCAKE_*} values, advertised hostname
 * @param numBlocks           KV blocks per TP rank
 * @param device              {@code cpu} (host memory) or {@code cuda}
 * @param gpuId               with {@code cuda}: the GPU of every rank
 * @param transferEngine      the transfer engine of each rank: {@code tcp}, {@code rdma}, {@code auto},
 *                            or {@code mock} (in this JVM only, for tests)
 * @param maxModelLen         the longest prompt + completion accepted, in tokens
 * @param maxNumSeqs          requests the engine runs at once
 * @param maxNumBatchedTokens prompt tokens computed per engine step
 * @param maxPendingRequests  requests accepted at once (running or queued); more get 503
 * @param drainTimeout        how long a drain waits for in-flight requests and held KV blocks
 * @param http                the HTTP front door's deadlines and per-client shares ({@code --http-*} flags)
 */
public record ServeOptions(ModelPreset model, String servedModelName, String host, int port,
                           MooncakeConnectorConfig connector, int numBlocks, String device, int gpuId,
                           String transferEngine, int maxModelLen, int maxNumSeqs, int maxNumBatchedTokens,
                           int maxPendingRequests, Duration drainTimeout, HttpLimits http) {

    /** Options with the default HTTP limits ({@link HttpLimits#defaults()}). */
    public ServeOptions(ModelPreset model, String servedModelName, String host, int port,
            MooncakeConnectorConfig connector, int numBlocks, String device, int gpuId, String transferEngine,
            int maxModelLen, int maxNumSeqs, int maxNumBatchedTokens, int maxPendingRequests, Duration drainTimeout) {
        this(model, servedModelName, host, port, connector, numBlocks, device, gpuId, transferEngine, maxModelLen,
                maxNumSeqs, maxNumBatchedTokens, maxPendingRequests, drainTimeout, HttpLimits.defaults());
    }

    public ServeOptions {
        Objects.requireNonNull(model, "model");
        Objects.requireNonNull(servedModelName, "servedModelName");
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(connector, "connector");
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(transferEngine, "transferEngine");
        Objects.requireNonNull(drainTimeout, "drainTimeout");
        Objects.requireNonNull(http, "http");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be in 0..65535, got " + port);
        }
        if (numBlocks <= 0 || maxModelLen <= 0 || maxNumSeqs <= 0 || maxNumBatchedTokens <= 0
                || maxPendingRequests <= 0) {
            throw new IllegalArgumentException("blocks, max model length, max sequences, batched tokens and "
                    + "pending requests must be positive");
        }
        if (!device.equals("cpu") && !device.equals("cuda")) {
            throw new IllegalArgumentException("device must be cpu or cuda, got '" + device + "'");
        }
        if (device.equals("cuda") && transferEngine.equals("mock")) {
            throw new IllegalArgumentException("KV caches on the GPU need a real transfer engine (tcp): the mock "
                    + "engine copies KV with the CPU");
        }
        if (gpuId < 0) {
            throw new IllegalArgumentException("gpu id must be >= 0, got " + gpuId);
        }
        if (drainTimeout.isNegative()) {
            throw new IllegalArgumentException("drain timeout must be >= 0, got " + drainTimeout);
        }
        model.kvHeadsPerRank(connector.tpSize()); // validates TP against the KV heads
    }

    /** These options with other HTTP limits. */
    public ServeOptions withHttp(HttpLimits limits) {
        return new ServeOptions(model, servedModelName, host, port, connector, numBlocks, device, gpuId, transferEngine,
                maxModelLen, maxNumSeqs, maxNumBatchedTokens, maxPendingRequests, drainTimeout, limits);
    }

    /** Blocks per rank that fit {@code bytesPerRank} of KV for {@code model} at TP {@code tp} (at least 1). */
    public static int blocksFor(ModelPreset model, int tp, long bytesPerRank) {
        long perBlock = (long) model.numLayers() * model.pageBytes(tp);
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, bytesPerRank / perBlock));
    }

    /** KV bytes of the whole node (every rank). */
    public long kvBytes() {
        return (long) numBlocks * model.numLayers() * model.pageBytes(connector.tpSize()) * connector.tpSize();
    }
}
