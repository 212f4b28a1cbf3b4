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

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(NicSelection.class);

    /** The conventional sysfs mount point. */
    public static final Path SYSFS = Path.of("/sys");

    /**
     * A NIC and its locality.
     *
     * @param name     the device name ({@code mlx5_0})
     * @param numaNode its NUMA node, -1 when unknown
     * @param pciPath  its PCI path in sysfs, empty when unknown
     */
    public record Nic(String name, int numaNode, String pciPath) {}

    /**
     * One row of Mooncake's {@code priority_matrix}.
     *
     * @param preferred the NICs closest to the memory
     * @param available the other usable ones
     */
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

    /**
     * Mooncake's {@code MC_TE_FILTERS}: of {@code devices}, those named in the comma-separated
     * {@code whitelist} (all when it is null or blank). Fails when it keeps none.
     */
    public static List<String> whitelist(List<String> devices, String whitelist) {
        if (whitelist == null || whitelist.isBlank()) {
            return devices;
        }
        Set<String> keep = new LinkedHashSet<>();
        for (String part : whitelist.split(",")) {
            if (!part.isBlank()) {
                keep.add(part.strip());
            }
        }
        List<String> out = devices.stream().filter(keep::contains).toList();
        if (out.isEmpty()) {
            throw new TransferEngineException(String.format(Locale.ROOT,
                    "MC_TE_FILTERS '%s' keeps none of the RDMA devices %s", whitelist, devices));
        }
        return out;
    }

    /**
     * A priority matrix in Mooncake's JSON form ({@code {"cpu:0": [["mlx5_0"], ["mlx5_1"]]}}, as in
     * a descriptor and in the {@code MC_CUSTOM_TOPO_JSON} file), restricted to {@code devices}
     * (other names are dropped). Throws {@link IllegalArgumentException} for another shape.
     */
    public static Map<String, Preference> parseMatrix(String json, List<String> devices) {
        Map<String, Object> root;
        try {
            root = io.mooncake4j.internal.json.Json.parseObject(json);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("not a JSON object: " + e.getMessage(), e);
        }
        Map<String, Preference> m = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : root.entrySet()) {
            if (!(e.getValue() instanceof List<?> row) || row.size() != 2 || !(row.get(0) instanceof List<?> pref)
                    || !(row.get(1) instanceof List<?> avail)) {
                throw new IllegalArgumentException("entry '" + e.getKey() + "' is not [[preferred...], [available...]]");
            }
            m.put(e.getKey(), new Preference(names(pref, devices), names(avail, devices)));
        }
        return m;
    }

    private static List<String> names(List<?> raw, List<String> devices) {
        List<String> out = new ArrayList<>();
        for (Object o : raw) {
            if (!(o instanceof String n)) {
                throw new IllegalArgumentException("device name " + o + " is not a string");
            }
            if (devices.contains(n) && !out.contains(n)) {
                out.add(n);
            }
        }
        return out;
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

    /** CPUs of NUMA node {@code node} ({@code <sysfs>/devices/system/node/node<N>/cpulist}); empty when unknown. */
    public static java.util.BitSet nodeCpus(Path sysfsRoot, int node) {
        if (node < 0) {
            return new java.util.BitSet();
        }
        try {
            return io.mooncake4j.internal.sys.ThreadTuning.parseCpuList(Files.readString(sysfsRoot.resolve("devices")
                    .resolve("system").resolve("node").resolve("node" + node).resolve("cpulist")));
        } catch (IOException e) {
            return new java.util.BitSet();
        }
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
     * Preference for a PCI device (a GPU) at the resolved sysfs path {@code pciPath} on NUMA node
     * {@code numaNode} (-1 unknown), as Mooncake's {@code discoverCudaTopology}: the candidates
     * are the NICs on the same NUMA node (all NICs when none is), and those at the smallest PCI
     * distance from the device are preferred, the rest available. The distance counts the path
     * components after the two paths' common prefix. An unknown path prefers every NIC.
     */
    public static Preference forPciDevice(List<Nic> nics, String pciPath, int numaNode) {
        if (pciPath == null || pciPath.isEmpty()) {
            return new Preference(nics.stream().map(Nic::name).toList(), List.of());
        }
        List<Nic> candidates = nics.stream().filter(n -> numaNode >= 0 && n.numaNode() == numaNode).toList();
        if (candidates.isEmpty()) {
            candidates = nics;
        }
        int best = Integer.MAX_VALUE;
        Set<String> nearest = new LinkedHashSet<>();
        for (Nic n : candidates) {
            int d = pciDistance(pciPath, n.pciPath());
            if (d < 0) {
                continue;
            }
            if (d < best) {
                best = d;
                nearest.clear();
            }
            if (d == best) {
                nearest.add(n.name());
            }
        }
        if (nearest.isEmpty()) {
            return new Preference(nics.stream().map(Nic::name).toList(), List.of());
        }
        List<String> preferred = new ArrayList<>();
        List<String> available = new ArrayList<>();
        for (Nic n : nics) {
            (nearest.contains(n.name()) ? preferred : available).add(n.name());
        }
        return new Preference(preferred, available);
    }

    /**
     * Rows {@code cuda:i} for the GPUs whose PCI bus ids ({@code 0000:3b:00.0}, lower case) are
     * {@code gpuBusIds} (index = GPU ordinal; null or empty = unknown), located through
     * {@code <sysfs>/bus/pci/devices/<bus id>} (its resolved path and {@code numa_node}).
     */
    public static Map<String, Preference> gpuRows(List<Nic> nics, List<String> gpuBusIds, Path sysfsRoot) {
        Map<String, Preference> rows = new LinkedHashMap<>();
        for (int i = 0; i < gpuBusIds.size(); i++) {
            String bus = gpuBusIds.get(i);
            String path = "";
            int node = -1;
            if (bus != null && !bus.isEmpty()) {
                Path dev = sysfsRoot.resolve("bus").resolve("pci").resolve("devices").resolve(bus.toLowerCase(Locale.ROOT));
                path = realPath(dev);
                node = readNumaNode(dev.resolve("numa_node"));
            }
            rows.put(MemoryLocation.cuda(i), forPciDevice(nics, path, node));
        }
        return rows;
    }

    /** Mooncake's PCI distance: path separators after the common prefix of both paths; -1 when one is unknown. */
    static int pciDistance(String a, String b) {
        if (a.isEmpty() || b.isEmpty()) {
            return -1;
        }
        int i = 0;
        while (i < a.length() && i < b.length() && a.charAt(i) == b.charAt(i)) {
            i++;
        }
        int d = 0;
        for (int k = i; k < a.length(); k++) {
            d += a.charAt(k) == '/' ? 1 : 0;
        }
        for (int k = i; k < b.length(); k++) {
            d += b.charAt(k) == '/' ? 1 : 0;
        }
        return d;
    }

    /**
     * The priority matrix as Mooncake's {@code Topology::discover} builds it: {@code cpu:N} per NUMA
     * node (NICs on node N preferred), {@code cuda:N} per GPU whose PCI bus id is
     * {@code gpuBusIds[N]} (NICs at the smallest PCI distance, same NUMA node first, preferred), and
     * {@code *} with every NIC (which keeps C++'s device indexes equal to {@code devices[]}
     * positions). A {@code customTopology} file ({@code MC_CUSTOM_TOPO_JSON}) replaces the discovered
     * rows; an unreadable or malformed one is reported (WARN) and discovery used.
     */
    public static Map<String, Preference> priorityMatrix(List<String> names, Path sysfsRoot, Path customTopology,
            List<String> gpuBusIds) {
        Map<String, Preference> rows = null;
        if (customTopology != null) {
            try {
                rows = new LinkedHashMap<>(parseMatrix(Files.readString(customTopology), names));
                LOG.info("RDMA topology from MC_CUSTOM_TOPO_JSON={}: {}", customTopology, rows);
            } catch (IOException | IllegalArgumentException e) {
                LOG.warn("MC_CUSTOM_TOPO_JSON={} cannot be used ({}); discovering the topology instead",
                        customTopology, e.getMessage());
            }
        }
        if (rows == null) {
            List<Nic> nics = discover(names, sysfsRoot);
            rows = new LinkedHashMap<>(cpuPriorityMatrix(nics, numaNodes(sysfsRoot)));
            rows.remove(MemoryLocation.WILDCARD);
            rows.putAll(gpuRows(nics, gpuBusIds, sysfsRoot));
        }
        rows.put(MemoryLocation.WILDCARD, new Preference(names, List.of()));
        return rows;
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
