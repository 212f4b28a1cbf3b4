package io.mooncake4j.connector.bootstrap;

import io.mooncake4j.MooncakeConfigException;
import java.util.Objects;
import java.util.Optional;

/**
 * vLLM's module functions that decide who runs the bootstrap server and where P workers find it
 * ({@code should_launch_bootstrap_server}, {@code get_mooncake_bootstrap_addr},
 * {@code make_zmq_path}), taking the needed configuration values instead of a {@code vllm_config}.
 *
 * @see <a href="https://github.com/vllm-project/vllm">vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py</a>
 */
public final class BootstrapAddresses {

    private BootstrapAddresses() {
    }

    /** A host and a port. */
    public record HostPort(String host, int port) {
        public HostPort {
            Objects.requireNonNull(host, "host");
        }
    }

    /**
     * {@code should_launch_bootstrap_server}: whether this worker starts the engine group's server.
     *
     * @param bootstrapServerAddress  {@code kv_connector_extra_config.bootstrap_server_address}: if
     *                                present, an external server is used and none is launched
     * @param tpRank                  this worker's tensor-parallel rank
     * @param ppRankInGroup           this worker's rank in its pipeline-parallel group
     * @param localEnginesOnly        {@code parallel_config.local_engines_only} (hybrid/external DP load-balancing)
     * @param dataParallelRankLocal   {@code parallel_config.data_parallel_rank_local}
     * @param dataParallelIndex       {@code parallel_config.data_parallel_index}
     */
    public static boolean shouldLaunchBootstrapServer(Optional<String> bootstrapServerAddress, int tpRank,
            int ppRankInGroup, boolean localEnginesOnly, int dataParallelRankLocal, int dataParallelIndex) {
        if (bootstrapServerAddress.isPresent()) {
            return false;
        }
        if (tpRank != 0 || ppRankInGroup != 0) {
            return false;
        }
        if (localEnginesOnly) {
            return dataParallelRankLocal == 0;
        }
        return dataParallelIndex == 0;
    }

    /**
     * {@code get_mooncake_bootstrap_addr}: where P workers register (D gets the address from
     * {@code kv_transfer_params.remote_bootstrap_addr} instead).
     *
     * @param bootstrapServerAddress {@code "host:port"} of an external server, if configured
     * @param localEnginesOnly       {@code parallel_config.local_engines_only} → {@code 127.0.0.1}
     * @param nnodesWithinDp         nodes spanned by one engine's TP/PP; above 1 → {@code masterAddr}
     * @param masterAddr             {@code parallel_config.master_addr}
     * @param dataParallelMasterIp   {@code parallel_config.data_parallel_master_ip} (the default case)
     * @param bootstrapPort          {@code VLLM_MOONCAKE_BOOTSTRAP_PORT}
     * @throws MooncakeConfigException "bootstrap_server_address must specify a host and port" for
     *                                 an address without host or with a port outside 1..65535
     */
    public static HostPort getMooncakeBootstrapAddr(Optional<String> bootstrapServerAddress, boolean localEnginesOnly,
            int nnodesWithinDp, String masterAddr, String dataParallelMasterIp, int bootstrapPort) {
        if (bootstrapServerAddress.isPresent()) {
            return splitHostPort(bootstrapServerAddress.get());
        }
        String host;
        if (localEnginesOnly) {
            host = "127.0.0.1";
        } else if (nnodesWithinDp > 1) {
            host = masterAddr;
        } else {
            host = dataParallelMasterIp;
        }
        return new HostPort(host, bootstrapPort);
    }

    /** {@code "host:port"} or {@code "[v6]:port"} → host and port, validated as vLLM does. */
    public static HostPort splitHostPort(String address) {
        String host;
        String port;
        if (address.startsWith("[")) {
            int close = address.indexOf(']');
            if (close < 0 || close + 1 >= address.length() || address.charAt(close + 1) != ':') {
                throw badAddress(address);
            }
            host = address.substring(1, close);
            port = address.substring(close + 2);
        } else {
            int colon = address.lastIndexOf(':');
            if (colon < 0) {
                throw badAddress(address);
            }
            host = address.substring(0, colon);
            port = address.substring(colon + 1);
        }
        int p;
        try {
            p = Integer.parseInt(port);
        } catch (NumberFormatException e) {
            throw badAddress(address);
        }
        if (host.isEmpty() || p < 1 || p > 65535) {
            throw badAddress(address);
        }
        return new HostPort(host, p);
    }

    private static MooncakeConfigException badAddress(String address) {
        return new MooncakeConfigException("kv_connector_extra_config.bootstrap_server_address",
                "bootstrap_server_address must specify a host and port, got '" + address + "'");
    }

    /** vLLM's {@code make_zmq_path("http", host, port)}: {@code http://host:port}, IPv6 hosts bracketed. */
    public static String httpUrl(String host, int port) {
        return "http://" + bracket(host) + ":" + port;
    }

    /** vLLM's {@code make_zmq_path("tcp", host, port)}: {@code tcp://host:port}, IPv6 hosts bracketed. */
    public static String tcpAddress(String host, int port) {
        return "tcp://" + bracket(host) + ":" + port;
    }

    private static String bracket(String host) {
        return host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
    }
}
