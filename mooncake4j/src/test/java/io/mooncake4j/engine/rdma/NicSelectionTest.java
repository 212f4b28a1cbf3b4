package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.rdma.NicSelection.Nic;
import io.mooncake4j.engine.rdma.NicSelection.Preference;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Device filtering and locality preferences against a fake sysfs tree. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class NicSelectionTest {

    @TempDir
    Path sys;

    /** mlx5_0 and mlx5_1 under root port 0000:17, mlx5_2 under 0000:ca on node 1; a GPU under 0000:17. */
    private void fakeSysfs() throws IOException {
        nic("mlx5_0", "pci0000:16/0000:16:00.0/0000:17:00.0/0000:18:00.0", "0");
        nic("mlx5_1", "pci0000:16/0000:16:00.0/0000:17:00.0/0000:19:00.0", "0");
        nic("mlx5_2", "pci0000:c9/0000:c9:00.0/0000:ca:00.0", "1\n");
        Files.createDirectories(sys.resolve("devices/pci0000:16/0000:16:00.0/0000:17:00.0/0000:1a:00.0"));
        Files.createDirectories(sys.resolve("devices/system/node/node0"));
        Files.createDirectories(sys.resolve("devices/system/node/node1"));
    }

    private void nic(String name, String pci, String numa) throws IOException {
        Path dev = Files.createDirectories(sys.resolve("devices").resolve(pci));
        Files.writeString(dev.resolve("numa_node"), numa);
        Path cls = Files.createDirectories(sys.resolve("class/infiniband").resolve(name));
        Files.createSymbolicLink(cls.resolve("device"), dev);
    }

    @Test
    void shouldReadNumaNodeAndPciPathFromSysfs() throws IOException {
        fakeSysfs();
        List<Nic> nics = NicSelection.discover(List.of("mlx5_0", "mlx5_2", "mlx5_9"), sys);
        assertEquals(0, nics.get(0).numaNode());
        assertTrue(nics.get(0).pciPath().endsWith("0000:17:00.0/0000:18:00.0"), nics.get(0).pciPath());
        assertEquals(1, nics.get(1).numaNode());
        assertEquals(new Nic("mlx5_9", -1, ""), nics.get(2)); // absent from sysfs
        assertEquals(List.of(0, 1), NicSelection.numaNodes(sys));
    }

    @Test
    void cpuLocationShouldPreferNicsOnItsNumaNode() throws IOException {
        fakeSysfs();
        List<Nic> nics = NicSelection.discover(List.of("mlx5_0", "mlx5_1", "mlx5_2"), sys);
        assertEquals(new Preference(List.of("mlx5_0", "mlx5_1"), List.of("mlx5_2")), NicSelection.forCpu(nics, 0));
        assertEquals(new Preference(List.of("mlx5_2"), List.of("mlx5_0", "mlx5_1")), NicSelection.forCpu(nics, 1));
        Map<String, Preference> m = NicSelection.cpuPriorityMatrix(nics, NicSelection.numaNodes(sys));
        assertEquals(List.of("cpu:0", "cpu:1", "*"), List.copyOf(m.keySet()));
        assertEquals(List.of("mlx5_0", "mlx5_1", "mlx5_2"), m.get("*").preferred());
    }

    @Test
    void gpuShouldPreferNicsSharingTheLongestPciPath() throws IOException {
        fakeSysfs();
        List<Nic> nics = NicSelection.discover(List.of("mlx5_0", "mlx5_1", "mlx5_2"), sys);
        String gpu = sys.resolve("devices/pci0000:16/0000:16:00.0/0000:17:00.0/0000:1a:00.0").toRealPath().toString();
        assertEquals(new Preference(List.of("mlx5_0", "mlx5_1"), List.of("mlx5_2")),
                NicSelection.forPciDevice(nics, gpu, -1));
        // on NUMA node 1 only mlx5_2 is a candidate, however far it is on the PCI tree
        assertEquals(new Preference(List.of("mlx5_2"), List.of("mlx5_0", "mlx5_1")),
                NicSelection.forPciDevice(nics, gpu, 1));
        // the GPU's row from its bus id, as Mooncake builds it (bus/pci/devices/<id> -> the PCI path)
        Path bus = Files.createDirectories(sys.resolve("bus/pci/devices"));
        Path gpuDir = sys.resolve("devices/pci0000:16/0000:16:00.0/0000:17:00.0/0000:1a:00.0");
        Files.writeString(gpuDir.resolve("numa_node"), "0\n");
        Files.createSymbolicLink(bus.resolve("0000:1a:00.0"), gpuDir);
        Map<String, Preference> rows = NicSelection.gpuRows(nics, java.util.Arrays.asList("0000:1A:00.0", null), sys);
        assertEquals(new Preference(List.of("mlx5_0", "mlx5_1"), List.of("mlx5_2")), rows.get("cuda:0"));
        assertEquals(new Preference(List.of("mlx5_0", "mlx5_1", "mlx5_2"), List.of()), rows.get("cuda:1"),
                "unknown bus id: every NIC");
        assertEquals(0, NicSelection.pciDistance("/a/b/x1", "/a/b/x2"));
        assertEquals(3, NicSelection.pciDistance("/a/b/c", "/a/d/e/f"));
    }

    @Test
    void withoutSysfsEveryNicShouldBePreferred() {
        List<Nic> nics = NicSelection.discover(List.of("rxe0", "rxe1"), sys);
        assertEquals(new Preference(List.of("rxe0", "rxe1"), List.of()), NicSelection.forCpu(nics, 0));
        assertEquals(new Preference(List.of("rxe0", "rxe1"), List.of()), NicSelection.forPciDevice(nics, "", -1));
        assertEquals(List.of("cpu:0", "*"), List.copyOf(NicSelection.cpuPriorityMatrix(nics, List.of()).keySet()));
    }

    @Test
    void deviceNameShouldFilterInTheGivenOrder() {
        List<String> listed = List.of("mlx5_0", "mlx5_1", "mlx5_2");
        assertEquals(listed, NicSelection.filter(listed, null));
        assertEquals(listed, NicSelection.filter(listed, " "));
        assertEquals(List.of("mlx5_2", "mlx5_0"), NicSelection.filter(listed, "mlx5_2, mlx5_0"));
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> NicSelection.filter(listed, "mlx5_0,mlx5_7"));
        assertTrue(e.getMessage().contains("[mlx5_7]") && e.getMessage().contains("mlx5_1"), e.getMessage());
        assertThrows(TransferEngineException.class, () -> NicSelection.filter(List.of(), ""));
    }
}
