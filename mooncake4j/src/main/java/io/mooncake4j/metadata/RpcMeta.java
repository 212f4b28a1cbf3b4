package io.mooncake4j.metadata;

import io.mooncake4j.internal.json.Json;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Where a transfer engine listens ({@code RpcMetaDesc}): the value of {@code rpc_meta/<name>},
 * {@code {"ip_or_host_name":"…","rpc_port":N}}. A C++ TCP peer connects to this host at the
 * descriptor's {@code tcp_data_port}.
 *
 * @param ipOrHostName the engine's address
 * @param rpcPort      its RPC (handshake) port, 0..65535
 */
public record RpcMeta(String ipOrHostName, int rpcPort) {

    /** Checks the values. */
    public RpcMeta {
        if (ipOrHostName == null || ipOrHostName.isEmpty()) {
            throw new IllegalArgumentException("rpc_meta needs ip_or_host_name");
        }
        if (rpcPort < 0 || rpcPort > 65535) {
            throw new IllegalArgumentException("rpc_meta rpc_port out of range: " + rpcPort);
        }
    }

    /** {@return jsoncpp's compact form: sorted keys, no spaces} */
    public String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ip_or_host_name", ipOrHostName);
        m.put("rpc_port", (long) rpcPort);
        return Json.write(m, true);
    }

    /**
     * @param json a {@code rpc_meta} value
     * @return the entry
     * @throws MetadataException when it is not an object with a string host and a port
     */
    public static RpcMeta parse(String json) {
        try {
            Map<String, Object> m = Json.parseObject(json);
            if (!(m.get("ip_or_host_name") instanceof String host) || !(m.get("rpc_port") instanceof Number port)) {
                throw new MetadataException("rpc_meta needs a string ip_or_host_name and a numeric rpc_port: " + json, null);
            }
            long p = port.longValue();
            if (p < 0 || p > 65535 || !(port instanceof Long || port instanceof Integer || port instanceof java.math.BigInteger)) {
                throw new MetadataException("rpc_meta rpc_port is not a port: " + port, null);
            }
            return new RpcMeta(host, (int) p);
        } catch (RuntimeException e) {
            if (e instanceof MetadataException me) {
                throw me;
            }
            throw new MetadataException("rpc_meta is not valid: " + e.getMessage(), e);
        }
    }
}
