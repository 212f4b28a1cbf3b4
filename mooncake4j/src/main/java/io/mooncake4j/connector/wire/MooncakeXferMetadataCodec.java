package io.mooncake4j.connector.wire;

import io.mooncake4j.connector.wire.MooncakeXferMetadata.ReqBlocks;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * msgpack encoding of {@link MooncakeXferMetadata}, byte-compatible with vLLM's
 * {@code msgspec.msgpack.Encoder().encode(MooncakeXferMetadata(...))} and tolerant like
 * {@code msgspec.msgpack.Decoder(MooncakeXferMetadata)}.
 *
 * <h2>Encoding (msgspec rules, {@code omit_defaults=True}, not {@code array_like})</h2>
 * A msgpack map; keys in declaration order:
 * <table>
 * <caption>keys</caption>
 * <tr><th>#</th><th>key</th><th>msgpack value</th><th>written when</th></tr>
 * <tr><td>1</td><td>{@code remote_hostname}</td><td>str</td><td>always</td></tr>
 * <tr><td>2</td><td>{@code remote_port}</td><td>int</td><td>always</td></tr>
 * <tr><td>3</td><td>{@code remote_tp_size}</td><td>int</td><td>always</td></tr>
 * <tr><td>4</td><td>{@code remote_tp_rank}</td><td>int</td><td>always</td></tr>
 * <tr><td>5</td><td>{@code req_blocks}</td><td>map str → [str, [[int…]…]]</td><td>always</td></tr>
 * <tr><td>6</td><td>{@code kv_caches_base_addr}</td><td>[uint…]</td><td>always</td></tr>
 * <tr><td>7</td><td>{@code block_lens}</td><td>[int…]</td><td>always</td></tr>
 * <tr><td>8</td><td>{@code kv_block_lens}</td><td>[int…]</td><td>always</td></tr>
 * <tr><td>9</td><td>{@code registered_layer_names}</td><td>[str…]</td><td>non-empty</td></tr>
 * <tr><td>10</td><td>{@code registered_layer_indices}</td><td>[int…]</td><td>non-empty</td></tr>
 * <tr><td>11</td><td>{@code registered_group_indices}</td><td>[int…]</td><td>non-empty</td></tr>
 * <tr><td>12</td><td>{@code remote_pp_size}</td><td>int</td><td>≠ 1</td></tr>
 * </table>
 * Integers use their smallest form; addresses are unsigned 64-bit.
 *
 * <h2>Decoding</h2>
 * Keys may come in any order; unknown keys (including the later {@code prefix_replay_*} fields)
 * are skipped; the last of duplicated keys wins. Missing required keys, wrong types, a
 * {@code req_blocks} value that is not a 2-element array, {@code nil} where a value is required,
 * or trailing bytes raise {@link ProtocolException} with a msgspec-style message. Also accepted,
 * for older peers ([OLDER] in the spec):
 * <ul>
 *   <li>a flat block list {@code [transfer_id, [b0, b1, …]]} in {@code req_blocks}: one KV group;</li>
 *   <li>a missing {@code kv_block_lens}: taken equal to {@code block_lens}.</li>
 * </ul>
 * A missing {@code block_lens} (the oldest peers sent fields 1–6 only) is rejected.
 *
 * <p>Stateless and thread-safe.
 */
public final class MooncakeXferMetadataCodec {

    static final String REMOTE_HOSTNAME = "remote_hostname";
    static final String REMOTE_PORT = "remote_port";
    static final String REMOTE_TP_SIZE = "remote_tp_size";
    static final String REMOTE_TP_RANK = "remote_tp_rank";
    static final String REQ_BLOCKS = "req_blocks";
    static final String KV_CACHES_BASE_ADDR = "kv_caches_base_addr";
    static final String BLOCK_LENS = "block_lens";
    static final String KV_BLOCK_LENS = "kv_block_lens";
    static final String REGISTERED_LAYER_NAMES = "registered_layer_names";
    static final String REGISTERED_LAYER_INDICES = "registered_layer_indices";
    static final String REGISTERED_GROUP_INDICES = "registered_group_indices";
    static final String REMOTE_PP_SIZE = "remote_pp_size";
    /** mooncake4j's extension key (D's KV layout), after vLLM's fields; msgspec ignores it. */
    static final String KV_LAYOUT = "mooncake4j_kv_layout";

