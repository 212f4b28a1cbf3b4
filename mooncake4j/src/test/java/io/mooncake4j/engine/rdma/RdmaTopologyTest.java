package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** NUMA/PCI topology as Mooncake builds it (device preference per memory location), from a fake sysfs tree. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaTopologyTest {

    @TempDir
    Path sys;
    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine target;
    private CoreEngine initiator;

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        alloc.close();
    }

    /**
     * A two-socket node: emu0 on node 0 under root port 0000:17, emu1 on node 1 under 0000:ca;
     * GPU 0 (bus 0000:cb:00.0) sits next to emu1 on node 1.
     */
    private void fakeSysfs() throws IOException {
        nic("emu0", "pci0000:16/0000:16:00.0/0000:17:00.0/0000:18:00.0", "0");
        nic("emu1", "pci0000:c9/0000:c9:00.0/0000:ca:00.0/0000:cc:00.0", "1");
        Path gpu = Files.createDirectories(sys.resolve("devices/pci0000:c9/0000:c9:00.0/0000:ca:00.0/0000:cb:00.0"));
        Files.writeString(gpu.resolve("numa_node"), "1\n");
        Files.createSymbolicLink(Files.createDirectories(sys.resolve("bus/pci/devices")).resolve("0000:cb:00.0"), gpu);
        Files.createDirectories(sys.resolve("devices/system/node/node0"));
        Files.createDirectories(sys.resolve("devices/system/node/node1"));
    }

    private void nic(String name, String pci, String numa) throws IOException {
        Path dev = Files.createDirectories(sys.resolve("devices").resolve(pci));
        Files.writeString(dev.resolve("numa_node"), numa + "\n");
        Files.createSymbolicLink(Files.createDirectories(sys.resolve("class/infiniband").resolve(name)).resolve("device"), dev);
    }

    private static long uses(List<String> log, String device) {
        return log.stream().filter(l -> l.contains(" " + device + "->")).count(); // "ok emu1->emu2"
    }

    @Test
    void theMatrixHasCpuAndGpuRowsAndBuffersUseTheirNearestNic() throws IOException {
        fakeSysfs();
        HostMemoryStorage gpuMemory = alloc.allocate(1L << 20);
        FakeGpuDirect gpu = new FakeGpuDirect(gpuMemory.address(), 1L << 20).pciBusIds("0000:cb:00.0");
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        RdmaEngineConfig cfg = EmulatedEngines.config().withSysfsRoot(sys).withNumaNodeOf(a -> 1);
        initiator = EmulatedEngines.alone(fabric, cfg, Optional::empty, gpu);
        assertEquals(0, initiator.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "emu0,emu1"), initiator::lastError);
        target = EmulatedEngines.started(fabric, "emu2");

        Map<String, List<List<String>>> m = initiator.localDescriptor().priorityMatrix();
        assertEquals(List.of(List.of("emu0"), List.of("emu1")), m.get("cpu:0"));
        assertEquals(List.of(List.of("emu1"), List.of("emu0")), m.get("cpu:1"));
        assertEquals(List.of(List.of("emu1"), List.of("emu0")), m.get("cuda:0"), "GPU 0 is behind emu1's switch");
        assertEquals(List.of(List.of("emu0", "emu1"), List.of()), m.get("*"));

        // "*" host memory whose first page is on node 1 is published as cpu:1 and goes through emu1
        HostMemoryStorage host = alloc.allocate(1L << 20);
        assertEquals(0, initiator.registerMemory(host.address(), 1L << 20, "*"));
        List<SegmentDescriptor.Buffer> bufs = initiator.localDescriptor().buffers();
        assertEquals("cpu:1", bufs.getFirst().name());
        HostMemoryStorage remote = alloc.allocate(2L << 20);
        assertEquals(0, target.registerMemory(remote.address(), 2L << 20, "cpu:0"));
        int before = fabric.pathLog().size();
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {host.address()},
                new long[] {remote.address()}, new long[] {1L << 20}));
        List<String> hostPaths = fabric.pathLog().subList(before, fabric.pathLog().size());
        assertEquals(16, uses(hostPaths, "emu1"), "all host slices on the node-1 NIC: " + hostPaths);

        // GPU memory goes through the NIC next to the GPU
        assertEquals(0, initiator.registerMemory(gpuMemory.address(), 1L << 20, "cuda:0"), initiator::lastError);
        before = fabric.pathLog().size();
        assertEquals(0, initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {gpuMemory.address()},
                new long[] {remote.address() + (1L << 20)}, new long[] {1L << 20}));
        List<String> gpuPaths = fabric.pathLog().subList(before, fabric.pathLog().size());
        assertEquals(16, uses(gpuPaths, "emu1"), "all GPU slices on the GPU's NIC: " + gpuPaths);
    }

    @Test
    void mcTeFiltersAndMcCustomTopoJsonOverrideDiscovery() throws IOException {
        fakeSysfs();
        Path topo = Files.writeString(sys.resolve("topo.json"),
                "{\"cpu:0\": [[\"emu1\"], [\"emu0\", \"mlx5_9\"]], \"cuda:3\": [[\"emu0\"], []]}");
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        RdmaEngineConfig cfg = EmulatedEngines.config().withSysfsRoot(sys)
                .withTopology(new RdmaEngineConfig.TopologyOverrides("emu1, emu0", topo));
        initiator = EmulatedEngines.started(fabric, "", cfg);
        assertEquals(List.of("emu0", "emu1"), RdmaTransport.in(initiator).devices(), "MC_TE_FILTERS drops emu2");
        Map<String, List<List<String>>> m = initiator.localDescriptor().priorityMatrix();
        assertEquals(List.of(List.of("emu1"), List.of("emu0")), m.get("cpu:0"), "unknown NICs dropped");
        assertEquals(List.of(List.of("emu0"), List.of()), m.get("cuda:3"));
        assertEquals(List.of(List.of("emu0", "emu1"), List.of()), m.get("*"), "always published");
        assertTrue(!m.containsKey("cpu:1"), "the file replaces discovery");
    }

    @Test
    void aBrokenCustomTopologyFallsBackToDiscovery() throws IOException {
        fakeSysfs();
        Path topo = Files.writeString(sys.resolve("topo.json"), "{\"cpu:0\": \"emu0\"}");
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        RdmaEngineConfig cfg = EmulatedEngines.config().withSysfsRoot(sys)
                .withTopology(new RdmaEngineConfig.TopologyOverrides(null, topo));
        initiator = EmulatedEngines.started(fabric, "emu0,emu1", cfg);
        assertEquals(List.of(List.of("emu1"), List.of("emu0")),
                initiator.localDescriptor().priorityMatrix().get("cpu:1"), "discovered");
    }
}
