package io.mooncake4j.connector.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Hostile input: forged lengths, deep nesting, random and mutated messages fail only with ProtocolException. */
class MsgpackReaderHardeningTest {

    private static final long SEED = 0x6d6f6f6e63616b65L;

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void forgedLengthsFailBeforeAllocating() {
        byte[][] forged = {
            {(byte) 0xdd, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff, 0}, // array32 of 4G
            {(byte) 0xdf, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff, 0, 0}, // map32 of 2G
            {(byte) 0xdb, 0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff, 'a'}, // str32 of 2G
            {(byte) 0xc6, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff}, // bin32 of 4G
            {(byte) 0xc9, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff, 1}, // ext32 of 4G
            {(byte) 0xdc, (byte) 0xff, (byte) 0xff}, // array16, no elements
            {(byte) 0xcf, 1, 2}, // truncated uint64
            {(byte) 0xc1}, // never-used byte
        };
        for (byte[] b : forged) {
            assertThrows(ProtocolException.class, () -> new MsgpackReader(b).readValue(), Arrays.toString(b));
            assertThrows(ProtocolException.class, () -> new MsgpackReader(b).skipValue(), Arrays.toString(b));
        }
    }

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void deepNestingIsRejectedWithoutStackOverflow() {
        byte[] deep = new byte[100_000];
        Arrays.fill(deep, (byte) 0x91); // [[[[...
        ProtocolException e = assertThrows(ProtocolException.class, () -> new MsgpackReader(deep).readValue());
        assertTrue(e.getMessage().contains("nesting deeper than"), e.getMessage());
        MsgpackWriter w = new MsgpackWriter();
        w.writeMapHeader(1).writeString("unknown");
        byte[] head = w.toByteArray();
        byte[] msg = Arrays.copyOf(head, head.length + deep.length);
        System.arraycopy(deep, 0, msg, head.length, deep.length);
        assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(msg));
    }

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void limitsBoundStringAndContainerSizes() {
        MsgpackLimits small = new MsgpackLimits(4, 8, 3);
        byte[] longStr = new MsgpackWriter().writeString("123456789").toByteArray();
        assertThrows(ProtocolException.class, () -> new MsgpackReader(longStr, small).readValue());
        byte[] bigArr = new MsgpackWriter().writeIntArray(new long[] {1, 2, 3, 4}).toByteArray();
        assertThrows(ProtocolException.class, () -> new MsgpackReader(bigArr, small).readValue());
        byte[] ok = new MsgpackWriter().writeIntArray(new long[] {1, 2, 3}).toByteArray();
        assertEquals(List.of(1L, 2L, 3L), new MsgpackReader(ok, small).readValue());
    }

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void invalidUtf8IsRejected() {
        byte[] b = {(byte) 0xa2, (byte) 0xc3, (byte) 0x28};
        assertThrows(ProtocolException.class, () -> new MsgpackReader(b).readString());
    }

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void readerDecodesFloat32AndFloat64() {
        byte[] f32 = {(byte) 0xca, 0x3f, (byte) 0xc0, 0, 0};
        assertEquals(1.5, new MsgpackReader(f32).readDouble());
        byte[] f64 = new MsgpackWriter().writeDouble(-2.25).toByteArray();
        assertEquals(-2.25, new MsgpackReader(f64).readValue());
    }

    private static void decodeAll(byte[] b) {
        for (int which = 0; which < 3; which++) {
            try {
                switch (which) {
                    case 0 -> MooncakeXferMetadataCodec.decode(b);
                    case 1 -> MooncakeXferResponseCodec.decode(b);
                    default -> {
                        MsgpackReader r = new MsgpackReader(b);
                        r.readValue();
                        r.expectEnd();
                    }
                }
            } catch (ProtocolException expected) {
                // the only failure allowed
            } catch (RuntimeException | Error e) {
                fail("decoder " + which + " threw " + e + " for " + java.util.HexFormat.of().formatHex(b), e);
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void randomBytesFailOnlyWithProtocolException() {
        Random rnd = new Random(SEED);
        for (int i = 0; i < 10_000; i++) {
            byte[] b = new byte[rnd.nextInt(64)];
            rnd.nextBytes(b);
            if (b.length > 0 && rnd.nextBoolean()) {
                b[0] = (byte) (0x80 | rnd.nextInt(16)); // start like a map to get past the first check
            }
            decodeAll(b);
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void mutatedValidMessagesFailOnlyWithProtocolException() {
        Random rnd = new Random(SEED + 1);
        List<byte[]> seeds = new java.util.ArrayList<>();
        for (String name : Golden.METADATA) {
            seeds.add(Golden.bytes(name));
        }
        for (String name : Golden.RESPONSES) {
            seeds.add(Golden.bytes(name));
        }
        int decodedOk = 0;
        for (int i = 0; i < 20_000; i++) {
            byte[] b = seeds.get(rnd.nextInt(seeds.size())).clone();
            int mutations = 1 + rnd.nextInt(4);
            for (int m = 0; m < mutations; m++) {
                switch (rnd.nextInt(4)) {
                    case 0 -> b[rnd.nextInt(b.length)] = (byte) rnd.nextInt(256);
                    case 1 -> b[rnd.nextInt(b.length)] ^= (byte) (1 << rnd.nextInt(8));
                    case 2 -> b = Arrays.copyOf(b, rnd.nextInt(b.length) + 1); // truncate
                    default -> {
                        int at = rnd.nextInt(b.length);
                        b[at] = (byte) new int[] {0xdc, 0xdd, 0xde, 0xdf, 0xda, 0xdb, 0xcf, 0xd3, 0xc1}[rnd.nextInt(9)];
                    }
                }
            }
            decodeAll(b);
            try {
                MooncakeXferMetadataCodec.decode(b);
                decodedOk++;
            } catch (ProtocolException expected) {
                // counted below
            }
        }
        assertTrue(decodedOk < 20_000, "mutations must break some messages");
    }
}
