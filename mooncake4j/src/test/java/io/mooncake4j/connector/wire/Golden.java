package io.mooncake4j.connector.wire;

import io.mooncake4j.connector.wire.MooncakeXferMetadata.ReqBlocks;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The messages of src/test/resources/golden/wire/generate_golden.py, rebuilt in Java. */
final class Golden {

    static final long BASE = 0x7F3A_0000_0000L;

    private Golden() {
    }

    static byte[] bytes(String name) {
        String path = "/golden/wire/" + name + ".bin";
        try (InputStream in = Golden.class.getResourceAsStream(path)) {
            if (in == null) {
                throw new IllegalStateException("missing test resource " + path);
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static MooncakeXferMetadata metadataMinimal() {
        return MooncakeXferMetadata.of("127.0.0.1", 12345, 1, 0,
                Map.of("d-req-1", new ReqBlocks("xfer-req-1", new long[][] {{100, 101}})),
                new long[] {BASE}, new long[] {16384}, new long[] {16384});
    }

    static MooncakeXferMetadata metadataFull() {
        Map<String, ReqBlocks> req = new LinkedHashMap<>();
        req.put("cmpl-0123456789abcdef0123456789abcdef-0", new ReqBlocks("xfer-" + "t".repeat(300),
                new long[][] {{0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295L, 4294967296L}, {}, {7}}));
        req.put("d-\u00e9\u4e2d-2", new ReqBlocks("xfer-2", new long[][] {{5}, {6}, {7}}));
        return new MooncakeXferMetadata("10.0.0.17", 65535, 4, 3, req,
                new long[] {BASE, BASE + 0x4000_0000L, (1L << 47) + 1, (1L << 62) + 3, Long.MAX_VALUE},
                new long[] {16384, 16384, 3072, 255, 1L << 40},
                new long[] {8192, 16384, 3072, 128, 1L << 33},
                List.of("model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn",
                        "model.layers.31.mlp.experts.linear_attn.conv", "l3", "l4"),
                new int[] {0, 1, 31, 3, 200}, new int[] {0, 0, 1, 2, 2}, 2);
    }

    static MooncakeXferMetadata metadataMany() {
        Map<String, ReqBlocks> req = new LinkedHashMap<>();
        long[] addrs = new long[20];
        long[] blockLens = new long[20];
        long[] kvBlockLens = new long[20];
        int[] layerIdx = new int[20];
        for (int i = 0; i < 20; i++) {
            long[] ids = new long[20];
            for (int j = 0; j < 20; j++) {
                ids[j] = i * 20L + j;
            }
            req.put("r" + i, new ReqBlocks("x" + i, new long[][] {ids}));
            addrs[i] = BASE + i * 0x100000L;
            blockLens[i] = 1 << 17;
            kvBlockLens[i] = 1 << 16;
            layerIdx[i] = i;
        }
        return new MooncakeXferMetadata("fe80::1", 40000, 8, 5, req, addrs, blockLens, kvBlockLens,
                List.of(), layerIdx, new int[0], 1);
    }

    static MooncakeXferMetadata metadataEmptyReqs() {
        return MooncakeXferMetadata.of("h", 1, 1, 0, Map.of(), new long[0], new long[0], new long[0]);
    }

    static MooncakeXferResponse responseFinishOk() {
        return MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, List.of("d-req-1"), List.of(), null);
    }

    static MooncakeXferResponse responseContinue() {
        return MooncakeXferResponse.of(MooncakeXferResponseStatus.CONTINUE, List.of("a", "b", "c"), null, null);
    }

    static MooncakeXferResponse responseFinishErr() {
        return MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, List.of("ok-1"), List.of("bad-1", "bad-2"),
                "Timeout waiting for P side ready.");
    }

    static MooncakeXferResponse responseError() {
        return MooncakeXferResponse.error("Mooncake transfer engine returned -1; P num blocks less than D "
                + "x".repeat(40));
    }

    static MooncakeXferResponse responseFinishEmpty() {
        return MooncakeXferResponse.of(MooncakeXferResponseStatus.FINISH, null, null, null);
    }

    static final List<String> METADATA = List.of("metadata_minimal", "metadata_full", "metadata_many",
            "metadata_empty_reqs");
    static final List<String> RESPONSES = List.of("response_finish_ok", "response_continue", "response_finish_err",
            "response_error", "response_finish_empty");
}
