package io.mooncake4j.store;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.internal.json.Json;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * A store client's settings, read from the {@code mooncake.json} keys users already write
 * (Mooncake's {@code MOONCAKE_CONFIG_PATH} file, LMCache's and SGLang's configs): {@code local_hostname},
 * {@code metadata_server}, {@code global_segment_size}, {@code local_buffer_size} (integers or strings
 * such as {@code "4GB"}, {@code "3.2 GB"}, {@code "512MB"}: binary units, as Mooncake's
 * {@code string_to_byte_size}), {@code protocol}, {@code device_name}, {@code master_server_address},
 * {@code tenant_id}. Unknown keys are ignored (the same file carries other tools' keys).
 *
 * @param localHostname       the host peers reach this client's engine on (its segment's name)
 * @param metadataServer      {@code P2PHANDSHAKE} (the only mode this client implements)
 * @param globalSegmentSize   bytes of memory this client contributes to the pool (0: none)
 * @param localBufferSize     bytes of registered staging memory for the copying put/get
 * @param protocol            the transfer protocol ({@code tcp})
 * @param deviceName          RDMA device filter ({@code ""})
 * @param masterServerAddress the master's {@code host:port}
 * @param tenantId            the tenant ({@code "default"})
 * @param rpcTimeout          the deadline of each master call
 * @param pingInterval        how often the client pings the master (Mooncake: 1 s)
 */
public record StoreConfig(String localHostname, String metadataServer, long globalSegmentSize, long localBufferSize,
        String protocol, String deviceName, String masterServerAddress, String tenantId, Duration rpcTimeout,
        Duration pingInterval) {

    /** Mooncake's default segment and local buffer size, 16 MiB. */
    public static final long DEFAULT_SIZE = 16L << 20;

    /** Checks the values. */
    public StoreConfig {
        Objects.requireNonNull(localHostname, "localHostname");
        Objects.requireNonNull(metadataServer, "metadataServer");
        Objects.requireNonNull(protocol, "protocol");
        Objects.requireNonNull(deviceName, "deviceName");
        Objects.requireNonNull(masterServerAddress, "masterServerAddress");
        Objects.requireNonNull(tenantId, "tenantId");
        if (globalSegmentSize < 0 || localBufferSize < 0) {
            throw new MooncakeConfigException("global_segment_size", "segment and buffer sizes must not be negative");
        }
        if (rpcTimeout.isNegative() || rpcTimeout.isZero() || pingInterval.isNegative() || pingInterval.isZero()) {
            throw new MooncakeConfigException("rpc_timeout", "rpc timeout and ping interval must be positive");
        }
    }

    /**
     * {@return a loopback P2P config with Mooncake's defaults for the master at {@code master}}
     *
     * @param master the master's RPC address, {@code "host:port"}
     */
    public static StoreConfig loopback(String master) {
        return new StoreConfig("127.0.0.1", "P2PHANDSHAKE", DEFAULT_SIZE, DEFAULT_SIZE, "tcp", "", master, "default",
                Duration.ofSeconds(5), Duration.ofSeconds(1));
    }

    /**
     * {@return a copy with {@code bytes} of contributed segment memory}
     *
     * @param bytes the segment's size (0 for none)
     */
    public StoreConfig withGlobalSegmentSize(long bytes) {
        return new StoreConfig(localHostname, metadataServer, bytes, localBufferSize, protocol, deviceName,
                masterServerAddress, tenantId, rpcTimeout, pingInterval);
    }

    /**
     * {@return a copy with {@code bytes} of local staging buffer}
     *
     * @param bytes the buffer's size (0 for none)
     */
    public StoreConfig withLocalBufferSize(long bytes) {
        return new StoreConfig(localHostname, metadataServer, globalSegmentSize, bytes, protocol, deviceName,
                masterServerAddress, tenantId, rpcTimeout, pingInterval);
    }

    /**
     * {@return a copy with another call deadline and ping interval}
     *
     * @param rpc  the deadline of each master call (positive)
     * @param ping the liveness loop's Ping interval (positive)
     */
    public StoreConfig withTimings(Duration rpc, Duration ping) {
        return new StoreConfig(localHostname, metadataServer, globalSegmentSize, localBufferSize, protocol, deviceName,
                masterServerAddress, tenantId, rpc, ping);
    }

    /**
     * Reads the JSON text of a {@code mooncake.json}.
     *
     * @param json the file's text
     * @return the config ({@code master_server_address} is required)
     * @throws MooncakeConfigException naming the key that is missing or malformed
     */
    public static StoreConfig fromJson(String json) {
        Map<String, Object> m;
        try {
            m = Json.parseObject(json);
        } catch (RuntimeException e) {
            throw new MooncakeConfigException("", "store config is not a JSON object: " + e.getMessage(), e);
        }
        String master = string(m, "master_server_address", null);
        if (master == null || master.isBlank()) {
            throw new MooncakeConfigException("master_server_address", "store config needs master_server_address (host:port)");
        }
        return new StoreConfig(string(m, "local_hostname", "127.0.0.1"), string(m, "metadata_server", "P2PHANDSHAKE"),
                size(m, "global_segment_size", DEFAULT_SIZE), size(m, "local_buffer_size", DEFAULT_SIZE),
                string(m, "protocol", "tcp"), string(m, "device_name", ""), master, string(m, "tenant_id", "default"),
                Duration.ofSeconds(5), Duration.ofSeconds(1));
    }

    /**
     * Reads the file named by {@code MOONCAKE_CONFIG_PATH}.
     *
     * @param env the environment (normally {@code System.getenv()})
     * @return the config
     * @throws MooncakeConfigException when the variable is unset or the file unreadable or malformed
     */
    public static StoreConfig fromEnvironment(Map<String, String> env) {
        String path = env.get("MOONCAKE_CONFIG_PATH");
        if (path == null || path.isBlank()) {
            throw new MooncakeConfigException("MOONCAKE_CONFIG_PATH", "MOONCAKE_CONFIG_PATH is not set (it names a mooncake.json)");
        }
        try {
            return fromJson(Files.readString(Path.of(path), StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new MooncakeConfigException("MOONCAKE_CONFIG_PATH", "cannot read MOONCAKE_CONFIG_PATH file " + path + ": " + e, e);
        }
    }

    private static String string(Map<String, Object> m, String key, String def) {
        Object v = m.get(key);
        if (v == null) {
            return def;
        }
        if (!(v instanceof String s)) {
            throw new MooncakeConfigException(key, key + " must be a string, got " + Json.typeName(v));
        }
        return s;
    }

    private static long size(Map<String, Object> m, String key, long def) {
        Object v = m.get(key);
        if (v == null) {
            return def;
        }
        if (v instanceof Number n) {
            if (n.doubleValue() < 0) {
                throw new MooncakeConfigException(key, key + " must not be negative");
            }
            return n.longValue();
        }
        if (v instanceof String s) {
            return parseSize(key, s);
        }
        throw new MooncakeConfigException(key, key + " must be a number or a size string, got " + Json.typeName(v));
    }

    /**
     * Parses a size as Mooncake does: a number (fractions allowed) with an optional unit
     * B, K/KB, M/MB, G/GB, T/TB (binary, any case, space allowed).
     *
     * @param key the config key, for the message
     * @param s   the text
     * @return bytes
     */
    public static long parseSize(String key, String s) {
        String t = s.trim();
        int i = 0;
        while (i < t.length() && (Character.isDigit(t.charAt(i)) || t.charAt(i) == '.')) {
            i++;
        }
        String num = t.substring(0, i);
        String unit = t.substring(i).trim().toUpperCase(Locale.ROOT);
        double v;
        try {
            v = Double.parseDouble(num);
        } catch (NumberFormatException e) {
            throw new MooncakeConfigException(key, key + ": cannot read a size from '" + s + "'");
        }
        double mul = switch (unit) {
            case "", "B" -> 1;
            case "K", "KB" -> 1024.0;
            case "M", "MB" -> 1024.0 * 1024;
            case "G", "GB" -> 1024.0 * 1024 * 1024;
            case "T", "TB" -> 1024.0 * 1024 * 1024 * 1024;
            default -> throw new MooncakeConfigException(key, key + ": unknown size unit '" + unit + "' in '" + s + "'");
        };
        return (long) (v * mul);
    }
}
