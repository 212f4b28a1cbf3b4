package io.mooncake4j.engine.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Golden bytes of the TCP session header and status frames (spec §3.3, §3.4). */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TcpWireTest {

    private static byte[] hex(String s) {
        return HexFormat.of().parseHex(s.replace(" ", ""));
    }

    @Test
    void v2WriteHeaderIsTwentyFourLittleEndianBytes() {
        assertArrayEquals(hex("0000100000000000 00100000f07f0000 81 00000000000000"),
                TcpWire.header(0x100000, 0x7ff000001000L, 0x81));
    }

    @Test
    void v1ReadHeaderHasOpcodeZero() {
        assertArrayEquals(hex("0020000000000000 0800000000000000 00 00000000000000"),
                TcpWire.header(0x2000, 8, TcpWire.OP_READ));
    }

    @Test
    void anEngineTagTravelsInThePaddingAndOnlyThere() {
        long tag = 0x0000a1b2c3d4e5f6L;
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(TcpWire.HEADER_BYTES);
        TcpWire.putHeader(b, 0x100000, 0x7ff000001000L, 0x81, tag);
        assertArrayEquals(hex("0000100000000000 00100000f07f0000 81 6d f6e5d4c3b2a1"), b.array(),
                "size, address and opcode as Mooncake's; the marker and the tag's 6 bytes in the padding");
        assertEquals(tag, TcpWire.tag(b, 0));
        assertEquals(0, TcpWire.tag(java.nio.ByteBuffer.wrap(TcpWire.header(8, 8, 0x81)), 0), "zero padding: no tag");
        // a C++ client does not zero the padding: without the marker it is no tag, whatever it holds
        assertEquals(0, TcpWire.tag(java.nio.ByteBuffer.wrap(hex("0800000000000000 0800000000000000 81 6c f6e5d4c3b2a1")), 0));
        for (int i = 0; i < 100; i++) {
            long t = TcpWire.newTag();
            assertTrue(t != 0 && (t & ~TcpWire.TAG_MASK) == 0, Long.toHexString(t));
        }
        assertArrayEquals(hex("02000000 5654434D"), TcpWire.status(TcpWire.STATUS_SELF));
        assertTrue(TcpWire.validStatus(TcpWire.STATUS_SELF), "a valid frame: a Mooncake initiator reads a rejection");
    }

    @Test
    void statusFramesHaveTheSpecBytes() {
        assertArrayEquals(hex("00000000 5654434D"), TcpWire.status(TcpWire.STATUS_OK));
        assertArrayEquals(hex("01000000 5654434D"), TcpWire.status(TcpWire.STATUS_ADDR_REJECTED));
        assertTrue(TcpWire.validStatus(TcpWire.STATUS_ADDR_REJECTED));
        assertFalse(TcpWire.validStatus(0x0000000100000000L));
    }

    @Test
    void rangesThatAreEmptyOrWrapAreInvalid() {
        assertFalse(TcpWire.validRange(0x1000, 0));
        assertFalse(TcpWire.validRange(0x1000, -1L));
        assertFalse(TcpWire.validRange(-4096L, 4097));
        assertFalse(TcpWire.validRange(-4096L, 4096), "ends at 2^64: Mooncake's addr + size < addr");
        assertTrue(TcpWire.validRange(-8192L, 4096));
        assertTrue(TcpWire.validRange(0x1000, 1));
    }
}
