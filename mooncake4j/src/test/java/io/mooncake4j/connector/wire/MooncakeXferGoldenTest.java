package io.mooncake4j.connector.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Java encoding equals the reference bytes made by Python msgpack with msgspec's rules, and decodes back. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MooncakeXferGoldenTest {

    private static final Map<String, Supplier<MooncakeXferMetadata>> METADATA = new LinkedHashMap<>();
    private static final Map<String, Supplier<MooncakeXferResponse>> RESPONSES = new LinkedHashMap<>();

    static {
        METADATA.put("metadata_minimal", Golden::metadataMinimal);
        METADATA.put("metadata_full", Golden::metadataFull);
        METADATA.put("metadata_many", Golden::metadataMany);
        METADATA.put("metadata_empty_reqs", Golden::metadataEmptyReqs);
        RESPONSES.put("response_finish_ok", Golden::responseFinishOk);
        RESPONSES.put("response_continue", Golden::responseContinue);
        RESPONSES.put("response_finish_err", Golden::responseFinishErr);
        RESPONSES.put("response_error", Golden::responseError);
        RESPONSES.put("response_finish_empty", Golden::responseFinishEmpty);
    }

    private static void assertBytes(String name, byte[] actual) {
        byte[] expected = Golden.bytes(name);
        assertEquals(HexFormat.of().formatHex(expected), HexFormat.of().formatHex(actual), name);
    }

    @Test
    void metadataEncodesToTheReferenceBytes() {
        METADATA.forEach((name, m) -> assertBytes(name, MooncakeXferMetadataCodec.encode(m.get())));
    }

    @Test
    void metadataReferenceBytesDecodeToTheSameRecord() {
        METADATA.forEach((name, m) -> assertEquals(m.get(), MooncakeXferMetadataCodec.decode(Golden.bytes(name)), name));
    }

    @Test
    void responsesEncodeToTheReferenceBytes() {
        RESPONSES.forEach((name, r) -> assertBytes(name, MooncakeXferResponseCodec.encode(r.get())));
    }

    @Test
    void responseReferenceBytesDecodeToTheSameRecord() {
        RESPONSES.forEach((name, r) -> assertEquals(r.get(), MooncakeXferResponseCodec.decode(Golden.bytes(name)), name));
    }

    @Test
    void fullMetadataKeepsLargeAddressesAndBlockIdsExactly() {
        MooncakeXferMetadata m = MooncakeXferMetadataCodec.decode(Golden.bytes("metadata_full"));
        assertEquals(Long.MAX_VALUE, m.kvCachesBaseAddr()[4]);
        assertEquals((1L << 47) + 1, m.kvCachesBaseAddr()[2]);
        assertEquals(4294967296L, m.reqBlocks().get("cmpl-0123456789abcdef0123456789abcdef-0").blockIds()[0][9]);
        assertEquals(List.of("cmpl-0123456789abcdef0123456789abcdef-0", "d-\u00e9\u4e2d-2"),
                List.copyOf(m.reqBlocks().keySet()));
        assertEquals(2, m.remotePpSize());
    }

    @Test
    void writerPicksTheSmallestIntegerFormsLikePythonMsgpack() {
        long[] ints = {0, 1, 127, 128, 255, 256, 65535, 65536, (1L << 32) - 1, 1L << 32, Long.MAX_VALUE,
            -1, -32, -33, -128, -129, -32768, -32769, Integer.MIN_VALUE, Integer.MIN_VALUE - 1L, Long.MIN_VALUE};
        MsgpackWriter w = new MsgpackWriter();
        w.writeIntArray(ints);
        assertBytes("ints", w.toByteArray());
        MsgpackReader r = new MsgpackReader(Golden.bytes("ints"));
        int n = r.readArrayHeader();
        long[] back = new long[n];
        for (int i = 0; i < n; i++) {
            back[i] = r.readLong();
        }
        r.expectEnd();
        assertArrayEquals(ints, back);
    }

    @Test
    void writerEncodesUint64AboveSignedRange() {
        MsgpackWriter w = new MsgpackWriter();
        w.writeArrayHeader(2).writeUnsignedInt(Long.MIN_VALUE).writeUnsignedInt(-1L);
        assertBytes("uint64_max", w.toByteArray());
        MsgpackReader r = new MsgpackReader(Golden.bytes("uint64_max"));
        assertEquals(2, r.readArrayHeader());
        assertEquals("9223372036854775808", Long.toUnsignedString(r.readUnsignedLong()));
        assertEquals("18446744073709551615", Long.toUnsignedString(r.readUnsignedLong()));
    }

    @Test
    void writerPicksTheSmallestStringForms() {
        List<String> strs = List.of("", "a".repeat(31), "b".repeat(32), "c".repeat(255), "d".repeat(256),
                "\u00e9\u4e2d\uD83D\uDE00");
        MsgpackWriter w = new MsgpackWriter();
        w.writeArrayHeader(strs.size());
        strs.forEach(w::writeString);
        assertBytes("strs", w.toByteArray());
        assertEquals(strs, new MsgpackReader(Golden.bytes("strs")).readValue());
    }

    @Test
    void writerPicksTheSmallestContainerHeaders() {
        MsgpackWriter w = new MsgpackWriter();
        w.writeArrayHeader(4);
        for (int n : new int[] {15, 16}) {
            w.writeArrayHeader(n);
            for (int i = 0; i < n; i++) {
                w.writeInt(i);
            }
        }
        for (int n : new int[] {15, 16}) {
            w.writeMapHeader(n);
            for (int i = 0; i < n; i++) {
                w.writeString(Integer.toString(i)).writeInt(i);
            }
        }
        assertBytes("containers", w.toByteArray());
    }
}
