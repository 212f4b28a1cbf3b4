package io.mooncake4j.connector.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.connector.wire.MooncakeXferMetadata.ReqBlocks;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class MooncakeXferCodecTest {

    /** A metadata map written field by field, so tests can omit, reorder or add keys. */
    private static byte[] metadataMap(int entries, Consumer<MsgpackWriter> body) {
        MsgpackWriter w = new MsgpackWriter();
        w.writeMapHeader(entries);
        body.accept(w);
        return w.toByteArray();
    }

    private static void required(MsgpackWriter w, boolean withKvBlockLens) {
        w.writeString("remote_hostname").writeString("10.1.1.1");
        w.writeString("remote_port").writeInt(17000);
        w.writeString("remote_tp_size").writeInt(2);
        w.writeString("remote_tp_rank").writeInt(1);
        w.writeString("req_blocks").writeMapHeader(1).writeString("d1").writeArrayHeader(2).writeString("x1")
                .writeArrayHeader(1).writeIntArray(new long[] {3, 4});
        w.writeString("kv_caches_base_addr").writeUnsignedIntArray(new long[] {1L << 40});
        w.writeString("block_lens").writeIntArray(new long[] {4096});
        if (withKvBlockLens) {
            w.writeString("kv_block_lens").writeIntArray(new long[] {2048});
        }
    }

    @Test
    void decodeIgnoresUnknownKeysIncludingLaterPrefixReplayFields() {
        byte[] b = metadataMap(11, w -> {
            w.writeString("prefix_replay_checkpoints").writeMapHeader(1).writeString("d1").writeArrayHeader(3)
                    .writeInt(5).writeInt(6).writeString("digest");
            required(w, true);
            w.writeString("prefix_replay_protocol").writeInt(1);
            w.writeString("zz_unknown").writeArrayHeader(2).writeDouble(1.5).writeBinary(new byte[] {1, 2});
        });
        MooncakeXferMetadata m = MooncakeXferMetadataCodec.decode(b);
        assertEquals("10.1.1.1", m.remoteHostname());
        assertEquals(17000, m.remotePort());
        assertArrayEquals(new long[] {2048}, m.kvBlockLens());
        assertEquals(1, m.remotePpSize());
        assertEquals(List.of(), m.registeredLayerNames());
    }

    @Test
    void decodeAcceptsKeysInAnyOrder() {
        byte[] ordered = MooncakeXferMetadataCodec.encode(Golden.metadataMinimal());
        byte[] reversed = metadataMap(8, w -> {
            w.writeString("kv_block_lens").writeIntArray(new long[] {16384});
            w.writeString("block_lens").writeIntArray(new long[] {16384});
            w.writeString("kv_caches_base_addr").writeUnsignedIntArray(new long[] {Golden.BASE});
            w.writeString("req_blocks").writeMapHeader(1).writeString("d-req-1").writeArrayHeader(2)
                    .writeString("xfer-req-1").writeArrayHeader(1).writeIntArray(new long[] {100, 101});
            w.writeString("remote_tp_rank").writeInt(0);
            w.writeString("remote_tp_size").writeInt(1);
            w.writeString("remote_port").writeInt(12345);
            w.writeString("remote_hostname").writeString("127.0.0.1");
        });
        assertEquals(MooncakeXferMetadataCodec.decode(ordered), MooncakeXferMetadataCodec.decode(reversed));
    }

    @Test
    void decodeTreatsMissingKvBlockLensAsBlockLensForOlderPeers() {
        MooncakeXferMetadata m = MooncakeXferMetadataCodec.decode(metadataMap(7, w -> required(w, false)));
        assertArrayEquals(new long[] {4096}, m.kvBlockLens());
    }

    @Test
    void decodeReadsAnOlderFlatBlockListAsOneGroup() {
        byte[] b = metadataMap(8, w -> {
            required(w, true);
        });
        // rewrite req_blocks with a flat list
        byte[] flat = metadataMap(8, w -> {
            w.writeString("remote_hostname").writeString("h");
            w.writeString("remote_port").writeInt(1);
            w.writeString("remote_tp_size").writeInt(1);
            w.writeString("remote_tp_rank").writeInt(0);
            w.writeString("req_blocks").writeMapHeader(1).writeString("d1").writeArrayHeader(2).writeString("x1")
                    .writeIntArray(new long[] {3, 4, 5});
            w.writeString("kv_caches_base_addr").writeUnsignedIntArray(new long[] {8});
            w.writeString("block_lens").writeIntArray(new long[] {16});
            w.writeString("kv_block_lens").writeIntArray(new long[] {16});
        });
        assertEquals(new ReqBlocks("x1", new long[][] {{3, 4}}), MooncakeXferMetadataCodec.decode(b).reqBlocks().get("d1"));
        assertEquals(new ReqBlocks("x1", new long[][] {{3, 4, 5}}),
                MooncakeXferMetadataCodec.decode(flat).reqBlocks().get("d1"));
    }

    @Test
    void missingRequiredKeyIsAProtocolErrorNamingTheField() {
        byte[] b = metadataMap(6, w -> {
            w.writeString("remote_hostname").writeString("h");
            w.writeString("remote_tp_size").writeInt(1);
            w.writeString("remote_tp_rank").writeInt(0);
            w.writeString("req_blocks").writeMapHeader(0);
            w.writeString("kv_caches_base_addr").writeArrayHeader(0);
            w.writeString("block_lens").writeArrayHeader(0);
        });
        ProtocolException e = assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(b));
        assertEquals("Object missing required field `remote_port`", e.getMessage());
        assertTrue(e instanceof ConnectorException);
    }

    @Test
    void missingBlockLensIsRejected() {
        byte[] b = metadataMap(6, w -> {
            w.writeString("remote_hostname").writeString("h");
            w.writeString("remote_port").writeInt(1);
            w.writeString("remote_tp_size").writeInt(1);
            w.writeString("remote_tp_rank").writeInt(0);
            w.writeString("req_blocks").writeMapHeader(0);
            w.writeString("kv_caches_base_addr").writeArrayHeader(0);
        });
        assertEquals("Object missing required field `block_lens`",
                assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(b)).getMessage());
    }

    @Test
    void wrongTypeIsAProtocolErrorWithMsgspecWording() {
        byte[] b = metadataMap(1, w -> w.writeString("remote_port").writeString("17000"));
        assertEquals("Expected `int`, got `str` - at `$.remote_port`",
                assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(b)).getMessage());
        byte[] nilList = metadataMap(1, w -> w.writeString("registered_layer_names").writeNil());
        assertEquals("Expected `array`, got `null` - at `$.registered_layer_names`",
                assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(nilList)).getMessage());
        byte[] boolInt = metadataMap(1, w -> w.writeString("remote_tp_size").writeBoolean(true));
        assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(boolInt));
    }

    @Test
    void reqBlocksTupleMustHaveTwoElements() {
        byte[] b = metadataMap(1, w -> w.writeString("req_blocks").writeMapHeader(1).writeString("d")
                .writeArrayHeader(3).writeString("x").writeArrayHeader(0).writeNil());
        assertTrue(assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(b)).getMessage()
                .startsWith("Expected `array` of length 2, got 3"));
    }

    @Test
    void topLevelMustBeAMapAndFullyConsumed() {
        byte[] arr = new MsgpackWriter().writeArrayHeader(0).toByteArray();
        assertEquals("Expected `object`, got `array` - at `$`",
                assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(arr)).getMessage());
        byte[] good = MooncakeXferMetadataCodec.encode(Golden.metadataMinimal());
        byte[] trailing = java.util.Arrays.copyOf(good, good.length + 1);
        assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(trailing));
        assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(new byte[0]));
    }

    @Test
    void portOutsideIntRangeIsRejected() {
        byte[] b = metadataMap(1, w -> w.writeString("remote_port").writeInt(1L << 33));
        assertThrows(ProtocolException.class, () -> MooncakeXferMetadataCodec.decode(b));
    }

    @Test
    void addressesAboveSignedRangeRoundTripAsUnsigned() {
        MooncakeXferMetadata m = MooncakeXferMetadata.of("h", 1, 1, 0, Map.of(), new long[] {-1L, Long.MIN_VALUE},
                new long[] {1, 2}, new long[] {1, 2});
        assertEquals(m, MooncakeXferMetadataCodec.decode(MooncakeXferMetadataCodec.encode(m)));
    }

    @Test
    void defaultValuedOptionalFieldsAreOmitted() {
        byte[] b = MooncakeXferMetadataCodec.encode(Golden.metadataMinimal());
        @SuppressWarnings("unchecked")
        Map<Object, Object> raw = (Map<Object, Object>) new MsgpackReader(b).readValue();
        assertEquals(List.of("remote_hostname", "remote_port", "remote_tp_size", "remote_tp_rank", "req_blocks",
                "kv_caches_base_addr", "block_lens", "kv_block_lens"), List.copyOf(raw.keySet()));
    }

    @Test
    void responseOmitsNoneButKeepsExplicitEmptyListsLikeMsgspec() {
        MooncakeXferResponse explicit = new MooncakeXferResponse(MooncakeXferResponseStatus.FINISH, List.of(), null,
                null);
        @SuppressWarnings("unchecked")
        Map<Object, Object> raw = (Map<Object, Object>) new MsgpackReader(MooncakeXferResponseCodec.encode(explicit))
                .readValue();
        assertEquals(Map.of("status", 0L, "ok_reqs", List.of()), raw);
        MooncakeXferResponse asP = MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, List.of(), List.of(),
                null);
        assertNull(asP.okReqs());
        assertEquals(List.of(), asP.okReqsOrEmpty());
        assertArrayEquals(Golden.bytes("response_finish_empty"), MooncakeXferResponseCodec.encode(asP));
    }

    @Test
    void responseAcceptsNilOptionalsAndRejectsUnknownStatus() {
        MsgpackWriter w = new MsgpackWriter();
        w.writeMapHeader(5).writeString("err_msg").writeNil().writeString("ok_reqs").writeNil()
                .writeString("status").writeInt(1).writeString("err_reqs").writeNil()
                .writeString("prefix_replay_checkpoints").writeNil();
        assertEquals(new MooncakeXferResponse(MooncakeXferResponseStatus.CONTINUE, null, null, null),
                MooncakeXferResponseCodec.decode(w.toByteArray()));
        byte[] bad = new MsgpackWriter().writeMapHeader(1).writeString("status").writeInt(3).toByteArray();
        assertEquals("Invalid enum value 3 - at `$.status`",
                assertThrows(ProtocolException.class, () -> MooncakeXferResponseCodec.decode(bad)).getMessage());
        byte[] none = new MsgpackWriter().writeMapHeader(1).writeString("err_msg").writeString("x").toByteArray();
        assertEquals("Object missing required field `status`",
                assertThrows(ProtocolException.class, () -> MooncakeXferResponseCodec.decode(none)).getMessage());
    }

    @Test
    void encodingRejectsUnpairedSurrogates() {
        assertThrows(ProtocolException.class, () -> MooncakeXferResponseCodec.encode(
                MooncakeXferResponse.error("bad \uD800 text")));
    }
}
