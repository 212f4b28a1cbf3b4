package io.mooncake4j.internal.zmtp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ZmtpDecoderTest {

    private static final ZmtpLimits LIMITS = new ZmtpLimits(1024, 2048, 4, 512, 10, 1 << 20);

    /** Records what the decoder reports. */
    private static final class Recorder implements ZmtpDecoder.Handler {
        final List<String> types = new ArrayList<>();
        final List<byte[]> identities = new ArrayList<>();
        final List<List<byte[]>> messages = new ArrayList<>();
        final List<byte[]> pings = new ArrayList<>();

        @Override
        public void onReady(String socketType, byte[] identity) {
            types.add(socketType);
            identities.add(identity);
        }

        @Override
        public boolean onMessage(List<byte[]> frames) {
            messages.add(frames);
            return !stopAfterEach;
        }

        boolean stopAfterEach;

        @Override
        public void onPing(byte[] context) {
            pings.add(context);
        }
    }

    private static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            b.writeBytes(p);
        }
        return b.toByteArray();
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] a = new byte[b.remaining()];
        b.get(a);
        return a;
    }

    private static byte[] ready(String type, byte[] identity) {
        return bytes(Zmtp.commandFrame(Zmtp.readyBody(type, identity)));
    }

    private static byte[] msg(byte[]... frames) {
        return bytes(Zmtp.messageFrames(List.of(frames)));
    }

    private static byte[] handshake(String type) {
        return concat(Zmtp.greeting(), ready(type, null));
    }

    /** Feeds {@code wire} one byte at a time. */
    private static void feedBytewise(ZmtpDecoder d, byte[] wire) throws ZmtpException {
        for (byte b : wire) {
            d.feed(ByteBuffer.wrap(new byte[] {b}));
        }
    }

    private static String rejection(String ourType, byte[] wire) {
        ZmtpDecoder d = new ZmtpDecoder(ourType, LIMITS, new Recorder());
        ZmtpException e = assertThrows(ZmtpException.class, () -> feedBytewise(d, wire));
        // a failed decoder stays failed
        ZmtpException again = assertThrows(ZmtpException.class, () -> d.feed(ByteBuffer.wrap(new byte[] {0})));
        assertEquals(e.getMessage(), again.getMessage());
        return e.getMessage();
    }

    @Test
    void decodesAHandshakeAndMessagesFedAtEverySplitPoint() throws Exception {
        byte[] big = new byte[700]; // a long frame
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) i;
        }
        byte[] wire = concat(Zmtp.greeting(), ready("DEALER", "peer-1".getBytes(StandardCharsets.US_ASCII)),
                msg("hello".getBytes(StandardCharsets.US_ASCII)), msg(new byte[0], big),
                bytes(Zmtp.commandFrame(Zmtp.pingBody(10, new byte[] {7, 8}))),
                bytes(Zmtp.commandFrame(Zmtp.pongBody(new byte[] {1}))), msg(new byte[] {42}));
        for (int split = 0; split <= wire.length; split++) {
            Recorder r = new Recorder();
            ZmtpDecoder d = new ZmtpDecoder("ROUTER", LIMITS, r);
            d.feed(ByteBuffer.wrap(wire, 0, split));
            d.feed(ByteBuffer.wrap(wire, split, wire.length - split));
            assertEquals(List.of("DEALER"), r.types, "split " + split);
            assertArrayEquals("peer-1".getBytes(StandardCharsets.US_ASCII), r.identities.getFirst());
            assertEquals(3, r.messages.size(), "split " + split);
            assertArrayEquals("hello".getBytes(StandardCharsets.US_ASCII), r.messages.get(0).getFirst());
            assertEquals(2, r.messages.get(1).size());
            assertEquals(0, r.messages.get(1).get(0).length);
            assertArrayEquals(big, r.messages.get(1).get(1));
            assertArrayEquals(new byte[] {42}, r.messages.get(2).getFirst());
            assertEquals(1, r.pings.size());
            assertArrayEquals(new byte[] {7, 8}, r.pings.getFirst());
            assertEquals(Zmtp.MINOR, d.peerMinor());
        }
        Recorder r = new Recorder();
        ZmtpDecoder d = new ZmtpDecoder("ROUTER", LIMITS, r);
        feedBytewise(d, wire);
        assertEquals(3, r.messages.size());
    }

    @Test
    void aHandlerCanStopTheDecoderAfterAMessageLeavingTheRestUnread() throws Exception {
        byte[] m1 = msg(new byte[] {1});
        byte[] wire = concat(handshake("DEALER"), m1, msg(new byte[] {2}), msg(new byte[] {3}));
        Recorder r = new Recorder();
        r.stopAfterEach = true;
        ZmtpDecoder d = new ZmtpDecoder("ROUTER", LIMITS, r);
        ByteBuffer in = ByteBuffer.wrap(wire);
        d.feed(in);
        assertEquals(1, r.messages.size());
        assertEquals(2 * m1.length, in.remaining(), "the two later messages are left in the buffer");
        d.feed(in);
        assertEquals(2, r.messages.size());
        d.feed(in);
        assertEquals(3, r.messages.size());
        assertEquals(0, in.remaining());
    }

    @Test
    void aFrameBufferGrowsWithTheBytesThatArriveNotWithTheDeclaredSize() throws Exception {
        ZmtpLimits big = new ZmtpLimits(64L << 20, 64L << 20, 4, 512, 10, 1 << 20);
        Recorder r = new Recorder();
        ZmtpDecoder d = new ZmtpDecoder("ROUTER", big, r);
        d.feed(ByteBuffer.wrap(handshake("DEALER")));
        ByteBuffer h = ByteBuffer.allocate(9);
        Zmtp.putHeader(h, 0, 32L << 20); // declares 32 MiB, sends 3 bytes
        long before = usedHeap();
        d.feed(h.flip());
        d.feed(ByteBuffer.wrap(new byte[] {1, 2, 3}));
        assertTrue(d.midMessage());
        assertTrue(usedHeap() - before < 16L << 20, "no 32 MiB buffer was allocated for the declared size");
        assertEquals(0, r.messages.size());
    }

    private static long usedHeap() {
        Runtime rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }

    @Test
    void acceptsZmtp30PeersAndReadyWithoutIdentityAndCaseInsensitivePropertyNames() throws Exception {
        byte[] g = Zmtp.greeting();
        g[11] = 0;
        ByteBuffer body = ByteBuffer.allocate(64);
        body.put((byte) 5).put("READY".getBytes(StandardCharsets.US_ASCII));
        body.put((byte) 11).put("socket-type".getBytes(StandardCharsets.US_ASCII)).putInt(6)
                .put("DEALER".getBytes(StandardCharsets.US_ASCII));
        body.put((byte) 5).put("X-Foo".getBytes(StandardCharsets.US_ASCII)).putInt(2).put(new byte[] {1, 2});
        byte[] b = java.util.Arrays.copyOf(body.array(), body.position());
        Recorder r = new Recorder();
        ZmtpDecoder d = new ZmtpDecoder("ROUTER", LIMITS, r);
        feedBytewise(d, concat(g, bytes(Zmtp.commandFrame(b))));
        assertEquals(List.of("DEALER"), r.types);
        assertEquals(0, r.identities.getFirst().length);
        assertEquals(0, d.peerMinor());
    }

    @Test
    void rejectsABadSignature() {
        byte[] g = Zmtp.greeting();
        g[0] = 0x01;
        assertTrue(rejection("ROUTER", g).contains("not a ZMTP 3 peer: its greeting starts with 0x01"));
        g = Zmtp.greeting();
        g[9] = 0x7E;
        assertTrue(rejection("ROUTER", g).contains("signature byte 10 is 0x7e"));
        assertTrue(rejection("ROUTER", "GET / HTTP/1.1\r\n".getBytes(StandardCharsets.US_ASCII))
                .contains("starts with 0x47"));
    }

    @Test
    void rejectsOlderMajorVersionsNamingTheVersion() {
        byte[] g = Zmtp.greeting();
        g[10] = 1;
        String m = rejection("ROUTER", java.util.Arrays.copyOf(g, 11)); // a ZMTP 2.0 peer stops there
        assertTrue(m.contains("major version 1 (ZMTP 2.0)"), m);
        assertTrue(m.contains("ZMTP 3.0 and later"), m);
        g[10] = 2;
        assertTrue(rejection("ROUTER", g).contains("major version 2"));
    }

    @Test
    void rejectsMechanismsOtherThanNull() {
        byte[] g = Zmtp.greeting();
        System.arraycopy("PLAIN".getBytes(StandardCharsets.US_ASCII), 0, g, 12, 5);
        assertTrue(rejection("ROUTER", g).contains("mechanism 'PLAIN'"));
        g = Zmtp.greeting();
        System.arraycopy("CURVE".getBytes(StandardCharsets.US_ASCII), 0, g, 12, 5);
        assertTrue(rejection("ROUTER", g).contains("mechanism 'CURVE': this side speaks NULL only"));
        g = Zmtp.greeting();
        g[20] = 'X'; // "NULL" with junk after its terminator
        assertTrue(rejection("ROUTER", g).contains("mechanism"));
    }

    @Test
    void rejectsIncompatibleSocketTypes() {
        assertTrue(rejection("ROUTER", handshake("PUB"))
                .contains("incompatible socket types: this ROUTER does not talk to a peer of type 'PUB'"));
        assertTrue(rejection("DEALER", handshake("REQ")).contains("this DEALER does not talk to a peer of type 'REQ'"));
        assertEquals(1, accepted("ROUTER", handshake("REQ")));
        assertEquals(1, accepted("DEALER", handshake("ROUTER")));
    }

    private static int accepted(String ours, byte[] wire) {
        Recorder r = new Recorder();
        try {
            feedBytewise(new ZmtpDecoder(ours, LIMITS, r), wire);
        } catch (ZmtpException e) {
            throw new AssertionError(e);
        }
        return r.types.size();
    }

    @Test
    void rejectsMalformedCommands() {
        byte[] g = Zmtp.greeting();
        assertTrue(rejection("ROUTER", concat(g, msg(new byte[] {1}))).contains("a message frame before the peer's READY"));
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(Zmtp.pongBody(new byte[0])))))
                .contains("expected the peer's READY command, got command 'PONG'"));
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(new byte[0])))).contains("empty command"));
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(new byte[] {9, 'R'}))))
                .contains("a name of 9 bytes in a command of 2 bytes"));
        // a property whose value length runs past the command
        ByteBuffer b = ByteBuffer.allocate(40);
        b.put((byte) 5).put("READY".getBytes(StandardCharsets.US_ASCII)).put((byte) 11)
                .put("Socket-Type".getBytes(StandardCharsets.US_ASCII)).putInt(0x7FFFFFFF);
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(java.util.Arrays.copyOf(b.array(),
                b.position()))))).contains("property 'Socket-Type' declares 2147483647 bytes"));
        byte[] noType = {5, 'R', 'E', 'A', 'D', 'Y'};
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(noType)))).contains("no Socket-Type"));
        byte[] truncatedName = {5, 'R', 'E', 'A', 'D', 'Y', 20, 'S'};
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(truncatedName))))
                .contains("a property name of 20 bytes"));
        ByteBuffer id = ByteBuffer.allocate(400);
        id.put((byte) 5).put("READY".getBytes(StandardCharsets.US_ASCII)).put((byte) 8)
                .put("Identity".getBytes(StandardCharsets.US_ASCII)).putInt(300).put(new byte[300]);
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(java.util.Arrays.copyOf(id.array(),
                id.position()))))).contains("an Identity of 300 bytes"));
        assertTrue(rejection("ROUTER", concat(handshake("DEALER"), ready("DEALER", null))).contains("a second READY"));
        assertTrue(rejection("ROUTER", concat(handshake("DEALER"), bytes(Zmtp.commandFrame(new byte[] {4, 'P', 'I',
                'N', 'G'})))).contains("malformed PING"));
        assertTrue(rejection("ROUTER", concat(g, bytes(Zmtp.commandFrame(Zmtp.errorBody("no such service")))))
                .contains("the peer sent ERROR: no such service"));
    }

    @Test
    void rejectsMalformedFrameHeaders() {
        byte[] hs = handshake("DEALER");
        assertTrue(rejection("ROUTER", concat(hs, new byte[] {(byte) 0x80, 1, 0})).contains("reserved flag bits"));
        assertTrue(rejection("ROUTER", concat(hs, new byte[] {0x05, 1, 0})).contains("the MORE flag is set"));
        byte[] more = {Zmtp.FLAG_MORE, 1, 9};
        assertTrue(rejection("ROUTER", concat(hs, more, bytes(Zmtp.commandFrame(Zmtp.pongBody(new byte[0])))))
                .contains("a command frame between the frames of a message"));
    }

    @Test
    void rejectsOversizedFramesOnTheHeader() {
        byte[] hs = handshake("DEALER");
        ByteBuffer h = ByteBuffer.allocate(9);
        Zmtp.putHeader(h, 0, 1025);
        assertTrue(rejection("ROUTER", concat(hs, bytes(h.flip()))).contains("frame of 1025 bytes exceeds the limit of 1024"));
        // a size with the top bit set (negative as a Java long)
        byte[] top = {Zmtp.FLAG_LONG, (byte) 0x80, 0, 0, 0, 0x12, 0x34, 0x56, 0x78};
        assertTrue(rejection("ROUTER", concat(hs, top)).contains("size 0x8000000012345678 has its top bit set"));
        byte[] huge = {Zmtp.FLAG_LONG, 0x40, 0, 0, 0, 0, 0, 0, 0};
        assertTrue(rejection("ROUTER", concat(hs, huge)).contains("exceeds the limit of 1024"));
        ByteBuffer c = ByteBuffer.allocate(9);
        Zmtp.putHeader(c, Zmtp.FLAG_COMMAND, 513);
        assertTrue(rejection("ROUTER", concat(Zmtp.greeting(), bytes(c.flip())))
                .contains("command frame of 513 bytes exceeds the limit of 512"));
    }

    @Test
    void boundsMessagesInFramesAndBytes() {
        byte[] hs = handshake("DEALER");
        byte[] f = new byte[1000];
        String m = rejection("ROUTER", concat(hs, msg(f, f, f)));
        assertTrue(m.contains("message of more than 3000 bytes exceeds the limit of 2048"), m);
        byte[] one = {1};
        assertTrue(rejection("ROUTER", concat(hs, msg(one, one, one, one, one)))
                .contains("message of more than 4 frames"));
        assertEquals(1, accepted("ROUTER", concat(hs, msg(one, one, one, one))));
    }

    @Test
    void encodesShortAndLongFrames() {
        byte[] small = bytes(Zmtp.messageFrames(List.of(new byte[255])));
        assertEquals(0, small[0]);
        assertEquals((byte) 255, small[1]);
        assertEquals(257, small.length);
        byte[] large = bytes(Zmtp.messageFrames(List.of(new byte[] {1}, new byte[256])));
        assertEquals(Zmtp.FLAG_MORE, large[0]);
        assertEquals(Zmtp.FLAG_LONG, large[3]);
        assertEquals(3 + 9 + 256, large.length);
        assertThrows(IllegalArgumentException.class, () -> Zmtp.readyBody("DEALER", new byte[256]));
        byte[] g = Zmtp.greeting();
        assertEquals(64, g.length);
        assertEquals("NULL", new String(g, 12, 4, StandardCharsets.US_ASCII));
        assertEquals(0, g[32]); // as-server
    }
}
