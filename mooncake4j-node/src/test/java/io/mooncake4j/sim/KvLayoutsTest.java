package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class KvLayoutsTest {

    private static final String P = "llama/L2/H4/KV2/D32/F32/0123456789abcdef/T01234567/B16";

    @Test
    void namesEachPartThatDiffers() {
        assertEquals("", KvLayouts.differences(P, P));
        assertEquals("dtype F32 vs BF16, block size B16 vs B32",
                KvLayouts.differences(P, P.replace("F32", "BF16").replace("B16", "B32")));
        assertEquals("tokenizer T01234567 vs T89abcdef", KvLayouts.differences(P, P.replace("T01234567", "T89abcdef")));
        assertEquals("format", KvLayouts.differences(P, "llama/L2/H4/KV2/D32/F32/0123456789abcdef"),
                "a peer of an older layout string");
    }

    @Test
    void theBlockSizeIsAppendedToAModelsLayout() {
        assertEquals("m/T1/B16", KvLayouts.withBlockSize("m/T1", 16));
        assertNull(KvLayouts.withBlockSize(null, 16), "the synthetic model has none");
        String msg = KvLayouts.mismatchMessage("r1", P, P.replace("KV2", "KV4"));
        assertTrue(msg.startsWith("request r1: the prefill node's KV layout " + P + " differs from this node's "
                + P.replace("KV2", "KV4") + " (KV heads KV2 vs KV4)"), msg);
    }
}
