package io.mooncake4j.store.connector;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.store.StoreConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * The store connector's settings, read the way a vLLM user writes them: {@code --kv-transfer-config
 * '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{...}}'}
 * (extra keys {@code cache_prefix}, {@code preferred_segment}), the store client's JSON at
 * {@code MOONCAKE_CONFIG_PATH} with vLLM's keys ({@code mode}: {@code embedded} needs
 * {@code global_segment_size > 0}, {@code standalone-store} needs 0; sizes as numbers or strings such
 * as {@code "4GB"}; both default to 4 GiB as in vLLM), {@code MOONCAKE_PREFERRED_SEGMENT},
 * {@code MOONCAKE_REQUESTER_LOCAL_HOSTNAME} (this node's segment host), {@code PYTHONHASHSEED}, and
 * {@code --prefix-caching-hash-algo}.
 *
 * @param role             vLLM's {@code kv_role}: {@code kv_consumer} loads only, the others load and save
 * @param store            the store client's settings
 * @param hasher           the block hash (algorithm and seed)
 * @param namespace        this node's key namespace (model basename, {@code cache_prefix}, rank 0, group 0)
 * @param preferredSegment where puts prefer to land, or null
 */
public record StoreConnectorConfig(String role, StoreConfig store, BlockHasher hasher, PoolKeys namespace,
                                   String preferredSegment) {

    /** The connector name in {@code kv_transfer_config}. */
    public static final String CONNECTOR = "MooncakeStoreConnector";
    /** vLLM's default {@code global_segment_size} and {@code local_buffer_size}: 4 GiB. */
    public static final long VLLM_DEFAULT_SIZE = 4L << 30;

    /** Checks the values. */
    public StoreConnectorConfig {
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(hasher, "hasher");
        Objects.requireNonNull(namespace, "namespace");
        if (!List.of("kv_producer", "kv_consumer", "kv_both").contains(role)) {
            throw new MooncakeConfigException("kv_role", "kv_role must be kv_producer, kv_consumer or kv_both, got " + role);
        }
    }

    /**
     * {@return whether {@code kvTransferConfigJson} names this connector}
     *
     * @param kvTransferConfigJson {@code --kv-transfer-config}
     */
    public static boolean names(String kvTransferConfigJson) {
        try {
            return CONNECTOR.equals(Json.parseObject(kvTransferConfigJson).get("kv_connector"));
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** {@return whether blocks are looked up and loaded} */
    public boolean canLoad() {
        return true;
    }

    /** {@return whether computed blocks are saved (not on a {@code kv_consumer})} */
    public boolean canSave() {
        return !role.equals("kv_consumer");
    }

    /**
     * The connector options of a single rank.
     *
     * @param blockSize tokens per block
     * @return the options
     */
    public MooncakeStoreConnector.Options options(int blockSize) {
        return MooncakeStoreConnector.Options.singleRank(namespace, blockSize).withPreferredSegment(preferredSegment);
    }

    /**
     * Reads the config.
     *
     * @param kvTransferConfigJson {@code --kv-transfer-config}
     * @param env                  the environment ({@code MOONCAKE_CONFIG_PATH} is required)
     * @param model                {@code --model} (its basename names the keys)
     * @param hashAlgo             {@code --prefix-caching-hash-algo}, null for vLLM's default {@code sha256}
     * @return the config
     * @throws MooncakeConfigException naming what is wrong
     */
    public static StoreConnectorConfig from(String kvTransferConfigJson, Map<String, String> env, String model,
            String hashAlgo) {
        Map<String, Object> root;
        try {
            root = Json.parseObject(kvTransferConfigJson);
        } catch (RuntimeException e) {
            throw new MooncakeConfigException("kv_transfer_config", "kv_transfer_config is not a JSON object: " + e.getMessage(), e);
        }
        if (!CONNECTOR.equals(root.get("kv_connector"))) {
            throw new MooncakeConfigException("kv_connector", "kv_connector must be \"" + CONNECTOR + "\", got "
                    + Json.write(root.get("kv_connector")));
        }
        Object role = root.getOrDefault("kv_role", "kv_both");
        if (!(role instanceof String r)) {
            throw new MooncakeConfigException("kv_role", "kv_role must be a string");
        }
        Object extraObj = root.getOrDefault("kv_connector_extra_config", Map.of());
        if (!(extraObj instanceof Map<?, ?> extra)) {
            throw new MooncakeConfigException("kv_connector_extra_config", "kv_connector_extra_config must be an object");
        }
        Object prefix = extra.get("cache_prefix");
        String cachePrefix = prefix == null ? "" : String.valueOf(prefix);
        String preferred = preferredSegment(extra.get("preferred_segment"), env);
        BlockHasher hasher;
        try {
            hasher = new BlockHasher(BlockHasher.Algorithm.of(hashAlgo == null ? "sha256" : hashAlgo),
                    BlockHasher.seedFrom(env));
        } catch (IllegalArgumentException e) {
            throw new MooncakeConfigException("prefix_caching_hash_algo", e.getMessage(), e);
        }
        if (model == null || PoolKeys.modelName(model).isEmpty()) {
            throw new MooncakeConfigException("model", "the store connector needs the model's name for its keys");
        }
        return new StoreConnectorConfig(r, storeConfig(env), hasher, PoolKeys.of(cachePrefix, PoolKeys.modelName(model)),
                preferred);
    }

    /** vLLM's {@code get_configured_preferred_segment}: the extra config's, else {@code MOONCAKE_PREFERRED_SEGMENT}. */
    static String preferredSegment(Object fromExtra, Map<String, String> env) {
        if (fromExtra != null) {
            if (!(fromExtra instanceof String s) || s.isBlank()) {
                throw new MooncakeConfigException("preferred_segment", "preferred_segment must be a non-empty string");
            }
            return s.strip();
        }
        String e = env.get("MOONCAKE_PREFERRED_SEGMENT");
        return e == null || e.isBlank() ? null : e.strip();
    }

    /**
     * The store client's settings from {@code MOONCAKE_CONFIG_PATH} with vLLM's rules ({@code mode},
     * 4 GiB defaults, {@code MOONCAKE_REQUESTER_LOCAL_HOSTNAME}).
     *
     * @param env the environment
     * @return the store client's settings
     */
    public static StoreConfig storeConfig(Map<String, String> env) {
        String path = env.get("MOONCAKE_CONFIG_PATH");
        if (path == null || path.isBlank()) {
            throw new MooncakeConfigException("MOONCAKE_CONFIG_PATH",
                    "the store connector needs MOONCAKE_CONFIG_PATH (a mooncake.json with master_server_address)");
        }
        String text;
        try {
            text = Files.readString(Path.of(path));
        } catch (java.io.IOException | RuntimeException e) {
            throw new MooncakeConfigException("MOONCAKE_CONFIG_PATH", "cannot read " + path + ": " + e, e);
        }
        Map<String, Object> m;
        try {
            m = Json.parseObject(text);
        } catch (RuntimeException e) {
            throw new MooncakeConfigException("MOONCAKE_CONFIG_PATH", path + " is not a JSON object: " + e.getMessage(), e);
        }
        StoreConfig c = StoreConfig.fromJson(text);
        if (!m.containsKey("global_segment_size")) {
            c = c.withGlobalSegmentSize(VLLM_DEFAULT_SIZE);
        }
        if (!m.containsKey("local_buffer_size")) {
            c = c.withLocalBufferSize(VLLM_DEFAULT_SIZE);
        }
        Object mode = m.getOrDefault("mode", "embedded");
        if ("embedded".equals(mode)) {
            if (c.globalSegmentSize() <= 0) {
                throw new MooncakeConfigException("global_segment_size", "embedded mode requires global_segment_size > 0");
            }
        } else if ("standalone-store".equals(mode)) {
            if (c.globalSegmentSize() != 0) {
                throw new MooncakeConfigException("global_segment_size",
                        "standalone-store mode requires global_segment_size == 0 (an external mooncake_client owns the pool)");
            }
        } else {
            throw new MooncakeConfigException("mode", "unknown Mooncake mode: " + Json.write(mode)
                    + " (embedded or standalone-store)");
        }
        if (c.localBufferSize() <= 0) {
            throw new MooncakeConfigException("local_buffer_size", "local_buffer_size must be > 0");
        }
        String host = env.get("MOONCAKE_REQUESTER_LOCAL_HOSTNAME");
        if (host != null && !host.isBlank()) {
            c = new StoreConfig(host.strip(), c.metadataServer(), c.globalSegmentSize(), c.localBufferSize(), c.protocol(),
                    c.deviceName(), c.masterServerAddress(), c.tenantId(), c.rpcTimeout(), c.pingInterval());
        }
        return c;
    }

    /**
     * The same config with other client timings (tests: short deadlines).
     *
     * @param rpc  the deadline of each master call
     * @param ping the ping interval
     * @return the config
     */
    public StoreConnectorConfig withTimings(Duration rpc, Duration ping) {
        return new StoreConnectorConfig(role, store.withTimings(rpc, ping), hasher, namespace, preferredSegment);
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "%s[%s, master %s, %s, namespace %s]", CONNECTOR, role,
                store.masterServerAddress(), hasher, namespace.prefix());
    }
}
