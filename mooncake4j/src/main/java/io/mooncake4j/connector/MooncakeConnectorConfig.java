package io.mooncake4j.connector;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;

/**
 * The connector's configuration: vLLM's {@code kv_transfer_config} (role, engine id, extra
 * config), the {@code VLLM_MOONCAKE_*} environment, and this worker's place in the parallel
 * layout. Immutable; build with {@link #builder()} or {@link #fromKvTransferConfigJson}.
 *
 * @param kvRole                 producer (P), consumer (D) or both
 * @param engineId               this engine's id ({@code kv_transfer_config.engine_id})
 * @param protocol               {@code kv_connector_extra_config.mooncake_protocol}, default {@code "rdma"}
 * @param numWorkers             {@code kv_connector_extra_config.num_workers}: P transfer threads, default 10
 * @param deviceName             {@code kv_connector_extra_config.device_name}: RDMA device filter, default ""
 * @param bootstrapServerAddress {@code kv_connector_extra_config.bootstrap_server_address} ("host:port"), if any
 * @param bootstrapPort          {@code VLLM_MOONCAKE_BOOTSTRAP_PORT}, default 8998; 0 lets the launched bootstrap
 *                               server bind any free port (tests; see {@code MooncakeConnectorWorker#bootstrapServerPort})
 * @param abortRequestTimeout    {@code VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT}, default 480 s
 * @param hostname               the address this worker advertises (vLLM's {@code get_ip()})
 * @param tpRank                 tensor-parallel rank
 * @param tpSize                 tensor-parallel size
 * @param ppRank                 pipeline-parallel rank
 * @param ppSize                 pipeline-parallel size
 * @param dpRank                 data-parallel rank
 * @param registrationRetries    extra attempts of a failed batch registration before giving up (default 1)
 * @param listenerReadyTimeout   how long {@code registerKvCaches} waits for the sender listener (default 30 s)
 * @param layerwisePush          {@code kv_connector_extra_config.layerwise_push} (mooncake4j, default false): P pushes
 *                               each layer's KV as the forward pass saves it ({@code saveKvLayer}) instead of the
 *                               whole request after it finished; D and the wire are unchanged
 * @param transferThreadNice     {@code kv_connector_extra_config.transfer_thread_nice} (mooncake4j, 0..19, default 0):
 *                               the Linux nice value of P's transfer threads (and of the engine threads they start),
 *                               so that on a host whose cores are all busy the model runner's thread (a prefill
 *                               overlapping a layer-wise push) gets a core before them; 0 leaves them as they are
 */
