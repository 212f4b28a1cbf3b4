package io.mooncake4j.serve;

import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.BootstrapException;
import io.mooncake4j.connector.bootstrap.EngineEntry;
import io.mooncake4j.sim.KvLayouts;
import io.mooncake4j.sim.SimEngine;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A decode node's check of the prefill node's KV layout, before a {@code do_remote_prefill} request is
 * admitted, whichever router sent it: when the request's {@code kv_transfer_params} carry P's layout
 * ({@link SimEngine#KV_LAYOUT_PARAM}, a router that forwards P's answer) the engine compares it; otherwise
 * this asks P's bootstrap server ({@code remote_bootstrap_addr}, {@code GET /query}) for the layout P's
 * workers registered with their side-channel addresses
 * ({@link io.mooncake4j.connector.bootstrap.RegisterWorkerPayload#KV_LAYOUT_KEY}) — the way vLLM's proxy and
 * ours work, sending P and D at once. A different layout is refused with HTTP 400 naming both, before the
 * engine sees the request (no block allocated, no byte pulled).
 *
 * <p>A P that registered no layout (vLLM's, or a synthetic-model node) cannot be compared and is let
 * through; so is a bootstrap server that cannot be reached now (the connector then fails the load as
 * vLLM's does). Answers are kept per (bootstrap address, engine id) — an engine id names one engine
 * start — in a table of at most {@value #MAX_ENTRIES} entries (cleared when full), so one query per P.
 */
final class PeerLayouts implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(PeerLayouts.class);
    /** Most (address, engine id) answers kept. */
    static final int MAX_ENTRIES = 1024;
    /** Stands for "P registered no layout" in the table. */
    private static final String NONE = "";

    private final String ours;
    private final BootstrapClient client;
    private final Map<String, String> known = new ConcurrentHashMap<>();

    /**
     * @param ours this node's layout ({@link SimEngine#kvLayout()}); null makes every check pass
     */
    PeerLayouts(String ours) {
        this.ours = ours;
        this.client = ours == null ? null : new BootstrapClient(Duration.ofSeconds(5), Duration.ofSeconds(1));
    }

    /**
     * Refuses a decode request whose prefill node's layout differs from this node's.
     *
     * @param requestId the request's id (named in the error)
     * @param params    the request's {@code kv_transfer_params}, or null
     * @throws OpenAiError 400 {@code BadRequestError} naming both layouts
     */
    void check(String requestId, Map<String, Object> params) {
        if (ours == null || params == null || !KvTransferParams.isTruthy(params.get(KvTransferParams.DO_REMOTE_PREFILL))
                || params.containsKey(SimEngine.KV_LAYOUT_PARAM)) { // the engine compares a forwarded layout
            return;
        }
        String addr = KvTransferParams.stringValue(params.get(KvTransferParams.REMOTE_BOOTSTRAP_ADDR));
        String engineId = KvTransferParams.stringValue(params.get(KvTransferParams.REMOTE_ENGINE_ID));
        if (addr == null || engineId == null) {
            return;
        }
        Optional<String> theirs = layoutOf(addr, engineId);
        if (theirs.isPresent() && !theirs.get().equals(ours)) {
            throw OpenAiError.badRequest("kv_transfer_params", KvLayouts.mismatchMessage(requestId, theirs.get(), ours));
        }
    }

    /** P's registered layout, empty when it registered none or cannot be asked now. */
    private Optional<String> layoutOf(String addr, String engineId) {
        String key = addr + " " + engineId;
        String cached = known.get(key);
        if (cached == null) {
            Optional<EngineEntry> e;
            try {
                e = client.query(addr).engine(engineId);
            } catch (BootstrapException ex) {
                LOG.debug("cannot ask {} for the KV layout of engine {}: {}", addr, engineId, ex.getMessage());
                return Optional.empty(); // not cached: asked again next time
            }
            if (e.isEmpty()) {
                return Optional.empty(); // not registered yet: the connector waits for it as vLLM's does
            }
            cached = Objects.requireNonNullElse(e.get().kvLayout(), NONE);
            if (known.size() >= MAX_ENTRIES) {
                known.clear();
            }
            known.put(key, cached);
        }
        return cached.isEmpty() ? Optional.empty() : Optional.of(cached);
    }

    @Override
    public void close() {
        if (client != null) {
            client.close();
        }
    }
}
