package io.mooncake4j.engine.cudaipc;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * What the {@code cuda-ipc} transport advertises in a segment descriptor, under the extension key
 * {@value #KEY} (Mooncake's C++ decoder ignores unknown fields, so the descriptor stays its):
 * <ul>
 *   <li>top level: {@code {"machine": "<machine identity>", "process": "<token>", "pid": <pid>}}:
 *       where the handles were made (equal to this engine's
 *       {@link io.mooncake4j.engine.spi.MachineIdentity} for a peer on this host in this boot) and by
 *       which process (a handle cannot be opened in the process that made it; the pid is for logs);</li>
 *   <li>a GPU buffer: {@code {"handle": "<128 hex digits>", "offset": <bytes>, "size": <bytes>,
 *       "device": "<GPU uuid>", "pci": "<bus id>"}}: the IPC handle of the allocation the buffer
 *       lies in, the buffer's offset in it, the allocation's size, and the GPU it lives on;</li>
 *   <li>a host buffer, or a GPU buffer whose memory could not be exported: nothing.</li>
 * </ul>
 * Decoding is pure and total: a malformed
 * entry yields a {@link Parsed} with the reason (the transport logs it once and uses the next
 * transport), never an exception.
 */
public final class CudaIpcAdvert {

    /** The extension key, top level and per buffer. */
    public static final String KEY = SegmentDescriptor.EXTENSION_PREFIX + "cuda_ipc";

    private static final HexFormat HEX = HexFormat.of();

    private CudaIpcAdvert() {}

    /**
     * The peer-level facts.
     *
     * @param machine the machine identity of the process that made the handles
     * @param process the token of that process
     * @param pid     its pid (logs only)
     */
    public record Peer(String machine, String process, long pid) {}

    /**
     * One buffer's facts.
     *
     * @param handle   {@link IpcDriver#HANDLE_BYTES} bytes
     * @param handleHex the same, as advertised (the cache key)
     * @param offset   bytes from the allocation's base to the buffer's first byte
     * @param size     the allocation's size
     * @param device   the owning GPU's uuid
     */
    public record Buffer(byte[] handle, String handleHex, long offset, long size, String device) {}

    /**
     * A decoded buffer entry: exactly one of {@code buffer} and {@code error} is set.
     *
     * @param buffer the facts
     * @param error  why the entry is malformed
     */
    public record Parsed(Buffer buffer, String error) {}

    static Map<String, Object> peer(String machine, String process, long pid) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("machine", machine);
        m.put("process", process);
        m.put("pid", pid);
        return m;
    }

    static Map<String, Object> buffer(byte[] handle, long offset, long size, IpcDriver.DeviceId device) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("handle", HEX.formatHex(handle));
        m.put("offset", offset);
        m.put("size", size);
        m.put("device", device.uuid());
        m.put("pci", device.pciBusId());
        return m;
    }

    /** The peer-level advert of a descriptor, or null when absent or malformed. */
    public static Peer peerOf(SegmentDescriptor d) {
        if (!(d.extensions().get(KEY) instanceof Map<?, ?> m)) {
            return null;
        }
        if (!(m.get("process") instanceof String p) || p.isEmpty() || p.length() > 128
                || !(m.get("machine") instanceof String machine) || machine.isEmpty()) {
            return null;
        }
        long pid = m.get("pid") instanceof Long l ? l : -1;
        return new Peer(machine, p, pid);
    }

    /**
     * A buffer entry's advert: null when the entry advertises nothing for cuda-ipc, else the facts
     * or why they are malformed (checked against the entry's own length).
     */
    public static Parsed bufferOf(SegmentDescriptor.Buffer b) {
        Object raw = b.extensions().get(KEY);
        if (raw == null) {
            return null;
        }
        if (!(raw instanceof Map<?, ?> m)) {
            return bad("not an object");
        }
        if (!(m.get("handle") instanceof String hex) || hex.length() != 2 * IpcDriver.HANDLE_BYTES) {
            return bad("\"handle\" is not " + 2 * IpcDriver.HANDLE_BYTES + " hex digits");
        }
        byte[] handle;
        try {
            handle = HEX.parseHex(hex);
        } catch (IllegalArgumentException e) {
            return bad("\"handle\" is not hexadecimal");
        }
        if (!(m.get("offset") instanceof Long off) || off < 0) {
            return bad("\"offset\" is not a non-negative integer");
        }
        if (!(m.get("size") instanceof Long size) || size <= 0) {
            return bad("\"size\" is not a positive integer");
        }
        if (off > size - b.length()) {
            return bad(String.format(Locale.ROOT, "the buffer (%d B at offset %d) does not fit in the allocation of %d B",
                    b.length(), off, size));
        }
        if (!(m.get("device") instanceof String dev) || dev.isEmpty() || dev.length() > 128) {
            return bad("\"device\" is not a GPU uuid");
        }
        return new Parsed(new Buffer(handle, hex.toLowerCase(Locale.ROOT), off, size, dev), null);
    }

    private static Parsed bad(String why) {
        return new Parsed(null, KEY + " entry malformed: " + why);
    }
}