public record MooncakeConnectorConfig(
        KvRole kvRole,
        String engineId,
        String protocol,
        int numWorkers,
        String deviceName,
        Optional<String> bootstrapServerAddress,
        int bootstrapPort,
        Duration abortRequestTimeout,
        String hostname,
        int tpRank,
        int tpSize,
        int ppRank,
        int ppSize,
        int dpRank,
        int registrationRetries,
        Duration listenerReadyTimeout,
        boolean layerwisePush,
        int transferThreadNice) {

    public static final String ENV_BOOTSTRAP_PORT = "VLLM_MOONCAKE_BOOTSTRAP_PORT";
    public static final String ENV_ABORT_REQUEST_TIMEOUT = "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT";
    public static final int DEFAULT_BOOTSTRAP_PORT = 8998;
    public static final Duration DEFAULT_ABORT_REQUEST_TIMEOUT = Duration.ofSeconds(480);
    /**
     * The one value {@code kv_connector_extra_config.side_channel_zmq} accepts (mooncake4j's own ZMTP, which
     * runs the side channel); the key is optional. {@code "jeromq"}, which picked JeroMQ before that was
     * removed, and any other value fail parsing.
     */
    public static final String SIDE_CHANNEL_BUILTIN = "builtin";

    /**
     * Checks the values.
     *
     * @throws io.mooncake4j.MooncakeConfigException when a value is missing or out of range (it names the key)
     */
    public MooncakeConnectorConfig {
        Objects.requireNonNull(kvRole, "kvRole");
        if (engineId == null || engineId.isBlank()) {
            throw new MooncakeConfigException("engine_id", "engine_id must be a non-empty string");
        }
        if (protocol == null || protocol.isBlank()) {
            throw new MooncakeConfigException("kv_connector_extra_config.mooncake_protocol",
                    "mooncake_protocol must be a non-empty string such as \"rdma\" or \"tcp\"");
        }
        if (numWorkers <= 0) {
            throw new MooncakeConfigException("kv_connector_extra_config.num_workers",
                    "num_workers must be a positive integer, got " + numWorkers);
        }
        Objects.requireNonNull(deviceName, "deviceName");
        Objects.requireNonNull(bootstrapServerAddress, "bootstrapServerAddress");
        bootstrapServerAddress.ifPresent(MooncakeConnectorConfig::checkHostPort);
        if (bootstrapPort < 0 || bootstrapPort > 65535) {
            throw new MooncakeConfigException(ENV_BOOTSTRAP_PORT,
                    ENV_BOOTSTRAP_PORT + " must be a port in 1..65535 (or 0 for any free port), got " + bootstrapPort);
        }
        if (abortRequestTimeout == null || abortRequestTimeout.isNegative() || abortRequestTimeout.isZero()) {
            throw new MooncakeConfigException(ENV_ABORT_REQUEST_TIMEOUT,
                    ENV_ABORT_REQUEST_TIMEOUT + " must be a positive number of seconds");
        }
        if (hostname == null || hostname.isBlank()) {
            throw new MooncakeConfigException("hostname", "hostname must be set");
        }
        if (tpSize <= 0 || tpRank < 0 || tpRank >= tpSize) {
            throw new MooncakeConfigException("tp", String.format(Locale.ROOT,
                    "need 0 <= tp_rank < tp_size, got tp_rank=%d tp_size=%d", tpRank, tpSize));
        }
        if (ppSize <= 0 || ppRank < 0 || ppRank >= ppSize) {
            throw new MooncakeConfigException("pp", String.format(Locale.ROOT,
                    "need 0 <= pp_rank < pp_size, got pp_rank=%d pp_size=%d", ppRank, ppSize));
        }
        if (dpRank < 0) {
            throw new MooncakeConfigException("dp_rank", "dp_rank must be >= 0, got " + dpRank);
        }
        if (registrationRetries < 0) {
            throw new MooncakeConfigException("registration_retries",
                    "registration_retries must be >= 0, got " + registrationRetries);
        }
        Objects.requireNonNull(listenerReadyTimeout, "listenerReadyTimeout");
        if (transferThreadNice < 0 || transferThreadNice > 19) {
            throw new MooncakeConfigException("kv_connector_extra_config.transfer_thread_nice",
                    "kv_connector_extra_config.transfer_thread_nice must be an integer in 0..19, got "
                            + transferThreadNice);
        }
    }

    private static void checkHostPort(String addr) {
        int colon = addr.lastIndexOf(':');
        boolean ok = colon > 0 && colon < addr.length() - 1;
        if (ok) {
            try {
                int p = Integer.parseInt(addr.substring(colon + 1));
                ok = p > 0 && p <= 65535;
            } catch (NumberFormatException e) {
                ok = false;
            }
        }
        if (!ok) {
            throw new MooncakeConfigException("kv_connector_extra_config.bootstrap_server_address",
                    "bootstrap_server_address must be \"host:port\", got '" + addr + "'");
        }
    }

    /** {@return vLLM's {@code is_kv_producer}} */
    public boolean isProducer() {
        return kvRole.isProducer();
    }

    /** {@return vLLM's {@code is_kv_consumer}} */
    public boolean isConsumer() {
        return kvRole.isConsumer();
    }

    /** {@return the sender coroutine count of vLLM ({@code 2 * num_workers})} */
    public int numSenderTasks() {
        return 2 * numWorkers;
    }

    /** {@return a builder with vLLM's defaults; the role and the engine id must be set} */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * A preset for tests: {@code role}, a unique engine id, protocol {@code tcp}, hostname
     * {@code 127.0.0.1} and bootstrap port 0, so tests running in parallel never collide on a port.
     * With it every port the worker opens is chosen by the OS on loopback: the side channel always
     * binds a free port on the hostname, a producer's bootstrap server binds port 0 (read it back
     * with {@code MooncakeConnectorWorker#bootstrapServerPort}; bind it to loopback too with the
     * worker builder's {@code bootstrapBindHost("127.0.0.1")}), and the engine's RPC port is the
     * engine's own (a {@code ScriptedTransferEngine} opens none). Change anything on the builder.
     *
     * @param role the connector role
     * @return a builder with the preset applied
     */
    public static Builder forTesting(KvRole role) {
        return new Builder()
                .kvRole(role)
                .engineId("test-" + role.wireName() + "-" + TEST_ENGINE_IDS.incrementAndGet())
                .protocol("tcp")
                .hostname("127.0.0.1")
                .bootstrapPort(0);
    }

    private static final java.util.concurrent.atomic.AtomicLong TEST_ENGINE_IDS =
            new java.util.concurrent.atomic.AtomicLong();

    /** {@return a builder initialised from this configuration} */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.kvRole = kvRole;
        b.engineId = engineId;
        b.protocol = protocol;
        b.numWorkers = numWorkers;
        b.deviceName = deviceName;
        b.bootstrapServerAddress = bootstrapServerAddress.orElse(null);
        b.bootstrapPort = bootstrapPort;
        b.abortRequestTimeout = abortRequestTimeout;
        b.hostname = hostname;
        b.tpRank = tpRank;
        b.tpSize = tpSize;
        b.ppRank = ppRank;
        b.ppSize = ppSize;
        b.dpRank = dpRank;
        b.registrationRetries = registrationRetries;
        b.listenerReadyTimeout = listenerReadyTimeout;
        b.layerwisePush = layerwisePush;
        b.transferThreadNice = transferThreadNice;
        return b;
    }

    /**
     * Parses a vLLM-style {@code kv_transfer_config} JSON object, e.g.
     * {@code {"kv_connector":"MooncakeConnector","kv_role":"kv_producer","engine_id":"p0",
     * "kv_connector_extra_config":{"mooncake_protocol":"tcp","num_workers":4}}}, then applies the
     * {@code VLLM_MOONCAKE_*} variables of {@code env}. Without {@code engine_id} the engine id is a
     * random UUID (vLLM generates a uuid4). Unknown keys are ignored; a present key
     * with a wrong type or value fails with an exception naming the key.
     *
     * @param json the {@code kv_transfer_config} JSON vLLM is given
     * @param env  the environment to read {@code VLLM_MOONCAKE_*} from (usually {@code System.getenv()})
     * @return a builder with the JSON's values and the environment applied
     */
    public static Builder fromKvTransferConfigJson(String json, Map<String, String> env) {
        Map<String, Object> root;
        try {
            root = Json.parseObject(json);
        } catch (JsonException e) {
            throw new MooncakeConfigException("kv_transfer_config", "kv_transfer_config is not a JSON object: "
                    + e.getMessage(), e);
        }
        Builder b = builder();
        Object connector = root.get("kv_connector");
        if (connector != null && !"MooncakeConnector".equals(connector)) {
            throw new MooncakeConfigException("kv_connector",
                    "kv_connector must be \"MooncakeConnector\", got " + Json.write(connector));
        }
        b.kvRole(KvRole.parse(string(root, "kv_role", "kv_role", true)));
        String engineId = string(root, "engine_id", "engine_id", false);
        // like vLLM's KVTransferConfig: an absent engine_id becomes a fresh uuid4
        b.engineId(engineId != null ? engineId : UUID.randomUUID().toString());
        Object extraObj = root.get("kv_connector_extra_config");
        if (extraObj != null) {
            if (!(extraObj instanceof Map<?, ?>)) {
                throw new MooncakeConfigException("kv_connector_extra_config",
                        "kv_connector_extra_config must be a JSON object, got " + Json.typeName(extraObj));
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> extra = (Map<String, Object>) extraObj;
            String p = string(extra, "mooncake_protocol", "kv_connector_extra_config.mooncake_protocol", false);
            if (p != null) {
                b.protocol(p);
            }
            Object nw = extra.get("num_workers");
            if (nw != null) {
                if (!(nw instanceof Long l) || l <= 0 || l > 4096) {
                    throw new MooncakeConfigException("kv_connector_extra_config.num_workers",
                            "kv_connector_extra_config.num_workers must be an integer in 1..4096, got " + Json.write(nw));
                }
                b.numWorkers((int) (long) l);
            }
            String dn = string(extra, "device_name", "kv_connector_extra_config.device_name", false);
            if (dn != null) {
                b.deviceName(dn);
            }
            String bs = string(extra, "bootstrap_server_address",
                    "kv_connector_extra_config.bootstrap_server_address", false);
            if (bs != null) {
                b.bootstrapServerAddress(bs);
            }
            Object lw = extra.get("layerwise_push");
            if (lw != null) {
                if (!(lw instanceof Boolean v)) {
                    throw new MooncakeConfigException("kv_connector_extra_config.layerwise_push",
                            "kv_connector_extra_config.layerwise_push must be true or false, got " + Json.write(lw));
                }
                b.layerwisePush(v);
            }
            Object nice = extra.get("transfer_thread_nice");
            if (nice != null) {
                if (!(nice instanceof Long l) || l < 0 || l > 19) {
                    throw new MooncakeConfigException("kv_connector_extra_config.transfer_thread_nice",
                            "kv_connector_extra_config.transfer_thread_nice must be an integer in 0..19, got "
                                    + Json.write(nice));
                }
                b.transferThreadNice((int) (long) l);
            }
            Object zmq = extra.get("side_channel_zmq");
            if (zmq != null) {
                if (!SIDE_CHANNEL_BUILTIN.equals(zmq)) {
                    throw new MooncakeConfigException("kv_connector_extra_config.side_channel_zmq",
                            "kv_connector_extra_config.side_channel_zmq must be \"builtin\" (the only side channel; "
                                    + "JeroMQ's was removed), got " + Json.write(zmq));
                }
            }
        }
        return b.environment(env);
    }

    private static String string(Map<String, Object> m, String key, String path, boolean required) {
        Object v = m.get(key);
        if (v == null) {
            if (required) {
                throw new MooncakeConfigException(path, path + " is required");
            }
            return null;
        }
        if (!(v instanceof String s)) {
            throw new MooncakeConfigException(path, path + " must be a string, got " + Json.write(v));
        }
        return s;
    }

    /** Builds a validated {@link MooncakeConnectorConfig}. */
    public static final class Builder {
        private KvRole kvRole;
        private String engineId;
        private String protocol = "rdma";
        private int numWorkers = 10;
        private String deviceName = "";
        private String bootstrapServerAddress;
        private int bootstrapPort = DEFAULT_BOOTSTRAP_PORT;
        private Duration abortRequestTimeout = DEFAULT_ABORT_REQUEST_TIMEOUT;
        private String hostname = "127.0.0.1";
        private int tpRank;
        private int tpSize = 1;
        private int ppRank;
        private int ppSize = 1;
        private int dpRank;
        private int registrationRetries = 1;
        private Duration listenerReadyTimeout = Duration.ofSeconds(30);
        private boolean layerwisePush;
        private int transferThreadNice;

        private Builder() {}

        /**
         * Sets the role ({@code kv_role}).
         *
         * @param v the role
         * @return this builder
         */
        public Builder kvRole(KvRole v) {
            kvRole = v;
            return this;
        }

        /**
         * Sets the engine id ({@code engine_id}); required.
         *
         * @param v a non-empty id
         * @return this builder
         */
        public Builder engineId(String v) {
            engineId = v;
            return this;
        }

        /**
         * Sets the transfer protocol ({@code mooncake_protocol}); default {@code rdma}.
         *
         * @param v {@code tcp}, {@code rdma}, ...
         * @return this builder
         */
        public Builder protocol(String v) {
            protocol = v;
            return this;
        }

        /**
         * Sets the P transfer threads ({@code num_workers}); default 10.
         *
         * @param v a positive count
         * @return this builder
         */
        public Builder numWorkers(int v) {
            numWorkers = v;
            return this;
        }

        /**
         * Sets the RDMA device filter ({@code device_name}); default empty.
         *
         * @param v device names, comma-separated, or empty
         * @return this builder
         */
        public Builder deviceName(String v) {
            deviceName = v;
            return this;
        }

        /**
         * Sets the bootstrap server to use instead of launching one ({@code bootstrap_server_address}).
         *
         * @param v {@code host:port}, or null for none
         * @return this builder
         */
        public Builder bootstrapServerAddress(String v) {
            bootstrapServerAddress = v;
            return this;
        }

        /**
         * Sets the port of the bootstrap server TP rank 0 launches; default 8998, 0 for any free port.
         *
         * @param v a port, or 0
         * @return this builder
         */
        public Builder bootstrapPort(int v) {
            bootstrapPort = v;
            return this;
        }

        /**
         * Sets how long P keeps a finished request's KV for D; default 480 s.
         *
         * @param v a positive duration
         * @return this builder
         */
        public Builder abortRequestTimeout(Duration v) {
            abortRequestTimeout = v;
            return this;
        }

        /**
         * Sets the address this worker advertises to peers.
         *
         * @param v a hostname or IP address
         * @return this builder
         */
        public Builder hostname(String v) {
            hostname = v;
            return this;
        }

        /**
         * Sets this rank's tensor-parallel place.
         *
         * @param rank the TP rank, 0 to size - 1
         * @param size the TP size
         * @return this builder
         */
        public Builder tp(int rank, int size) {
            tpRank = rank;
            tpSize = size;
            return this;
        }

        /**
         * Sets this rank's pipeline-parallel place.
         *
         * @param rank the PP rank
         * @param size the PP size
         * @return this builder
         */
        public Builder pp(int rank, int size) {
            ppRank = rank;
            ppSize = size;
            return this;
        }

        /**
         * Sets the data-parallel rank.
         *
         * @param v the DP rank
         * @return this builder
         */
        public Builder dpRank(int v) {
            dpRank = v;
            return this;
        }

        /**
         * Sets extra attempts of a failed batch registration; default 1.
         *
         * @param v attempts after the first, 0 or more
         * @return this builder
         */
        public Builder registrationRetries(int v) {
            registrationRetries = v;
            return this;
        }

        /**
         * Sets how long {@code registerKvCaches} waits for the sender listener; default 30 s.
         *
         * @param v a positive duration
         * @return this builder
         */
        public Builder listenerReadyTimeout(Duration v) {
            listenerReadyTimeout = v;
            return this;
        }

        /**
         * {@code kv_connector_extra_config.layerwise_push}: push each layer's KV as it is saved (P).
         *
         * @param v whether P pushes each layer as it is saved
         * @return this builder
         */
        public Builder layerwisePush(boolean v) {
            layerwisePush = v;
            return this;
        }

        /**
         * {@code kv_connector_extra_config.transfer_thread_nice}: the nice value of P's transfer threads.
         *
         * @param v 0 (unchanged, the default) to 19 (yield a contended core to everything else)
         * @return this builder
         */
        public Builder transferThreadNice(int v) {
            transferThreadNice = v;
            return this;
        }

        /**
         * Applies {@code VLLM_MOONCAKE_BOOTSTRAP_PORT} and {@code VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT} when set.
         *
         * @param env the environment to read {@code VLLM_MOONCAKE_*} from (usually {@code System.getenv()})
         * @return this builder
         */
        public Builder environment(Map<String, String> env) {
            String port = env.get(ENV_BOOTSTRAP_PORT);
            if (port != null && !port.isBlank()) {
                try {
                    bootstrapPort = Integer.parseInt(port.trim());
                } catch (NumberFormatException e) {
                    throw new MooncakeConfigException(ENV_BOOTSTRAP_PORT,
                            ENV_BOOTSTRAP_PORT + " must be an integer port, got '" + port + "'", e);
                }
            }
            String timeout = env.get(ENV_ABORT_REQUEST_TIMEOUT);
            if (timeout != null && !timeout.isBlank()) {
                double seconds;
                try {
                    seconds = Double.parseDouble(timeout.trim());
                } catch (NumberFormatException e) {
                    throw new MooncakeConfigException(ENV_ABORT_REQUEST_TIMEOUT,
                            ENV_ABORT_REQUEST_TIMEOUT + " must be a number of seconds, got '" + timeout + "'", e);
                }
                if (!(seconds > 0) || Double.isInfinite(seconds)) {
                    throw new MooncakeConfigException(ENV_ABORT_REQUEST_TIMEOUT,
                            ENV_ABORT_REQUEST_TIMEOUT + " must be a positive number of seconds, got '" + timeout + "'");
                }
                abortRequestTimeout = Duration.ofNanos((long) (seconds * 1e9));
            }
            return this;
        }

        /**
         * {@return the configuration}
         *
         * @throws io.mooncake4j.MooncakeConfigException when a value is missing or out of range
         */
        public MooncakeConnectorConfig build() {
            if (kvRole == null) {
                throw new MooncakeConfigException("kv_role", "kv_role is required");
            }
            return new MooncakeConnectorConfig(kvRole, engineId, protocol, numWorkers, deviceName,
                    Optional.ofNullable(bootstrapServerAddress), bootstrapPort, abortRequestTimeout, hostname,
                    tpRank, tpSize, ppRank, ppSize, dpRank, registrationRetries, listenerReadyTimeout,
                    layerwisePush, transferThreadNice);
        }
    }
}
