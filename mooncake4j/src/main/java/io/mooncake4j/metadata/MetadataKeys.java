package io.mooncake4j.metadata;

import java.util.Map;

/**
 * Mooncake's metadata key scheme ({@code TransferMetadata}): {@code mooncake/[<cluster id>/]} then
 * {@code ram/<segment name>} for a segment descriptor (a name that already holds a {@code /} is
 * used as the rest of the key) and {@code rpc_meta/<segment name>} for where its engine listens.
 *
 * @param prefix {@code mooncake/} or {@code mooncake/<cluster id>/}
 */
public record MetadataKeys(String prefix) {

    /** Mooncake's environment variable for a cluster id that separates several clusters in one store. */
    public static final String CLUSTER_ID_ENV = "MC_METADATA_CLUSTER_ID";

    /** Keys without a cluster id. */
    public static final MetadataKeys DEFAULT = new MetadataKeys("mooncake/");

    /** Checks the prefix. */
    public MetadataKeys {
        if (prefix == null || !prefix.startsWith("mooncake/") || !prefix.endsWith("/")) {
            throw new IllegalArgumentException("metadata key prefix must be mooncake/[<cluster id>/], got " + prefix);
        }
    }

    /** {@return the keys for {@code MC_METADATA_CLUSTER_ID} in {@code env}, as Mooncake reads it} */
    public static MetadataKeys fromEnvironment(Map<String, String> env) {
        String id = env.get(CLUSTER_ID_ENV);
        if (id == null || id.isEmpty()) {
            return DEFAULT;
        }
        return new MetadataKeys("mooncake/" + id + (id.endsWith("/") ? "" : "/"));
    }

    /** {@return the key of {@code segmentName}'s descriptor} */
    public String segment(String segmentName) {
        if (segmentName == null || segmentName.isEmpty()) {
            throw new IllegalArgumentException("segment name must not be empty");
        }
        return segmentName.contains("/") ? prefix + segmentName : prefix + "ram/" + segmentName;
    }

    /** {@return the key of {@code serverName}'s RPC address} */
    public String rpcMeta(String serverName) {
        if (serverName == null || serverName.isEmpty()) {
            throw new IllegalArgumentException("server name must not be empty");
        }
        return prefix + "rpc_meta/" + serverName;
    }
}
