package io.mooncake4j.engine.handshake;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.math.BigInteger;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * A segment descriptor: the reply to a Metadata (type 1) request (Mooncake {@code SegmentDesc},
 * {@code encodeSegmentDesc}/{@code decodeSegmentDesc} in {@code TE/src/transfer_metadata.cpp}).
 *
 * <p>JSON keys, as emitted (sorted, compact, trailing LF):
 * <table>
 *   <caption>Descriptor keys</caption>
 *   <tr><th>Key</th><th>Type</th><th>When</th></tr>
 *   <tr><td>{@code buffers}</td><td>array of {@code {addr, length, name[, lkey, rkey]}}</td><td>always</td></tr>
 *   <tr><td>{@code devices}</td><td>array of {@code {gid, lid, name}}</td><td>rdma, efa, cxi, barex</td></tr>
 *   <tr><td>{@code name}</td><td>string {@code host:rpcPort}</td><td>always</td></tr>
 *   <tr><td>{@code priority_matrix}</td><td>{@code {location: [[preferred], [available]]}}</td><td>rdma-like</td></tr>
 *   <tr><td>{@code protocol}</td><td>string</td><td>always</td></tr>
 *   <tr><td>{@code rdma_server_name}</td><td>string</td><td>when set</td></tr>
 *   <tr><td>{@code tcp_data_port}</td><td>int (missing reads as 0)</td><td>always</td></tr>
 *   <tr><td>{@code tcp_proto_version}</td><td>int (missing reads as 1)</td><td>always</td></tr>
 *   <tr><td>{@code timestamp}</td><td>{@code YYYY-MM-DD HH:MM:SS.uuuuuu}</td><td>always</td></tr>
 * </table>
 *
 * <p>Numbers are plain non-negative decimal integers; {@code addr}/{@code length} are unsigned
 * 64-bit (held in a {@code long}), keys unsigned 32-bit. Immutable.
 *
 * <p>Extension keys ({@value #EXTENSION_PREFIX}{@code <transport>}, e.g. {@code mc4j_machine},
 * {@code mc4j_shm}), at the top level and in buffer entries, carry what mooncake4j's own
 * transports need; Mooncake's decoder ignores unknown keys, so a C++ peer still parses the
 * descriptor. They are kept by {@link #parse} and written by {@link #toJson}; other unknown keys
 * are dropped.
 *
 * @param name           the segment name {@code host:rpcPort}
 * @param protocol       Mooncake's protocol ({@code tcp}, {@code rdma}, ...)
 * @param tcpDataPort    the TCP transport's data port (0 when none)
 * @param tcpProtoVersion 2 for pipelined v2 framing, 1 for Mooncake's v1
 * @param timestamp      when the descriptor was built (Mooncake's format)
 * @param rdmaServerName null when absent
 * @param buffers        the registered buffers, in the owner's order
 * @param devices        RDMA devices (empty for TCP)
 * @param priorityMatrix empty for TCP
 * @param extensions     top-level {@code mc4j_*} fields (JSON values), empty for a C++ peer
 */
public record SegmentDescriptor(String name, String protocol, int tcpDataPort, int tcpProtoVersion,
        String timestamp, String rdmaServerName, List<Buffer> buffers, List<Device> devices,
        Map<String, List<List<String>>> priorityMatrix, Map<String, Object> extensions) {

    /** Prefix of the keys mooncake4j adds to Mooncake's descriptor. */
    public static final String EXTENSION_PREFIX = "mc4j_";

    /** Protocols whose descriptors carry {@code devices}, {@code rkey}/{@code lkey} and a priority matrix. */
    public static final Set<String> RDMA_LIKE = Set.of("rdma", "efa", "cxi", "barex");
    /** Protocols Mooncake's decoder knows; anything else rejects the descriptor. */
    public static final Set<String> KNOWN_PROTOCOLS = Set.of("tcp", "rdma", "efa", "cxi", "barex", "ub", "nccl",
            "nvlink", "nvlink_intra", "hip", "maca", "musa", "ubshmem", "sunrise_link", "nvmeof", "ascend", "cxl");

    private static final DateTimeFormatter TIMESTAMP = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSSSSS",
            Locale.ROOT);

    /**
     * One buffer entry.
     *
     * @param name   TCP: the server name; RDMA: the location ({@code cpu:0}, ...)
     * @param addr   the buffer's first byte in the owner's address space
     * @param length bytes
     * @param rkey   one key per device (RDMA), null for TCP
     * @param lkey   one key per device (RDMA), null for TCP
     * @param extensions {@code mc4j_*} fields of this entry, empty unless a mooncake4j transport set some
     */
    public record Buffer(String name, long addr, long length, List<Long> rkey, List<Long> lkey,
            Map<String, Object> extensions) {
        public Buffer {
            Objects.requireNonNull(name, "name");
            rkey = rkey == null ? null : List.copyOf(rkey);
            lkey = lkey == null ? null : List.copyOf(lkey);
            extensions = checkedExtensions(extensions);
        }

        /** An entry without extensions. */
        public Buffer(String name, long addr, long length, List<Long> rkey, List<Long> lkey) {
            this(name, addr, length, rkey, lkey, Map.of());
        }

        /** This entry with extension {@code key} set to {@code value}. */
        public Buffer withExtension(String key, Object value) {
            Map<String, Object> m = new LinkedHashMap<>(extensions);
            m.put(key, value);
            return new Buffer(name, addr, length, rkey, lkey, m);
        }

        /** A TCP buffer entry (no keys). */
        public static Buffer tcp(String name, long addr, long length) {
            return new Buffer(name, addr, length, null, null);
        }

        /** Whether {@code [a, a+len)} lies inside this buffer (unsigned, no overflow). */
        public boolean contains(long a, long len) {
            return Long.compareUnsigned(a, addr) >= 0 && Long.compareUnsigned(len, length) <= 0
                    && Long.compareUnsigned(a - addr, length - len) <= 0;
        }
    }

    /**
     * One RDMA device entry.
     *
     * @param name the device name
     * @param lid  its LID (0 on RoCE)
     * @param gid  its GID, Mooncake's text form
     */
    public record Device(String name, int lid, String gid) {
        public Device {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(gid, "gid");
        }
    }

    public SegmentDescriptor {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(protocol, "protocol");
        timestamp = timestamp == null ? "" : timestamp;
        buffers = List.copyOf(buffers);
        devices = devices == null ? List.of() : List.copyOf(devices);
        priorityMatrix = priorityMatrix == null ? Map.of() : Map.copyOf(priorityMatrix);
        extensions = checkedExtensions(extensions);
    }

    /** A descriptor without extensions (what Mooncake's C++ engine publishes). */
    public SegmentDescriptor(String name, String protocol, int tcpDataPort, int tcpProtoVersion, String timestamp,
            String rdmaServerName, List<Buffer> buffers, List<Device> devices,
            Map<String, List<List<String>>> priorityMatrix) {
        this(name, protocol, tcpDataPort, tcpProtoVersion, timestamp, rdmaServerName, buffers, devices,
                priorityMatrix, Map.of());
    }

    /** This descriptor with top-level extension {@code key} set to {@code value}. */
    public SegmentDescriptor withExtension(String key, Object value) {
        Map<String, Object> m = new LinkedHashMap<>(extensions);
        m.put(key, value);
        return new SegmentDescriptor(name, protocol, tcpDataPort, tcpProtoVersion, timestamp, rdmaServerName,
                buffers, devices, priorityMatrix, m);
    }

    private static Map<String, Object> checkedExtensions(Map<String, Object> ext) {
        if (ext == null || ext.isEmpty()) {
            return Map.of();
        }
        for (String k : ext.keySet()) {
            if (!k.startsWith(EXTENSION_PREFIX) || k.length() == EXTENSION_PREFIX.length()) {
                throw new IllegalArgumentException("extension key '" + k + "' must be " + EXTENSION_PREFIX
                        + "<name>");
            }
        }
        return java.util.Collections.unmodifiableMap(new java.util.TreeMap<>(ext));
    }

    /** A TCP descriptor as {@code TcpTransport} publishes it (protocol version 2, timestamp now). */
    public static SegmentDescriptor tcp(String name, int dataPort, List<Buffer> buffers) {
        return new SegmentDescriptor(name, "tcp", dataPort, 2, now(), null, buffers, List.of(), Map.of());
    }

    /** Mooncake's timestamp format, local time with microseconds. */
    public static String now() {
        return LocalDateTime.now().format(TIMESTAMP);
    }

    /** The host part of {@link #name()} (brackets of an IPv6 literal removed). */
    public String host() {
        return PeerAddress.parse(name, 0).host();
    }

    // ------------------------------------------------------------------ encoding

    /** jsoncpp {@code FastWriter} output: sorted keys, compact, trailing LF. */
    public String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        List<Object> bufs = new ArrayList<>(buffers.size());
        for (Buffer b : buffers) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("addr", unsigned(b.addr()));
            e.put("length", unsigned(b.length()));
            e.put("name", b.name());
            if (b.rkey() != null) {
                e.put("rkey", b.rkey());
            }
            if (b.lkey() != null) {
                e.put("lkey", b.lkey());
            }
            e.putAll(b.extensions());
            bufs.add(e);
        }
        m.put("buffers", bufs);
        if (RDMA_LIKE.contains(protocol)) {
            List<Object> devs = new ArrayList<>();
            for (Device d : devices) {
                devs.add(Map.of("gid", d.gid(), "lid", (long) d.lid(), "name", d.name()));
            }
            m.put("devices", devs);
            m.put("priority_matrix", priorityMatrix);
        }
        m.put("name", name);
        m.put("protocol", protocol);
        if (rdmaServerName != null) {
            m.put("rdma_server_name", rdmaServerName);
        }
        m.put("tcp_data_port", (long) tcpDataPort);
        m.put("tcp_proto_version", (long) tcpProtoVersion);
        m.put("timestamp", timestamp);
        m.putAll(extensions);
        return Json.write(m, true) + "\n";
    }

    static Object unsigned(long v) {
        return v >= 0 ? (Object) v : new BigInteger(Long.toUnsignedString(v));
    }

    // ------------------------------------------------------------------ decoding

    /** A descriptor Mooncake's {@code decodeSegmentDesc} would reject, or JSON of the wrong shape. */
    public static final class InvalidDescriptorException extends Exception {
        private static final long serialVersionUID = 1L;

        public InvalidDescriptorException(String message) {
            super(message);
        }
    }

    /**
     * Parses and validates a descriptor (§2.6 rules): the whole descriptor is rejected when a
     * buffer has an empty name, zero address or zero length; when an rdma/efa/cxi buffer has a
     * non-empty {@code rkey} whose size differs from {@code lkey} or {@code devices}; when a
     * device has an empty name or gid; or when the protocol is unknown. Unknown keys are ignored.
     */
    public static SegmentDescriptor parse(String json) throws InvalidDescriptorException {
        Object root;
        try {
            root = Json.parse(json);
        } catch (JsonException e) {
            throw new InvalidDescriptorException("malformed JSON: " + e.getMessage());
        }
        if (!(root instanceof Map<?, ?> m)) {
            throw new InvalidDescriptorException("descriptor is " + Json.typeName(root) + ", not an object");
        }
        String name = str(m.get("name"), "name");
        String protocol = str(m.get("protocol"), "protocol");
        if (!KNOWN_PROTOCOLS.contains(protocol)) {
            throw new InvalidDescriptorException("unknown protocol '" + protocol + "'");
        }
        int port = m.containsKey("tcp_data_port") ? (int) uint(m.get("tcp_data_port"), "tcp_data_port", 65535) : 0;
        int ver = m.containsKey("tcp_proto_version")
                ? (int) uint(m.get("tcp_proto_version"), "tcp_proto_version", Integer.MAX_VALUE) : 1;
        String ts = m.containsKey("timestamp") ? str(m.get("timestamp"), "timestamp") : "";
        String rdmaServer = m.containsKey("rdma_server_name") ? str(m.get("rdma_server_name"), "rdma_server_name")
                : null;
        boolean rdmaLike = RDMA_LIKE.contains(protocol);
        boolean keysByDevice = rdmaLike && !protocol.equals("barex");
        List<Device> devices = new ArrayList<>();
        if (rdmaLike) {
            for (Object o : list(m.get("devices"), "devices")) {
                Map<?, ?> d = obj(o, "devices[]");
                String dn = str(d.get("name"), "devices[].name");
                String gid = str(d.get("gid"), "devices[].gid");
                if (dn.isEmpty() || gid.isEmpty()) {
                    throw new InvalidDescriptorException("device with empty name or gid in " + name);
                }
                int lid = d.containsKey("lid") ? (int) uint(d.get("lid"), "devices[].lid", 0xFFFFFFFFL) : 0;
                devices.add(new Device(dn, lid, gid));
            }
        }
        List<Buffer> buffers = new ArrayList<>();
        for (Object o : list(m.get("buffers"), "buffers")) {
            Map<?, ?> b = obj(o, "buffers[]");
            String bn = str(b.get("name"), "buffers[].name");
            long addr = u64(b.get("addr"), "buffers[].addr");
            long len = u64(b.get("length"), "buffers[].length");
            List<Long> rkey = null;
            List<Long> lkey = null;
            if (rdmaLike) {
                rkey = keys(b.get("rkey"), "rkey");
                lkey = keys(b.get("lkey"), "lkey");
                if (!rkey.isEmpty() && (rkey.size() != lkey.size() || (keysByDevice && rkey.size() != devices.size()))) {
                    throw new InvalidDescriptorException(String.format(Locale.ROOT,
                            "buffer %s at 0x%x has %d rkeys, %d lkeys for %d devices", bn, addr, rkey.size(),
                            lkey.size(), devices.size()));
                }
            }
            if (bn.isEmpty() || addr == 0 || len == 0) {
                throw new InvalidDescriptorException(String.format(Locale.ROOT,
                        "buffer with empty name, zero address or zero length in %s: name '%s' addr 0x%x length %s",
                        name, bn, addr, Long.toUnsignedString(len)));
            }
            buffers.add(new Buffer(bn, addr, len, rkey, lkey, extensionsOf(b)));
        }
        Map<String, List<List<String>>> matrix = new LinkedHashMap<>();
        if (rdmaLike && m.get("priority_matrix") instanceof Map<?, ?> pm) {
            for (Map.Entry<?, ?> e : pm.entrySet()) {
                List<?> pair = list(e.getValue(), "priority_matrix value");
                if (pair.size() != 2) {
                    throw new InvalidDescriptorException("priority_matrix entry " + e.getKey()
                            + " must be [[preferred], [available]]");
                }
                List<List<String>> v = new ArrayList<>();
                for (Object side : pair) {
                    List<String> nics = new ArrayList<>();
                    for (Object nic : list(side, "priority_matrix NIC list")) {
                        nics.add(str(nic, "priority_matrix NIC"));
                    }
                    v.add(List.copyOf(nics));
                }
                matrix.put(String.valueOf(e.getKey()), List.copyOf(v));
            }
        }
        return new SegmentDescriptor(name, protocol, port, ver, ts, rdmaServer, buffers, devices, matrix,
                extensionsOf(m));
    }

    private static Map<String, Object> extensionsOf(Map<?, ?> m) {
        Map<String, Object> out = null;
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (e.getKey() instanceof String k && k.startsWith(EXTENSION_PREFIX) && k.length() > EXTENSION_PREFIX.length()
                    && e.getValue() != null) {
                if (out == null) {
                    out = new LinkedHashMap<>();
                }
                out.put(k, e.getValue());
            }
        }
        return out == null ? Map.of() : out;
    }

    private static String str(Object o, String what) throws InvalidDescriptorException {
        if (o == null) {
            return "";
        }
        if (!(o instanceof String s)) {
            throw new InvalidDescriptorException(what + " is " + Json.typeName(o) + ", not a string");
        }
        return s;
    }

    private static List<?> list(Object o, String what) throws InvalidDescriptorException {
        if (o == null) {
            return List.of();
        }
        if (!(o instanceof List<?> l)) {
            throw new InvalidDescriptorException(what + " is " + Json.typeName(o) + ", not an array");
        }
        return l;
    }

    private static Map<?, ?> obj(Object o, String what) throws InvalidDescriptorException {
        if (!(o instanceof Map<?, ?> mm)) {
            throw new InvalidDescriptorException(what + " is " + Json.typeName(o) + ", not an object");
        }
        return mm;
    }

    private static long uint(Object o, String what, long max) throws InvalidDescriptorException {
        if (o instanceof Long l && l >= 0 && l <= max) {
            return l;
        }
        throw new InvalidDescriptorException(what + " must be an integer in 0.." + max + ", got " + o);
    }

    private static long u64(Object o, String what) throws InvalidDescriptorException {
        if (o == null) {
            return 0;
        }
        if (o instanceof Long l && l >= 0) {
            return l;
        }
        if (o instanceof BigInteger b && b.signum() >= 0 && b.bitLength() <= 64) {
            return b.longValue();
        }
        throw new InvalidDescriptorException(what + " must be an unsigned 64-bit integer, got " + o);
    }

    private static List<Long> keys(Object o, String what) throws InvalidDescriptorException {
        List<Long> out = new ArrayList<>();
        for (Object k : list(o, what)) {
            out.add(uint(k, what, 0xFFFFFFFFL));
        }
        return out;
    }
}
