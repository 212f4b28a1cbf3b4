package io.mooncake4j.engine.handshake;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Golden bytes of handshake frames (spec §2.1, §2.9) and the receiver's rejection rules. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class HandshakeFrameTest {

    private static byte[] hex(String s) {
        return HexFormat.of().parseHex(s.replace(" ", ""));
    }

    @Test
    void probeRequestHasTheSpecBytes() {
        assertArrayEquals(hex("0400000000000000 03 7B7D0A"), new HandshakeFrame(HandshakeFrame.PROBE, "{}\n").encode());
    }

    @Test
    void probeReplyHasTheSpecBytes() {
        byte[] json = "{\"status\":\"success\"}\n".getBytes(StandardCharsets.UTF_8);
        assertEquals(21, json.length);
        ByteBuffer expected = ByteBuffer.allocate(8 + 1 + 21).order(ByteOrder.LITTLE_ENDIAN);
        expected.put(hex("1600000000000000 03")).put(json);
        assertArrayEquals(expected.array(),
                new HandshakeFrame(HandshakeFrame.PROBE, "{\"status\":\"success\"}\n").encode());
    }

    @Test
    void metadataRequestLengthCountsTheTypeByte() {
        byte[] f = new HandshakeFrame(HandshakeFrame.METADATA, "{}\n").encode();
        assertArrayEquals(hex("0400000000000000 01 7B7D0A"), f);
    }

    @Test
    void legacyFrameHasNoTypeByteAndDecodesAsLegacy() throws IOException {
        byte[] f = new HandshakeFrame(HandshakeFrame.LEGACY, "{}\n").encode();
        assertArrayEquals(hex("0300000000000000 7B7D0A"), f);
        HandshakeFrame back = HandshakeFrame.read(new ByteArrayInputStream(f), 1 << 20);
        assertTrue(back.legacy());
        assertEquals("{}\n", back.json());
    }

    @Test
    void everyTypeRoundTrips() throws IOException {
        for (int t = 0; t <= 3; t++) {
            HandshakeFrame f = new HandshakeFrame(t, "{\"a\":1}\n");
            assertEquals(f, HandshakeFrame.read(new ByteArrayInputStream(f.encode()), 1 << 20));
        }
    }

    @Test
    void firstByteAboveThreeButBelow0x80IsALegacyFrame() throws IOException {
        byte[] f = hex("0300000000000000 04 7B7D");
        HandshakeFrame back = HandshakeFrame.read(new ByteArrayInputStream(f), 1 << 20);
        assertTrue(back.legacy());
    }

    @Test
    void receiverRejectsBadFrames() {
        assertThrows(HandshakeFrame.FrameException.class,
                () -> HandshakeFrame.read(new ByteArrayInputStream(hex("0000000000000000")), 1 << 20), "length 0");
        assertThrows(HandshakeFrame.FrameException.class,
                () -> HandshakeFrame.read(new ByteArrayInputStream(hex("0100100000000000 01")), 1 << 20), "too long");
        assertThrows(HandshakeFrame.FrameException.class,
                () -> HandshakeFrame.read(new ByteArrayInputStream(hex("0500000000000000 03 7B")), 1 << 20),
                "truncated body");
        assertThrows(HandshakeFrame.FrameException.class,
                () -> HandshakeFrame.read(new ByteArrayInputStream(hex("050000")), 1 << 20), "truncated length");
        assertThrows(HandshakeFrame.FrameException.class,
                () -> HandshakeFrame.read(new ByteArrayInputStream(hex("0300000000000000 80 7B7D")), 1 << 20),
                "type byte 0x80");
        assertThrows(HandshakeFrame.FrameException.class,
                () -> HandshakeFrame.read(new ByteArrayInputStream(hex("0400000000000000 03 7B7D0A")), 3),
                "above MC_HANDSHAKE_MAX_LENGTH");
    }
}