    private MooncakeXferMetadataCodec() {
    }

    /** The msgpack bytes of {@code m}, exactly as msgspec would write them. */
    public static byte[] encode(MooncakeXferMetadata m) {
        int n = 8;
        boolean names = !m.registeredLayerNames().isEmpty();
        boolean indices = m.registeredLayerIndices().length > 0;
        boolean groups = m.registeredGroupIndices().length > 0;
        boolean pp = m.remotePpSize() != MooncakeXferMetadata.DEFAULT_REMOTE_PP_SIZE;
        boolean layout = m.kvLayout() != null;
        n += (names ? 1 : 0) + (indices ? 1 : 0) + (groups ? 1 : 0) + (pp ? 1 : 0) + (layout ? 1 : 0);
        int blocks = 0;
        for (ReqBlocks rb : m.reqBlocks().values()) {
            for (long[] g : rb.blockIds()) {
                blocks += g.length;
            }
        }
        MsgpackWriter w = new MsgpackWriter(256 + 5 * blocks + 9 * m.kvCachesBaseAddr().length * 3);
        w.writeMapHeader(n);
        w.writeString(REMOTE_HOSTNAME).writeString(m.remoteHostname());
        w.writeString(REMOTE_PORT).writeInt(m.remotePort());
        w.writeString(REMOTE_TP_SIZE).writeInt(m.remoteTpSize());
        w.writeString(REMOTE_TP_RANK).writeInt(m.remoteTpRank());
        w.writeString(REQ_BLOCKS).writeMapHeader(m.reqBlocks().size());
        for (Map.Entry<String, ReqBlocks> e : m.reqBlocks().entrySet()) {
            w.writeString(e.getKey());
            w.writeArrayHeader(2);
            w.writeString(e.getValue().transferId());
            long[][] ids = e.getValue().blockIds();
            w.writeArrayHeader(ids.length);
            for (long[] g : ids) {
                w.writeIntArray(g);
            }
        }
        w.writeString(KV_CACHES_BASE_ADDR).writeUnsignedIntArray(m.kvCachesBaseAddr());
        w.writeString(BLOCK_LENS).writeIntArray(m.blockLens());
        w.writeString(KV_BLOCK_LENS).writeIntArray(m.kvBlockLens());
        if (names) {
            w.writeString(REGISTERED_LAYER_NAMES);
            Fields.strArray(w, m.registeredLayerNames());
        }
        if (indices) {
            w.writeString(REGISTERED_LAYER_INDICES);
            writeInts(w, m.registeredLayerIndices());
        }
        if (groups) {
            w.writeString(REGISTERED_GROUP_INDICES);
            writeInts(w, m.registeredGroupIndices());
        }
        if (pp) {
            w.writeString(REMOTE_PP_SIZE).writeInt(m.remotePpSize());
        }
        if (layout) {
            w.writeString(KV_LAYOUT).writeString(m.kvLayout());
        }
        return w.toByteArray();
    }

    private static void writeInts(MsgpackWriter w, int[] v) {
        w.writeArrayHeader(v.length);
        for (int x : v) {
            w.writeInt(x);
        }
    }

    /** Decodes with {@link MsgpackLimits#DEFAULT}. */
    public static MooncakeXferMetadata decode(byte[] bytes) {
        return decode(bytes, MsgpackLimits.DEFAULT);
    }

