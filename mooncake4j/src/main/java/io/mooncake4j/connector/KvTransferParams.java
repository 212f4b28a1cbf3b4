package io.mooncake4j.connector;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Typed access to a request's {@code kv_transfer_params}: the keys the connector reads and writes
 * (spec §2.7) over the request's own mutable {@code Map<String, Object>}.
 *
 * <p>An instance is a <em>view</em>: it holds no state of its own, reads go to the map and writes
 * change the map (vLLM's connector writes {@code do_remote_prefill = False} into the request's
 * params, and the embedder sees that). Values are whatever the embedder put there (typically
 * what a JSON parser produced); flags are read with Python truthiness ({@link #isTruthy}), as
 * vLLM's {@code params.get(key)} tests do.
 *
 * <p>Not thread-safe; the map belongs to the request and is touched on the scheduler thread.
 *
 * <p>The NIXL keys {@code remote_host}, {@code remote_port}, {@code remote_block_ids} and
 * {@code remote_request_id} are ignored by the Mooncake connector.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py</a>
 */
public final class KvTransferParams {

    /** D: truthy → the prompt KV comes from P; cleared by the connector after first handling. */
    public static final String DO_REMOTE_PREFILL = "do_remote_prefill";
    /** P: truthy → the request's KV must be pushed to a D after prefill. */
    public static final String DO_REMOTE_DECODE = "do_remote_decode";
    /** P and D: the rendezvous key chosen by the proxy. */
    public static final String TRANSFER_ID = "transfer_id";
    /** D: the engine id of the P engine that holds the KV. */
    public static final String REMOTE_ENGINE_ID = "remote_engine_id";
    /** D: base URL of P's bootstrap server, e.g. {@code "http://10.0.0.2:8998"}. */
    public static final String REMOTE_BOOTSTRAP_ADDR = "remote_bootstrap_addr";
    /** P (internal): set after the Mamba N−1 prompt truncation (not implemented by mooncake4j yet). */
    public static final String P_SIDE_TRUNCATED = "_p_side_truncated";

    private final Map<String, Object> map;

    private KvTransferParams(Map<String, Object> map) {
        this.map = Objects.requireNonNull(map, "kv_transfer_params map");
    }

    /**
     * {@return a view over {@code map} (not a copy)}
     *
     * @param map the parameters map (not copied)
     */
    public static KvTransferParams wrap(Map<String, Object> map) {
        return new KvTransferParams(map);
    }

    /**
     * The params a proxy gives the prefill (P) request, in vLLM's proxy key order:
     * {@code {do_remote_decode: true, do_remote_prefill: false, transfer_id}}.
     *
     * @param transferId the transfer id the proxy gave both P and D
     * @return the params of P's request
     */
    public static KvTransferParams forRemoteDecode(String transferId) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(DO_REMOTE_DECODE, Boolean.TRUE);
        m.put(DO_REMOTE_PREFILL, Boolean.FALSE);
        m.put(TRANSFER_ID, Objects.requireNonNull(transferId, "transferId"));
        return new KvTransferParams(m);
    }

    /**
     * The params a proxy gives the decode (D) request, in vLLM's proxy key order:
     * {@code {do_remote_decode: false, do_remote_prefill: true, remote_bootstrap_addr,
     * remote_engine_id, transfer_id}}.
     *
     * @param transferId          the transfer id the proxy gave both P and D
     * @param remoteEngineId      P's engine id
     * @param remoteBootstrapAddr the URL of P's bootstrap server
     * @return the params of D's request
     */
    public static KvTransferParams forRemotePrefill(String transferId, String remoteEngineId,
            String remoteBootstrapAddr) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(DO_REMOTE_DECODE, Boolean.FALSE);
        m.put(DO_REMOTE_PREFILL, Boolean.TRUE);
        m.put(REMOTE_BOOTSTRAP_ADDR, Objects.requireNonNull(remoteBootstrapAddr, "remoteBootstrapAddr"));
        m.put(REMOTE_ENGINE_ID, Objects.requireNonNull(remoteEngineId, "remoteEngineId"));
        m.put(TRANSFER_ID, Objects.requireNonNull(transferId, "transferId"));
        return new KvTransferParams(m);
    }

    /** {@return the underlying mutable map} */
    public Map<String, Object> asMap() {
        return map;
    }

    /** {@return Python's {@code not params} for a present map: true when it has no entries} */
    public boolean isEmpty() {
        return map.isEmpty();
    }

    /**
     * {@return Python's {@code key in params}: present, whatever the value (even {@code null})}
     *
     * @param key the key
     */
    public boolean containsKey(String key) {
        return map.containsKey(key);
    }

    /** {@return {@code bool(params.get("do_remote_prefill"))}} */
    public boolean doRemotePrefill() {
        return isTruthy(map.get(DO_REMOTE_PREFILL));
    }

    /**
     * Writes {@code do_remote_prefill}.
     *
     * @param value the flag
     */
    public void setDoRemotePrefill(boolean value) {
        map.put(DO_REMOTE_PREFILL, value);
    }

    /** {@return {@code bool(params.get("do_remote_decode"))}} */
    public boolean doRemoteDecode() {
        return isTruthy(map.get(DO_REMOTE_DECODE));
    }

    /**
     * Writes {@code do_remote_decode}.
     *
     * @param value the flag
     */
    public void setDoRemoteDecode(boolean value) {
        map.put(DO_REMOTE_DECODE, value);
    }

    /** {@return {@code bool(params.get("transfer_id"))}: present and truthy (a non-empty string)} */
    public boolean hasTransferId() {
        return isTruthy(map.get(TRANSFER_ID));
    }

    /** {@return the transfer id as a string ({@link #stringValue}), or {@code null} when absent or null} */
    public String transferId() {
        return stringValue(map.get(TRANSFER_ID));
    }

    /** {@return the remote engine id as a string ({@link #stringValue}), or {@code null} when absent or null} */
    public String remoteEngineId() {
        return stringValue(map.get(REMOTE_ENGINE_ID));
    }

    /**
     * The remote bootstrap address as a string ({@link #stringValue}), or {@code null} when absent
     * or null. Like vLLM's scheduler, no type check is made (spec §15 #14): a number becomes its
     * decimal string, and the worker's bootstrap query then fails for that request.
     *
     * @return the remote bootstrap address as a string ({@link #stringValue}), or {@code null} when absent or null
     */
    public String remoteBootstrapAddr() {
        return stringValue(map.get(REMOTE_BOOTSTRAP_ADDR));
    }

    /**
     * Python truthiness of a JSON-like value: {@code null}, {@code false}, numeric zero, the empty
     * string and empty collections/maps/arrays are false; everything else is true.
     *
     * @param v a value of the map, or null
     * @return whether Python would take {@code v} as true
     */
    public static boolean isTruthy(Object v) {
        return switch (v) {
            case null -> false;
            case Boolean b -> b;
            case Number n -> n.doubleValue() != 0.0;
            case CharSequence s -> !s.isEmpty();
            case Collection<?> c -> !c.isEmpty();
            case Map<?, ?> m -> !m.isEmpty();
            case Object[] a -> a.length != 0;
            default -> true;
        };
    }

    /**
     * {@return Python's {@code not params} for a possibly absent map}
     *
     * @param params the request parameters, or null
     */
    public static boolean isNullOrEmpty(Map<String, Object> params) {
        return params == null || params.isEmpty();
    }

    /**
     * {@return {@code null} stays {@code null}; a string is returned as is; anything else is {@code String.valueOf}}
     *
     * @param v a value of the map, or null
     */
    public static String stringValue(Object v) {
        return switch (v) {
            case null -> null;
            case String s -> s;
            default -> String.valueOf(v);
        };
    }

    @Override
    public String toString() {
        return map.toString();
    }
}
