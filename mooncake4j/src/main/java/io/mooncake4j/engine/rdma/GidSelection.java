package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.GidEntry;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * Automatic GID index selection when neither {@code MC_GID_INDEX} nor {@code NCCL_IB_GID_INDEX}
 * is set (spec §5.1, Mooncake {@code rdma_gid_probe.h}). RoCE v2 and IB entries with a non-null
 * GID are ranked by class, ties broken by the lower index; when none qualifies the first
 * non-null GID is the fallback. A null GID never qualifies (Mooncake disables such a device).
 * After an RTR failure with {@code EINVAL} the transport asks {@link #reselect} for the next
 * candidate not yet tried, up to {@code MC_AUTO_GID_MAX_RETRIES} times.
 */
public final class GidSelection {

    /** Candidate classes, best first. "Degraded" = overlay netdev or link-local IPv6. */
    public enum GidClass {
        NETDEV_ROUTABLE,
        NO_NETDEV_ROUTABLE,
        NETDEV_PRIVATE_V4,
        NETDEV_DEGRADED,
        NO_NETDEV_PRIVATE_V4,
        NO_NETDEV_DEGRADED,
        FALLBACK_NONZERO
    }

    /**
     * One GID table slot as probed: the entry ({@code null} when the query failed) and the name
     * of the network device bound to it ({@code ""} when none).
     *
     * @param index  the GID table index
     * @param entry  what the query returned, or null
     * @param netdev the bound network device, {@code ""} when none
     */
    public record Candidate(int index, GidEntry entry, String netdev) {
        public Candidate {
            netdev = netdev == null ? "" : netdev;
        }
    }

    /**
     * A ranked choice.
     *
     * @param index    the GID table index chosen
     * @param gid      its GID
     * @param gidClass why it ranked where it did
     */
    public record Choice(int index, Gid gid, GidClass gidClass) {}

    private GidSelection() {}

    /** The class of a candidate, empty when it is not RoCE v2/IB, null, or unreadable. */
    public static Optional<GidClass> classify(Candidate c) {
        GidEntry e = c.entry();
        if (e == null || e.gid().isNull()) {
            return Optional.empty();
        }
        if (e.type() != GidEntry.TYPE_ROCE_V2 && e.type() != GidEntry.TYPE_IB) {
            return Optional.empty();
        }
        byte[] raw = e.gid().raw();
        boolean roceV2 = e.type() == GidEntry.TYPE_ROCE_V2;
        boolean v4 = isIpv4Mapped(raw);
        boolean overlay = roceV2 && isOverlayNetdev(c.netdev());
        boolean linkLocal = roceV2 && !v4 && isLinkLocalIpv6(raw);
        boolean degraded = overlay || linkLocal;
        boolean privateV4 = roceV2 && v4 && isPrivateIpv4(raw);
        boolean netdev = !c.netdev().isEmpty();
        if (degraded) {
            return Optional.of(netdev ? GidClass.NETDEV_DEGRADED : GidClass.NO_NETDEV_DEGRADED);
        }
        if (privateV4) {
            return Optional.of(netdev ? GidClass.NETDEV_PRIVATE_V4 : GidClass.NO_NETDEV_PRIVATE_V4);
        }
        return Optional.of(netdev ? GidClass.NETDEV_ROUTABLE : GidClass.NO_NETDEV_ROUTABLE);
    }

    /** All qualifying candidates best first, then the first non-null GID as fallback. */
    public static List<Choice> rank(List<Candidate> candidates) {
        List<Choice> ranked = new ArrayList<>();
        Choice fallback = null;
        for (Candidate c : candidates) {
            Optional<GidClass> cls = classify(c);
            if (cls.isPresent()) {
                ranked.add(new Choice(c.index(), c.entry().gid(), cls.get()));
            } else if (fallback == null && c.entry() != null && !c.entry().gid().isNull()) {
                fallback = new Choice(c.index(), c.entry().gid(), GidClass.FALLBACK_NONZERO);
            }
        }
        ranked.sort(Comparator.comparing(Choice::gidClass).thenComparingInt(Choice::index));
        if (fallback != null) {
            ranked.add(fallback);
        }
        return ranked;
    }

    /** The best candidate, empty when the port has no usable GID. */
    public static Optional<Choice> best(List<Candidate> candidates) {
        List<Choice> r = rank(candidates);
        return r.isEmpty() ? Optional.empty() : Optional.of(r.getFirst());
    }

    /** The best candidate that differs from the current one and was not tried before. */
    public static Optional<Choice> reselect(List<Candidate> candidates, int currentIndex, Gid currentGid,
                                            Collection<Choice> tried) {
        for (Choice c : rank(candidates)) {
            boolean same = c.index() == currentIndex && c.gid().equals(currentGid);
            boolean seen = tried.stream().anyMatch(t -> t.index() == c.index() && t.gid().equals(c.gid()));
            if (!same && !seen) {
                return Optional.of(c);
            }
        }
        return Optional.empty();
    }

    /** Probes every slot of a port's GID table ({@code ibv_query_gid_ex} + sysfs netdev). */
    public static List<Candidate> probe(RdmaProvider.Device device, int port, int gidTableLength, Path sysfsRoot) {
        List<Candidate> out = new ArrayList<>(gidTableLength);
        for (int i = 0; i < gidTableLength; i++) {
            GidEntry e;
            try {
                e = device.gidEntry(port, i);
            } catch (RuntimeException ex) { // an unreadable slot is skipped, as in Mooncake
                e = null;
            }
            out.add(new Candidate(i, e, readNetdev(sysfsRoot, device.name(), port, i)));
        }
        return out;
    }

    /** {@code <sysfs>/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<index>}, {@code ""} when absent. */
    public static String readNetdev(Path sysfsRoot, String device, int port, int index) {
        Path p = sysfsRoot.resolve("class").resolve("infiniband").resolve(device).resolve("ports")
                .resolve(Integer.toString(port)).resolve("gid_attrs").resolve("ndevs").resolve(Integer.toString(index));
        try {
            return Files.readString(p).strip();
        } catch (IOException e) {
            return "";
        }
    }

    /** Container and overlay network devices: flannel*, cni*, calico*, vxlan*, docker*, tunl0. */
    public static boolean isOverlayNetdev(String netdev) {
        return netdev.startsWith("flannel") || netdev.startsWith("cni") || netdev.startsWith("calico")
                || netdev.startsWith("vxlan") || netdev.startsWith("docker") || netdev.equals("tunl0");
    }

    static boolean isIpv4Mapped(byte[] raw) {
        for (int i = 0; i < 10; i++) {
            if (raw[i] != 0) {
                return false;
            }
        }
        return raw[10] == (byte) 0xff && raw[11] == (byte) 0xff;
    }

    static boolean isLinkLocalIpv6(byte[] raw) {
        return raw[0] == (byte) 0xfe && (raw[1] & 0xc0) == 0x80;
    }

    /** 10/8, 172.16/12, 100.64/10 (RFC 1918 and carrier-grade NAT). */
    static boolean isPrivateIpv4(byte[] raw) {
        int a = raw[12] & 0xff;
        int b = raw[13] & 0xff;
        return a == 10 || (a == 172 && b >= 16 && b <= 31) || (a == 100 && b >= 64 && b <= 127);
    }
}