    /**
     * Decodes one message (the whole of {@code bytes}).
     *
     * @throws ProtocolException on any malformation (see the class comment)
     */
    public static MooncakeXferMetadata decode(byte[] bytes, MsgpackLimits limits) {
        MsgpackReader r = new MsgpackReader(bytes, limits);
        if (!r.hasRemaining()) {
            throw new ProtocolException("Input data was truncated: empty message");
        }
        Fields.expect(r, MsgpackType.MAP, "object", "$");
        int n = r.readMapHeader();
        String hostname = null;
        Integer port = null;
        Integer tpSize = null;
        Integer tpRank = null;
        Map<String, ReqBlocks> reqBlocks = null;
        long[] addrs = null;
        long[] blockLens = null;
        long[] kvBlockLens = null;
        List<String> names = List.of();
        int[] layerIdx = new int[0];
        int[] groupIdx = new int[0];
        int ppSize = MooncakeXferMetadata.DEFAULT_REMOTE_PP_SIZE;
        String kvLayout = null;
        for (int i = 0; i < n; i++) {
            String key = Fields.key(r);
            String path = "$." + key;
            switch (key) {
                case REMOTE_HOSTNAME -> hostname = Fields.str(r, path);
                case REMOTE_PORT -> port = Fields.int32(r, path);
                case REMOTE_TP_SIZE -> tpSize = Fields.int32(r, path);
                case REMOTE_TP_RANK -> tpRank = Fields.int32(r, path);
                case REQ_BLOCKS -> reqBlocks = readReqBlocks(r);
                case KV_CACHES_BASE_ADDR -> addrs = Fields.uint64Array(r, path);
                case BLOCK_LENS -> blockLens = Fields.int64Array(r, path);
                case KV_BLOCK_LENS -> kvBlockLens = Fields.int64Array(r, path);
                case REGISTERED_LAYER_NAMES -> names = Fields.strList(r, path);
                case REGISTERED_LAYER_INDICES -> layerIdx = Fields.int32Array(r, path);
                case REGISTERED_GROUP_INDICES -> groupIdx = Fields.int32Array(r, path);
                case REMOTE_PP_SIZE -> ppSize = Fields.int32(r, path);
                case KV_LAYOUT -> kvLayout = Fields.str(r, path);
                default -> r.skipValue();
            }
        }
        r.expectEnd();
        require(hostname, REMOTE_HOSTNAME);
        require(port, REMOTE_PORT);
        require(tpSize, REMOTE_TP_SIZE);
        require(tpRank, REMOTE_TP_RANK);
        require(reqBlocks, REQ_BLOCKS);
        require(addrs, KV_CACHES_BASE_ADDR);
        require(blockLens, BLOCK_LENS);
        if (kvBlockLens == null) {
            kvBlockLens = blockLens.clone(); // [OLDER] peers without kv_block_lens
        }
        return new MooncakeXferMetadata(hostname, port, tpSize, tpRank, reqBlocks, addrs, blockLens, kvBlockLens,
                names, layerIdx, groupIdx, ppSize, kvLayout);
    }

    private static void require(Object v, String field) {
        if (v == null) {
            throw Fields.missing(field);
        }
    }

    private static Map<String, ReqBlocks> readReqBlocks(MsgpackReader r) {
        Fields.expect(r, MsgpackType.MAP, "object", "$." + REQ_BLOCKS);
        int n = r.readMapHeader();
        Map<String, ReqBlocks> out = LinkedHashMap.newLinkedHashMap(n);
        for (int i = 0; i < n; i++) {
            String reqId = Fields.str(r, "$." + REQ_BLOCKS + "[...]");
            String path = "$." + REQ_BLOCKS + "[...]";
            int len = Fields.arrayHeader(r, path);
            if (len != 2) {
                throw new ProtocolException("Expected `array` of length 2, got " + len + " - at `" + path + "`");
            }
            String transferId = Fields.str(r, path + "[0]");
            out.put(reqId, new ReqBlocks(transferId, readBlockIds(r, path + "[1]")));
        }
        return out;
    }

    /** {@code list[list[int]]}, or an [OLDER] flat {@code list[int]} read as one group. */
    private static long[][] readBlockIds(MsgpackReader r, String path) {
        int groups = Fields.arrayHeader(r, path);
        if (groups > 0 && r.peekType() == MsgpackType.INTEGER) {
            long[] flat = new long[groups];
            for (int i = 0; i < groups; i++) {
                flat[i] = Fields.int64(r, path + "[" + i + "]");
            }
            return new long[][] {flat};
        }
        long[][] ids = new long[groups][];
        for (int g = 0; g < groups; g++) {
            ids[g] = Fields.int64Array(r, path + "[" + g + "]");
        }
        return ids;
    }
}
