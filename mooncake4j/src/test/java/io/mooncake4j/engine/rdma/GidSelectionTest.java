package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.rdma.GidSelection.Candidate;
import io.mooncake4j.engine.rdma.GidSelection.Choice;
import io.mooncake4j.engine.rdma.GidSelection.GidClass;
import io.mooncake4j.engine.rdma.verbs.Gid;
import io.mooncake4j.engine.rdma.verbs.GidEntry;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class GidSelectionTest {

    private static final String LINK_LOCAL = "fe80:0000:0000:0000:0a1b:2cff:fe3d:4e5f";

    private static Gid v4(int a, int b, int c, int d) {
        byte[] raw = new byte[16];
        raw[10] = (byte) 0xff;
        raw[11] = (byte) 0xff;
        raw[12] = (byte) a;
        raw[13] = (byte) b;
        raw[14] = (byte) c;
        raw[15] = (byte) d;
        return new Gid(raw);
    }

    private static Gid v6(String text) {
        byte[] raw = new byte[16];
        String[] groups = text.split(":");
        for (int i = 0; i < 8; i++) {
            int g = Integer.parseInt(groups[i], 16);
            raw[2 * i] = (byte) (g >> 8);
            raw[2 * i + 1] = (byte) g;
        }
        return new Gid(raw);
    }

    private static Candidate c(int index, Gid gid, int type, String netdev) {
        return new Candidate(index, new GidEntry(gid, index, type, netdev.isEmpty() ? 0 : 7), netdev);
    }

    @Test
    void typicalMlx5RoceTableShouldPickTheRoceV2Ipv4Entry() {
        // mlx5 on RoCE: 0/1 link-local v1/v2, 2/3 IPv4 v1/v2 on eth0
        List<Candidate> table = List.of(
                c(0, v6(LINK_LOCAL), GidEntry.TYPE_ROCE_V1, "eth0"),
                c(1, v6(LINK_LOCAL), GidEntry.TYPE_ROCE_V2, "eth0"),
                c(2, v4(10, 0, 0, 2), GidEntry.TYPE_ROCE_V1, "eth0"),
                c(3, v4(10, 0, 0, 2), GidEntry.TYPE_ROCE_V2, "eth0"));
        Choice best = GidSelection.best(table).orElseThrow();
        assertEquals(3, best.index());
        assertEquals(GidClass.NETDEV_PRIVATE_V4, best.gidClass());
        assertEquals(List.of(3, 1, 0), GidSelection.rank(table).stream().map(Choice::index).toList(),
                "v2 private, v2 link-local (degraded), then the first non-null GID as fallback");
    }

    @Test
    void classesShouldOrderAsTheSpecLists() {
        List<Candidate> table = List.of(
                c(0, v4(10, 1, 1, 1), GidEntry.TYPE_ROCE_V2, ""),          // no-netdev private
                c(1, v6(LINK_LOCAL), GidEntry.TYPE_ROCE_V2, ""),           // no-netdev degraded
                c(2, v4(192, 0, 2, 1), GidEntry.TYPE_ROCE_V2, "docker0"),  // overlay netdev: degraded
                c(3, v4(172, 20, 0, 1), GidEntry.TYPE_ROCE_V2, "ens1"),    // netdev private
                c(4, v4(198, 51, 100, 7), GidEntry.TYPE_ROCE_V2, ""),      // no-netdev routable
                c(5, v4(203, 0, 113, 9), GidEntry.TYPE_ROCE_V2, "ens1"),   // netdev routable
                c(6, v4(100, 64, 0, 1), GidEntry.TYPE_ROCE_V2, "ens2"));   // netdev private (CGNAT)
        assertEquals(List.of(5, 4, 3, 6, 2, 0, 1), GidSelection.rank(table).stream().map(Choice::index).toList());
        assertEquals(GidClass.NETDEV_DEGRADED, GidSelection.classify(table.get(2)).orElseThrow());
    }

    @Test
    void nullOrUnreadableOrV1OnlyTablesShouldFallBackOrFail() {
        List<Candidate> v1Only = List.of(
                new Candidate(0, null, ""),
                c(1, new Gid(new byte[16]), GidEntry.TYPE_ROCE_V2, "eth0"),
                c(2, v4(10, 0, 0, 2), GidEntry.TYPE_ROCE_V1, "eth0"));
        Choice fallback = GidSelection.best(v1Only).orElseThrow();
        assertEquals(2, fallback.index());
        assertEquals(GidClass.FALLBACK_NONZERO, fallback.gidClass());
        assertEquals(Optional.empty(), GidSelection.best(List.of(c(0, new Gid(new byte[16]), GidEntry.TYPE_IB, ""))));
    }

    @Test
    void infinibandGidsShouldRankAsRoutable() {
        Candidate ib = c(0, v6("fe80:0000:0000:0000:0002:c903:0001:0002"), GidEntry.TYPE_IB, "");
        assertEquals(GidClass.NO_NETDEV_ROUTABLE, GidSelection.classify(ib).orElseThrow());
    }

    @Test
    void reselectShouldSkipTheCurrentAndTriedChoices() {
        List<Candidate> table = List.of(
                c(1, v6(LINK_LOCAL), GidEntry.TYPE_ROCE_V2, "eth0"),
                c(3, v4(10, 0, 0, 2), GidEntry.TYPE_ROCE_V2, "eth0"),
                c(5, v4(10, 0, 1, 2), GidEntry.TYPE_ROCE_V2, "eth1"));
        Choice first = GidSelection.best(table).orElseThrow();
        assertEquals(3, first.index());
        Choice second = GidSelection.reselect(table, 3, first.gid(), List.of()).orElseThrow();
        assertEquals(5, second.index());
        Choice third = GidSelection.reselect(table, 5, second.gid(), List.of(first)).orElseThrow();
        assertEquals(1, third.index());
        assertTrue(GidSelection.reselect(table, 1, third.gid(), List.of(first, second)).isEmpty());
    }

    @Test
    void probeShouldReadNetdevsFromSysfsAndEntriesFromTheDevice(@TempDir Path sys) throws IOException {
        Path ndevs = Files.createDirectories(sys.resolve("class/infiniband/emu0/ports/1/gid_attrs/ndevs"));
        Files.writeString(ndevs.resolve("1"), "eth0\n");
        EmulatedRdmaProvider provider = new EmulatedRdmaProvider("emu0");
        try (RdmaProvider.Device d = provider.open("emu0")) {
            List<Candidate> table = GidSelection.probe(d, 1, d.port(1).gidTblLen() + 1, sys);
            assertEquals(3, table.size());
            assertEquals("", table.get(0).netdev());
            assertEquals("eth0", table.get(1).netdev());
            assertEquals(null, table.get(2).entry(), "slot beyond the table: query failed");
            Choice best = GidSelection.best(table).orElseThrow();
            assertEquals(1, best.index()); // ::ffff:10.0.0.1 with netdev beats fe80:: without
            assertEquals(GidClass.NETDEV_PRIVATE_V4, best.gidClass());
        }
    }

    @Test
    void overlayNetdevNamesShouldBeRecognised() {
        for (String n : List.of("flannel.1", "cni0", "calico123", "vxlan.calico", "docker0", "tunl0")) {
            assertTrue(GidSelection.isOverlayNetdev(n), n);
        }
        for (String n : List.of("eth0", "ens1f0", "bond0", "tunl1", "")) {
            assertTrue(!GidSelection.isOverlayNetdev(n), n);
        }
    }
}
