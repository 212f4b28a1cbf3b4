package io.mooncake4j.store.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Our keys equal those vLLM's own functions computed ({@code src/test/resources/vllm-store/README.md}). */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class VllmKeysGoldenTest {

    private static Map<String, Object> golden;

    @BeforeAll
    static void load() throws IOException {
        try (InputStream in = VllmKeysGoldenTest.class.getResourceAsStream("/vllm-store/keys.json")) {
            assertNotNull(in, "missing vllm-store/keys.json");
            golden = Json.parseObject(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(String name) {
        List<Map<String, Object>> l = (List<Map<String, Object>>) golden.get(name);
        assertTrue(l != null && !l.isEmpty(), name);
        return l;
    }

    private static int i(Object o) {
        return ((Number) o).intValue();
    }

    private static String seed(Object o) {
        return o == null ? BlockHasher.DEFAULT_SEED : (String) o;
    }

    @Test
    void noneHashEqualsVllms() {
        for (Map<String, Object> v : list("none_hash")) {
            BlockHasher h = new BlockHasher(BlockHasher.Algorithm.of((String) v.get("algo")), seed(v.get("pythonhashseed")));
            assertEquals(v.get("none_hash"), BlockHasher.hex(h.noneHash()), v.toString());
        }
    }

    @Test
    void seedComesFromPythonHashSeed() {
        assertEquals("vllm-none-hash", BlockHasher.seedFrom(Map.of()));
        assertEquals("0", BlockHasher.seedFrom(Map.of("PYTHONHASHSEED", "0")));
    }

    @Test
    @SuppressWarnings("unchecked")
    void chainedBlockHashesEqualVllms() {
        int checked = 0;
        for (Map<String, Object> v : list("chains")) {
            BlockHasher h = new BlockHasher(BlockHasher.Algorithm.of((String) v.get("algo")), seed(v.get("pythonhashseed")));
            List<Object> toks = (List<Object>) v.get("tokens");
            int[] tokens = toks.stream().mapToInt(VllmKeysGoldenTest::i).toArray();
            List<Object> extra = null;
            if (v.get("extra_keys") != null) {
                extra = new ArrayList<>();
                List<Object> keys = (List<Object>) v.get("extra_keys");
                List<Object> types = (List<Object>) v.get("extra_key_types");
                for (int k = 0; k < keys.size(); k++) {
                    extra.add(types.get(k).equals("bytes") ? HexFormat.of().parseHex((String) keys.get(k)) : keys.get(k));
                }
            }
            List<byte[]> ours = h.blockHashes(tokens, tokens.length, i(v.get("block_size")), extra);
            List<Object> theirs = (List<Object>) v.get("block_hashes");
            assertEquals(theirs.size(), ours.size(), v.get("algo") + " block size " + v.get("block_size"));
            for (int b = 0; b < ours.size(); b++) {
                assertEquals(theirs.get(b), BlockHasher.hex(ours.get(b)), "block " + b + " of " + v);
                checked++;
            }
        }
        assertTrue(checked >= 40, "checked " + checked);
    }

    @Test
    void pickleBytesEqualPythons() {
        Map<String, Object> v = (Map<String, Object>) golden.get("pickle_example");
        BlockHasher h = new BlockHasher(BlockHasher.Algorithm.SHA256, BlockHasher.DEFAULT_SEED);
        byte[] ours = HashInput.pickleBlock(h.noneHash(), new int[] {1, 300, 70000, Integer.MAX_VALUE}, 0, 4, null);
        assertEquals(v.get("pickle"), BlockHasher.hex(ours));
    }

    @Test
    void keysAndGroupIdsEqualVllms() {
        for (Map<String, Object> v : list("keys")) {
            PoolKeys k = new PoolKeys((String) v.get("cache_prefix"), (String) v.get("model_name"), i(v.get("tp_rank")),
                    i(v.get("pcp_rank")), i(v.get("dcp_rank")), i(v.get("pp_rank")), i(v.get("group_id")));
            assertEquals(v.get("key"), k.key(HexFormat.of().parseHex((String) v.get("hash"))));
        }
        for (Map<String, Object> v : list("group_ids")) {
            PoolKeys k = PoolKeys.of((String) v.get("cache_prefix"), (String) v.get("model_name"));
            assertEquals(v.get("group_id"), k.lifecycleGroup(HexFormat.of().parseHex((String) v.get("hash"))));
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void chunkingAndPutStripingEqualVllms() {
        for (Map<String, Object> v : list("process_tokens")) {
            List<PoolKeys.Chunk> ours = PoolKeys.chunks(i(v.get("token_len")), 4, i(v.get("block_size")),
                    i(v.get("mask_num")), i(v.get("put_step")), i(v.get("put_step_rank")));
            List<List<Object>> theirs = (List<List<Object>>) v.get("out");
            assertEquals(theirs.size(), ours.size(), v.toString());
            List<Object> hashes = (List<Object>) ((List<Map<String, Object>>) golden.get("chains")).get(0).get("block_hashes");
            for (int c = 0; c < ours.size(); c++) {
                assertEquals(i(theirs.get(c).get(0)), ours.get(c).start());
                assertEquals(i(theirs.get(c).get(1)), ours.get(c).end());
                assertEquals(theirs.get(c).get(2), hashes.get(ours.get(c).hashIndex()));
            }
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void replicationAndLookupNamespacesEqualVllms() {
        for (Map<String, Object> v : list("replication")) {
            PoolKeys.GroupKind kind = PoolKeys.GroupKind.valueOf(((String) v.get("kind")).equals("gqa") ? "ATTENTION"
                    : ((String) v.get("kind")).toUpperCase(java.util.Locale.ROOT));
            assertEquals(i(v.get("factor")), PoolKeys.replicationFactor(i(v.get("tp_size")), i(v.get("num_kv_heads")),
                    kind, i(v.get("dcp_size"))), v.toString());
        }
        for (Map<String, Object> v : list("lookup_prefixes")) {
            PoolKeys base = PoolKeys.of((String) v.get("cache_prefix"), (String) v.get("model_name")).withGroup(i(v.get("group_id")));
            List<String> ours = base.lookupNamespaces(i(v.get("tp_size")), i(v.get("pcp_size")), i(v.get("pp_size")),
                    i(v.get("dcp_size")), i(v.get("factor"))).stream().map(PoolKeys::prefix).toList();
            assertEquals(v.get("prefixes"), ours, v.toString());
        }
    }

    @Test
    void modelNameIsTheBasenameAndBadInputIsRefused() {
        assertEquals("Qwen3-0.6B", PoolKeys.modelName("/models/Qwen/Qwen3-0.6B//"));
        assertEquals("tiny", PoolKeys.modelName("tiny"));
        assertThrows(IllegalArgumentException.class, () -> BlockHasher.Algorithm.of("xxhash"));
        assertThrows(IllegalArgumentException.class, () -> BlockHasher.Algorithm.of("md5"));
        BlockHasher h = new BlockHasher(BlockHasher.Algorithm.SHA256, "0");
        assertThrows(IllegalArgumentException.class, () -> h.blockHashes(new int[4], 4, 2, List.of(1.5)));
        assertThrows(IllegalArgumentException.class, () -> h.blockHashes(big(), 20000, 20000, null),
                "a pickle past one frame is refused, not hashed wrongly");
        assertThrows(IllegalArgumentException.class, () -> new PoolKeys("", "", 0, 0, 0, 0, 0));
    }

    private static int[] big() {
        int[] t = new int[20000];
        java.util.Arrays.fill(t, 70000); // 5 pickle bytes each: 100 KB, past CPython's 64 KiB frame
        return t;
    }
}
