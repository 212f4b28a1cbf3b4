package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class JlamaKernelsTest {

    @Test
    void aBf16ModelIsRefusedOnlyOnTheNativeKernels() {
        String r = JlamaKernels.refusal("BF16", "Native SIMD Operations");
        assertTrue(r != null && r.contains("-Djlama.force_panama_tensor_operations=true"), r);
        assertNull(JlamaKernels.refusal("BF16", "Panama Vector Operations"));
        assertNull(JlamaKernels.refusal("F32", "Native SIMD Operations"));
        assertNull(JlamaKernels.refusal("F32", "Panama Vector Operations"));
    }

    @Test
    void theTestJvmRunsTheVectorApiKernels() {
        // surefire forces them (the tests load BF16 and F32 models in one JVM): a BF16 model is accepted
        assertEquals("Panama Vector Operations", JlamaKernels.prepare("BF16"));
        assertEquals("Panama Vector Operations", JlamaKernels.prepare("F32"));
    }
}
