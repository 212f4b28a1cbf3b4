package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.memory.MemoryLocation;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Which RDMA NICs the engine uses and which it prefers per memory location (Mooncake
 * {@code Topology::discover}): the devices named by {@code device_name} (comma-separated) or all
 * listed devices; for {@code cpu:N} the NICs on NUMA node N are preferred, the rest available;
 * for {@code cuda:N} the NICs nearest the GPU on the PCI tree are preferred. Locality comes from
 * sysfs ({@code <sysfs>/class/infiniband/<dev>/device/numa_node} and the PCI path the
 * {@code device} link resolves to) when present; without it every NIC is preferred everywhere.
 */
public final class NicSelection {

    /** The conventional sysfs mount point. */
    public static final Path SYSFS = Path.of("/sys");

    /** A NIC and its locality; {@code numaNode} is -1 and {@code pciPath} empty when unknown. */
    public record Nic(String name, int numaNode, String pciPath) {}

    /** One row of Mooncake's {@code priority_matrix}: preferred NICs, then the other usable ones. */
    public record Preference(List<String> preferred, List<String> available) {
        public Preference {
            preferred = List.copyOf(preferred);
            available = List.copyOf(available);
        }
    }

    private NicSelection() {}

    /**
     * The devices to use: all of {@code listed} when {@code deviceName} is null or blank, else
     * the comma-separated names in it (in that order). Unknown names fail with the list of
     * devices present.
     */
    public static List<String> filter(List<String> listed, String deviceName) {
        if (deviceName == null || deviceName.isBlank()) {
            if (listed.isEmpty()) {
                throw new TransferEngineException("no RDMA devices found; use protocol \"tcp\" to run without RDMA");
            }
            return List.copyOf(listed);
        }
        Set<String> wanted = new LinkedHashSet<>();
        for (String part : deviceName.split(",")) {
            String n = part.strip();
            if (!n.isEmpty()) {
                wanted.add(n);
            }
        }
        List<String> unknown = wanted.stream().filter(n -> !listed.contains(n)).toList();
        if (!unknown.isEmpty() || wanted.isEmpty()) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "device_name '%s' names RDMA device(s) %s that are not present; devices here: %s",
                    deviceName, unknown, listed));
        }
        return List.copyOf(wanted);
    }

    /** Reads each device's NUMA node and PCI path under {@code sysfsRoot}. */
    public static List<Nic> discover(List<String> devices, Path sysfsRoot) {
        List<Nic> out = new ArrayList<>(devices.size());
        for (String d : devices) {
            Path dev = sysfsRoot.resolve("class").resolve("infiniband").resolve(d).resolve("device");
            out.add(new Nic(d, readNumaNode(dev.resolve("numa_node")), realPath(dev)));
        }
        return out;
    }

    /** NUMA nodes present under {@code <sysfs>/devices/system/node}, ascending; empty when unknown. */
    public static List<Integer> numaNodes(Path sysfsRoot) {
        Set<Integer> nodes = new TreeSet<>();
        Path dir = sysfsRoot.resolve("devices").resolve("system").resolve("node");
        if (Files.isDirectory(dir)) {
            try (DirectoryStream<Path> s = Files.newDirectoryStream(dir, "node[0-9]*")) {
                for (Path p : s) {
                    nodes.add(Integer.parseInt(p.getFileName().toString().substring(4)));
                }
            } catch (IOException | NumberFormatException e) {
                return List.of();
            }
        }
        return List.copyOf(nodes);
    }

    /** Preference for host memory on {@code numaNode}: NICs on that node first, all others available. */
    public static Preference forCpu(List<Nic> nics, int numaNode) {
        List<String> preferred = new ArrayList<>();
        List<String> available = new ArrayList<>();
        boolean anyKnown = nics.stream().anyMatch(n -> n.numaNode() >= 0);
        for (Nic n : nics) {
            (!anyKnown || n.numaNode() == numaNode ? preferred : available).add(n.name());
        }
        return new Preference(preferred, available);
    }

    /**
     * Preference for a device at {@code pciPath} (a GPU's resolved sysfs path): the NICs sharing
     * the longest PCI path prefix with it are preferred, the rest available. An unknown path
     * prefers every NIC.
     */
    public static Preference forPciDevice(List<Nic> nics, String pciPath) {
        if (pciPath == null || pciPath.isEmpty()) {
            return new Preference(nics.stream().map(Nic::name).toList(), List.of());
        }
        int best = -1;
        Map<String, Integer> shared = new LinkedHashMap<>();
        for (Nic n : nics) {
            int c = commonComponents(pciPath, n.pciPath());
            shared.put(n.name(), c);
            best = Math.max(best, c);
        }
        List<String> preferred = new ArrayList<>();
        List<String> available = new ArrayList<>();
        for (Map.Entry<String, Integer> e : shared.entrySet()) {
            (e.getValue() == best ? preferred : available).add(e.getKey());
        }
        return new Preference(preferred, available);
    }

    /**
     * The {@code priority_matrix} for host memory: {@code cpu:N} for each NUMA node (from sysfs,
     * else those the NICs report, else node 0) and {@code *} with every NIC preferred.
     */
    public static Map<String, Preference> cpuPriorityMatrix(List<Nic> nics, List<Integer> numaNodes) {
        Set<Integer> nodes = new TreeSet<>(numaNodes);
        if (nodes.isEmpty()) {
            nics.stream().filter(n -> n.numaNode() >= 0).forEach(n -> nodes.add(n.numaNode()));
        }
        if (nodes.isEmpty()) {
            nodes.add(0);
        }
        Map<String, Preference> m = new LinkedHashMap<>();
        for (int node : nodes) {
            m.put(MemoryLocation.cpu(node), forCpu(nics, node));
        }
        m.put(MemoryLocation.WILDCARD, new Preference(nics.stream().map(Nic::name).toList(), List.of()));
        return m;
    }

    static int commonComponents(String a, String b) {
        if (a.isEmpty() || b.isEmpty()) {
            return 0;
        }
        String[] x = a.split("/");
        String[] y = b.split("/");
        int i = 0;
        while (i < x.length && i < y.length && x[i].equals(y[i])) {
            i++;
        }
        return i;
    }

    private static int readNumaNode(Path file) {
        try {
            return Integer.parseInt(Files.readString(file).strip()); // -1 when the platform has no NUMA info
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
    }

    private static String realPath(Path p) {
        try {
            return p.toRealPath().toString();
        } catch (IOException e) {
            return "";
        }
    }
}
