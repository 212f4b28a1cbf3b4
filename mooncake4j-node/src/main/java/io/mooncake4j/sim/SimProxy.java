package io.mooncake4j.sim;

import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.BootstrapException;
import io.mooncake4j.connector.bootstrap.BootstrapQueryResult;
import io.mooncake4j.connector.bootstrap.EngineEntry;

import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;

/**
 * A disaggregated-serving proxy like vLLM's example
 * ({@code examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py}, spec §1): for each
 * request it picks a fresh {@code transfer_id = "xfer-<uuid>"}, sends the prefill request to the P
 * engine with {@code {do_remote_decode: true, do_remote_prefill: false, transfer_id}} and
 * {@code max_tokens = 1}, and — concurrently, without waiting for P — the decode request to the D
 * engine with {@code {do_remote_decode: false, do_remote_prefill: true, remote_bootstrap_addr,
 * remote_engine_id, transfer_id}}. The "HTTP calls" are in-process {@link SimEngine#submit} calls.
 *
 * <p>As in vLLM the two engines know the request under different ids (each engine adds its own
 * suffix); only the transfer id is shared. Thread-safe.
 */
public final class SimProxy {

    private final SimEngine prefill;
    private final SimEngine decode;
    private final String bootstrapUrl;
    private final String remoteEngineId;

    /**
     * A proxy from {@code prefill} to {@code decode}.
     *
     * @param bootstrapUrl   the P engine group's bootstrap server, {@code http://host:port}
     * @param remoteEngineId the P engine id as registered there (see {@link #resolveEngineId})
     */
    public SimProxy(SimEngine prefill, SimEngine decode, String bootstrapUrl, String remoteEngineId) {
        this.prefill = Objects.requireNonNull(prefill, "prefill");
        this.decode = Objects.requireNonNull(decode, "decode");
        this.bootstrapUrl = Objects.requireNonNull(bootstrapUrl, "bootstrapUrl");
        this.remoteEngineId = Objects.requireNonNull(remoteEngineId, "remoteEngineId");
    }

    /**
     * The engine id of data-parallel rank {@code dpRank} as the bootstrap server at {@code bootstrapUrl}
     * knows it ({@code GET /query}), as vLLM's proxy learns {@code remote_engine_id}.
     *
     * @throws BootstrapException when the server cannot be queried or has no such rank
     */
    public static String resolveEngineId(String bootstrapUrl, int dpRank) {
        try (BootstrapClient client = new BootstrapClient()) {
            BootstrapQueryResult r = client.query(bootstrapUrl);
            EngineEntry e = r.engines().get(dpRank);
            if (e == null) {
                throw new BootstrapException(String.format(Locale.ROOT,
                        "bootstrap server %s has no engine for dp rank %d (registered: %s)", bootstrapUrl, dpRank,
                        r.engines().keySet()), BootstrapException.NO_RESPONSE, "", null);
            }
            return e.engineId();
        }
    }

    /** A fresh transfer id: {@code "xfer-" + UUID}, as vLLM's proxy makes them. */
    public static String newTransferId() {
        return "xfer-" + UUID.randomUUID();
    }

    /** The P request's {@code kv_transfer_params}. */
    public static Map<String, Object> prefillParams(String transferId) {
        return KvTransferParams.forRemoteDecode(transferId).asMap();
    }

    /** The D request's {@code kv_transfer_params}. */
    public static Map<String, Object> decodeParams(String transferId, String remoteEngineId, String bootstrapUrl) {
        return KvTransferParams.forRemotePrefill(transferId, remoteEngineId, bootstrapUrl).asMap();
    }

    /**
     * The two answers of one proxied request.
     *
     * @param transferId the shared transfer id
     * @param prefill    P's result (one token, KV kept until sent)
     * @param decode     D's result (the tokens the client sees)
     */
    public record Exchange(String transferId, SimResult prefill, SimResult decode) {

        /** Both sides succeeded and D's first token equals P's (both computed from the same KV). */
        public boolean ok() {
            return prefill.ok() && decode.ok() && prefill.outputTokens().length == 1
                    && decode.outputTokens().length > 0 && decode.outputTokens()[0] == prefill.outputTokens()[0];
        }

        /** Nanoseconds from P's end of prefill to D's KV being ready (the transfer latency); 0 if unknown. */
        public long transferLatencyNanos() {
            return Math.max(0, decode.kvReadyNanos() - prefill.kvReadyNanos());
        }
    }

    /**
     * Sends one request to both engines at once.
     *
     * @param requestId    the client's request id; P and D see {@code <id>-p} and {@code <id>-d}
     * @param prompt       prompt token ids
     * @param decodeTokens {@code max_tokens} of the decode request
     */
    public CompletableFuture<Exchange> submit(String requestId, int[] prompt, int decodeTokens) {
        String transferId = newTransferId();
        CompletableFuture<SimResult> p = prefill.submit(requestId + "-p", prompt, 1, prefillParams(transferId));
        CompletableFuture<SimResult> d = decode.submit(requestId + "-d", prompt, decodeTokens,
                decodeParams(transferId, remoteEngineId, bootstrapUrl));
        return p.thenCombine(d, (pr, dr) -> new Exchange(transferId, pr, dr));
    }

    /** The bootstrap URL given to D requests. */
    public String bootstrapUrl() {
        return bootstrapUrl;
    }

    /** The remote engine id given to D requests. */
    public String remoteEngineId() {
        return remoteEngineId;
    }
}
