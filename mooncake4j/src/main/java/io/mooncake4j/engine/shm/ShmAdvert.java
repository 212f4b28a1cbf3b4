package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What the {@code shm} transport advertises in a segment descriptor, under the extension key
 * {@value #KEY} (Mooncake's C++ decoder ignores it):
 * <ul>
 *   <li>top level: {@code {"machine": "<boot_id>/<pid ns>", "pid": <pid>}};</li>
 *   <li>a buffer in shareable memory: {@code {"fd": <n>, "offset": <bytes>, "memfd": "<name>"}}: the
 *       peer maps {@code /proc/<pid>/fd/<n>} (after checking that it links to {@code /memfd:<name>})
 *       from {@code offset} for the buffer's {@code length};</li>
 *   <li>any other host buffer: {@code {"vm": true}}: reachable with {@code process_vm_writev/readv};</li>
 *   <li>a GPU buffer: nothing (shm does not move it).</li>
 * </ul>
 * Pure functions; decoding returns null for anything malformed (the peer then gets TCP).
 */
public final class ShmAdvert {

    /** The extension key, top level and per buffer. */
    public static final String KEY = SegmentDescriptor.EXTENSION_PREFIX + "shm";

    private ShmAdvert() {}

    /**
     * The peer-level facts.
     *
     * @param machine where the peer runs
     * @param pid     its process id (for {@code /proc/<pid>/fd} and {@code process_vm_*})
     */
    public record Peer(MachineIdentity machine, int pid) {}

    /**
     * One buffer's facts: {@code memfd} null (and {@code fd} -1) for a {@code vm}-only buffer.
     *
     * @param fd     the memfd's descriptor number in the peer, -1 for a {@code vm}-only buffer
     * @param offset bytes from the start of the memfd to the buffer's first byte
     * @param memfd  the memfd's name, null for a {@code vm}-only buffer
     */
    public record Buffer(int fd, long offset, String memfd) {
        public boolean mappable() {
            return memfd != null;
        }
    }

    static Map<String, Object> peer(MachineIdentity machine, long pid) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("machine", machine.toString());
        m.put("pid", pid);
        return m;
    }

    static Map<String, Object> memfdBuffer(int fd, long offset, String name) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("fd", (long) fd);
        m.put("memfd", name);
        m.put("offset", offset);
        return m;
    }

    static Map<String, Object> vmBuffer() {
        return Map.of("vm", Boolean.TRUE);
    }

    /** The peer-level advert of a descriptor, or null when absent or malformed. */
    public static Peer peerOf(SegmentDescriptor d) {
        if (!(d.extensions().get(KEY) instanceof Map<?, ?> m)) {
            return null;
        }
        MachineIdentity machine = m.get("machine") instanceof String s ? MachineIdentity.parse(s) : null;
        if (machine == null || !(m.get("pid") instanceof Long pid) || pid <= 0 || pid > Integer.MAX_VALUE) {
            return null;
        }
        return new Peer(machine, (int) (long) pid);
    }

    /** A buffer entry's advert, or null when absent or malformed. */
    public static Buffer bufferOf(SegmentDescriptor.Buffer b) {
        if (!(b.extensions().get(KEY) instanceof Map<?, ?> m)) {
            return null;
        }
        if (Boolean.TRUE.equals(m.get("vm"))) {
            return new Buffer(-1, 0, null);
        }
        if (m.get("fd") instanceof Long fd && fd >= 0 && fd <= Integer.MAX_VALUE
                && m.get("offset") instanceof Long off && off >= 0
                && m.get("memfd") instanceof String name && !name.isEmpty() && name.indexOf('/') < 0) {
            return new Buffer((int) (long) fd, off, name);
        }
        return null;
    }
}
