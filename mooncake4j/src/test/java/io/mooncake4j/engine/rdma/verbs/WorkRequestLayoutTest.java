package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Work-request and completion flyweights, QP attribute writers and GID text form. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
@SuppressWarnings("restricted") // deliberate FFM: native pointers are sized with reinterpret, handles linked here
class WorkRequestLayoutTest {

    @Test
    void sendWorkRequestsShouldWriteRdmaWriteFieldsAtTheVerbsOffsets() {
        try (SendWorkRequests wrs = new SendWorkRequests(4)) {
            wrs.set(1, 0xABCDL, SendWorkRequests.OPCODE_RDMA_WRITE, SendWorkRequests.SEND_SIGNALED,
                    0x7000_0000L, 65536, 0x11, 0x9000_0000L, 0x22);
            MemorySegment wr = wrs.request(1);
            assertEquals(0xABCDL, wr.get(JAVA_LONG, 0));                 // wr_id
            assertEquals(1, wr.get(JAVA_INT, 24));                        // num_sge
            assertEquals(0, wr.get(JAVA_INT, 28));                        // opcode RDMA_WRITE
            assertEquals(2, wr.get(JAVA_INT, 32));                        // send_flags SIGNALED
            assertEquals(0x9000_0000L, wr.get(JAVA_LONG, 40));            // wr.rdma.remote_addr
            assertEquals(0x22, wr.get(JAVA_INT, 48));                     // wr.rdma.rkey
            MemorySegment sge = wr.get(ADDRESS, 16).reinterpret(16);      // sg_list
            assertEquals(0x7000_0000L, sge.get(JAVA_LONG, 0));
            assertEquals(65536, sge.get(JAVA_INT, 8));
            assertEquals(0x11, sge.get(JAVA_INT, 12));
        }
    }

    @Test
    void chainShouldLinkConsecutiveRequestsAndEndWithNull() {
        try (SendWorkRequests wrs = new SendWorkRequests(8)) {
            for (int i = 0; i < 8; i++) {
                wrs.set(i, i, SendWorkRequests.OPCODE_RDMA_READ, SendWorkRequests.SEND_SIGNALED, 0, 1, 0, 0, 0);
            }
            wrs.chain(2, 3);
            assertEquals(3, wrs.next(2));
            assertEquals(4, wrs.next(3));
            assertEquals(-1, wrs.next(4));
            assertEquals(-1, wrs.badIndex());
            assertEquals(SendWorkRequests.OPCODE_RDMA_READ, wrs.opcode(3));
        }
    }

    @Test
    void workCompletionsShouldReadWhatAProviderWrites() {
        try (WorkCompletions wc = new WorkCompletions(2)) {
            wc.set(1, 77L, WorkCompletions.REM_ACCESS_ERR, WorkCompletions.OPCODE_RDMA_WRITE, 0, 0x1234, 0x81);
            MemorySegment raw = wc.segment().asSlice(48, 48);
            assertEquals(77L, raw.get(JAVA_LONG, 0));
            assertEquals(10, raw.get(JAVA_INT, 8));
            assertEquals(0x81, raw.get(JAVA_INT, 16));
            assertEquals(0x1234, raw.get(JAVA_INT, 28));
            assertEquals(77L, wc.wrId(1));
            assertEquals(0x1234, wc.qpNum(1));
            assertEquals("remote access error", WorkCompletions.statusName(wc.status(1)));
        }
    }

    @Test
    void rtrAttributesShouldCarryMooncakeValuesIntoIbvQpAttr() {
        Gid peer = Gid.parse("00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:02");
        RtrAttributes r = RtrAttributes.mooncake(5, 1024, peer, 3, 0, 0, 0, 1, 0x1a2b3c);
        assertEquals(3, r.pathMtu()); // min(active 4096, MC_MTU 1024) = IBV_MTU_1024
        assertEquals(16, r.hopLimit());
        assertEquals(16, r.maxDestRdAtomic());
        assertEquals(12, r.minRnrTimer());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(VerbsLayouts.IBV_QP_ATTR);
            IbvQp.writeRtr(a, r);
            assertEquals(IbvQp.STATE_RTR, a.get(JAVA_INT, 0));
            assertEquals(3, a.get(JAVA_INT, 8));                            // path_mtu
            assertEquals(0x1a2b3c, a.get(JAVA_INT, 28));                    // dest_qp_num
            assertArrayEquals(peer.raw(), a.asSlice(56, 16).toArray(JAVA_BYTE)); // ah_attr.grh.dgid
            assertEquals(3, a.get(JAVA_BYTE, 76));                          // grh.sgid_index
            assertEquals(16, a.get(JAVA_BYTE, 77));                         // grh.hop_limit
            assertEquals(0, a.get(JAVA_SHORT, 80));                         // dlid (RoCE)
            assertEquals(1, a.get(JAVA_BYTE, 85));                          // is_global
            assertEquals(1, a.get(JAVA_BYTE, 86));                          // ah_attr.port_num
            assertEquals(16, a.get(JAVA_BYTE, 127));                        // max_dest_rd_atomic
            assertEquals(12, a.get(JAVA_BYTE, 128));                        // min_rnr_timer

            MemorySegment b = arena.allocate(VerbsLayouts.IBV_QP_ATTR);
            IbvQp.writeRts(b, RtsAttributes.mooncake());
            assertEquals(IbvQp.STATE_RTS, b.get(JAVA_INT, 0));
            assertEquals(16, b.get(JAVA_BYTE, 126));                        // max_rd_atomic
            assertEquals(14, b.get(JAVA_BYTE, 130));                        // timeout
            assertEquals(7, b.get(JAVA_BYTE, 131));                         // retry_cnt
            assertEquals(7, b.get(JAVA_BYTE, 132));                         // rnr_retry
        }
    }

    @Test
    void gidShouldRoundTripMooncakesTextForm() {
        String text = "fe:80:00:00:00:00:00:00:0a:1b:2c:ff:fe:3d:4e:5f";
        Gid g = Gid.parse(text);
        assertEquals(text, g.toString());
        assertEquals(47, g.toString().length());
        assertEquals(false, g.isNull());
        assertEquals(true, new Gid(new byte[16]).isNull());
        assertThrows(IllegalArgumentException.class, () -> Gid.parse("fe:80"));
        assertThrows(IllegalArgumentException.class, () -> Gid.parse(text + ":00"));
        assertThrows(IllegalArgumentException.class, () -> Gid.parse(text.replace("5f", "1ff")));
        assertThrows(IllegalArgumentException.class, () -> Gid.parse(text.replace("5f", "zz")));
    }

    @Test
    void mtuConversionsShouldMatchEnumIbvMtu() {
        assertEquals(4096, PortAttributes.mtuBytes(5));
        assertEquals(256, PortAttributes.mtuBytes(1));
        assertEquals(0, PortAttributes.mtuBytes(9));
        assertEquals(5, PortAttributes.ibvMtu(4096));
        assertThrows(IllegalArgumentException.class, () -> PortAttributes.ibvMtu(1500));
    }
}
