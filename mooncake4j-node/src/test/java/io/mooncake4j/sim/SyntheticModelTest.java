package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 20, unit = TimeUnit.SECONDS)
class SyntheticModelTest {

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private static final ModelPreset TINY = ModelPreset.TINY;

    @AfterEach
    void free() {
        alloc.close();
    }

    private KvCaches caches(int tp, int blocks) {
        return KvCaches.allocate(TINY, tp, blocks, KvCacheLayout.FUSED, alloc::allocate);
    }

    private static byte[] block(KvCaches c, String layer, int b) {
        KvCacheTensor t = c.tensorsByLayer().get(layer).getFirst();
        MemorySegment s = t.storage().hostSegment().orElseThrow();
        return s.asSlice(t.blockAddress(b) - t.storage().address(), t.blockBytes()).toArray(ValueLayout.JAVA_BYTE);
    }

    private static int[] tokens(int n, int salt) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = (i * 31 + salt) % 1000;
        }
        return t;
    }

    @Test
    void shouldWriteTheSameBytesForTheSamePromptWhateverTheBlocks() {
        KvCaches c = caches(1, 8);
        SyntheticModel m = new SyntheticModel(TINY, 1, 0, c);
        long[] h = SyntheticModel.prefixHashes(tokens(32, 1));
        m.forward(h, new int[][] {{2, 5}}, 0, 32);
        m.forward(h, new int[][] {{7, 0}}, 0, 32);
        for (int l = 0; l < TINY.numLayers(); l++) {
            String name = TINY.layerName(l);
            assertArrayEquals(block(c, name, 2), block(c, name, 7));
            assertArrayEquals(block(c, name, 5), block(c, name, 0));
        }
        SyntheticModel.Verification v = m.verify(h, new int[][] {{7, 0}}, 0, 32);
        assertTrue(v.ok(), v.firstMismatch());
        assertEquals(32 * m.bytesPerToken(), v.bytesChecked());
        assertEquals(32L * 4 * 4 * 2 * 64 * 2, v.bytesChecked(), "32 tokens x 4 layers x 4 heads x K,V x 64 x fp16");
    }

    @Test
    void shouldCatchOneFlippedByte() {
        KvCaches c = caches(1, 4);
        SyntheticModel m = new SyntheticModel(TINY, 1, 0, c);
        long[] h = SyntheticModel.prefixHashes(tokens(20, 2));
        int[][] blocks = {{1, 3}};
        m.forward(h, blocks, 0, 20);
        KvCacheTensor t = c.tensorsByLayer().get(TINY.layerName(2)).getFirst();
        MemorySegment s = t.storage().hostSegment().orElseThrow();
        long at = t.blockAddress(3) - t.storage().address() + 777;
        s.set(ValueLayout.JAVA_BYTE, at, (byte) (s.get(ValueLayout.JAVA_BYTE, at) ^ 0x10));
        SyntheticModel.Verification v = m.verify(h, blocks, 0, 20);
        assertFalse(v.ok());
        assertEquals(1, v.badWords());
        assertTrue(v.firstMismatch().contains("layer model.layers.2.self_attn.attn"), v.firstMismatch());
    }

    @Test
    void shouldDependOnPromptContentAndPositionOnly() {
        KvCaches c = caches(1, 8);
        SyntheticModel m = new SyntheticModel(TINY, 1, 0, c);
        int[] a = tokens(48, 3);
        int[] b = a.clone();
        b[40] = 999_999; // differs from position 40 on
        long[] ha = SyntheticModel.prefixHashes(a);
        long[] hb = SyntheticModel.prefixHashes(b);
        m.forward(ha, new int[][] {{0, 1, 2}}, 0, 48);
        assertTrue(m.verify(hb, new int[][] {{0, 1, 2}}, 0, 40).ok(), "shared prefix: same KV");
        SyntheticModel.Verification tail = m.verify(hb, new int[][] {{0, 1, 2}}, 40, 48);
        assertEquals(8L * TINY.numLayers() * TINY.numKvHeads() * (2 * 64 * 2 / 8), tail.badWords(),
                "every word after the first differing token differs");
        assertArrayEquals(SyntheticModel.blockHashes(ha, 48, 16), new long[] {ha[15], ha[31], ha[47]});
        assertEquals(2, SyntheticModel.blockHashes(ha, 47, 16).length, "only full blocks have hashes");
    }

    @Test
    void shouldMakeATp1BlockTheConcatenationOfTheTp2RanksBlocks() {
        // what the connector's heterogeneous-TP plan assumes (head-major blocks)
        KvCaches one = caches(1, 2);
        KvCaches r0 = caches(2, 2);
        KvCaches r1 = caches(2, 2);
        long[] h = SyntheticModel.prefixHashes(tokens(16, 4));
        new SyntheticModel(TINY, 1, 0, one).forward(h, new int[][] {{1}}, 0, 16);
        new SyntheticModel(TINY, 2, 0, r0).forward(h, new int[][] {{0}}, 0, 16);
        new SyntheticModel(TINY, 2, 1, r1).forward(h, new int[][] {{1}}, 0, 16);
        for (int l = 0; l < TINY.numLayers(); l++) {
            String name = TINY.layerName(l);
            byte[] full = block(one, name, 1);
            byte[] a = block(r0, name, 0);
            byte[] b = block(r1, name, 1);
            byte[] cat = new byte[a.length + b.length];
            System.arraycopy(a, 0, cat, 0, a.length);
            System.arraycopy(b, 0, cat, a.length, b.length);
            assertArrayEquals(full, cat, name);
        }
    }

    @Test
    void shouldSampleDeterministicallyFromThePrefix() {
        long[] h = SyntheticModel.prefixHashes(tokens(10, 5));
        assertEquals(SyntheticModel.sample(h[9]), SyntheticModel.sample(SyntheticModel.prefixHashes(tokens(10, 5))[9]));
        assertNotEquals(h[8], h[9]);
        assertTrue(SyntheticModel.sample(h[9]) >= 0 && SyntheticModel.sample(h[9]) < (1 << 17));
    }

    @Test
    void shouldRejectCachesOfAnotherShapeOrPositionsWithoutBlocks() {
        KvCaches tp2 = caches(2, 2);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new SyntheticModel(TINY, 1, 0, tp2));
        assertTrue(e.getMessage().contains("dense pages of 16384 bytes"), e.getMessage());
        SyntheticModel m = new SyntheticModel(TINY, 1, 0, caches(1, 2));
        long[] h = SyntheticModel.prefixHashes(tokens(40, 6));
        assertThrows(IllegalArgumentException.class, () -> m.forward(h, new int[][] {{0, 1}}, 0, 40));
        assertThrows(IllegalArgumentException.class, () -> m.forward(h, new int[][] {{0}}, 0, 41));
    }

    @Test
    void shouldBuildWorkloadsWithASharedPrefix() {
        Workload w = new Workload(64, 16, 42);
        int[] a = w.prompt(0);
        int[] b = w.prompt(1);
        for (int i = 0; i < 16; i++) {
            assertEquals(a[i], b[i]);
        }
        assertFalse(java.util.Arrays.equals(a, b));
        assertArrayEquals(a, new Workload(64, 16, 42).prompt(0));
    }

    /** The engine-wide digest: the sum of every rank's part. */
    private long digest(int tp, long[] h, int[][] blocks, int n, java.util.function.IntConsumer corruptRank) {
        long d = 0;
        for (int r = 0; r < tp; r++) {
            KvCaches c = caches(tp, 4);
            SyntheticModel m = new SyntheticModel(TINY, tp, r, c);
            long written = m.forwardWithDigest(h, blocks, 0, n);
            if (corruptRank != null) {
                KvCacheTensor t = c.tensorsByLayer().get(TINY.layerName(3)).getFirst();
                MemorySegment s = t.storage().hostSegment().orElseThrow();
                long at = t.blockAddress(blocks[0][1]) - t.storage().address() + 5;
                if (r == 0) {
                    s.set(ValueLayout.JAVA_BYTE, at, (byte) (s.get(ValueLayout.JAVA_BYTE, at) ^ 0x10));
                }
            }
            long part = m.kvDigest(h, blocks, 0, n);
            if (corruptRank == null) {
                assertEquals(written, part, "the digest of the bytes as written is the digest of the bytes read");
            }
            assertEquals(part, m.verify(h, blocks, 0, n).digest(), "verify computes the same digest in its pass");
            d += part;
        }
        return d;
    }

    @Test
    void kvDigestIsTheSameAtEveryTpSizeAndChangesWithOneByte() {
        long[] h = SyntheticModel.prefixHashes(tokens(30, 9));
        int[][] blocks = {{2, 0}};
        long tp1 = digest(1, h, blocks, 30, null);
        assertEquals(tp1, digest(2, h, blocks, 30, null));
        assertEquals(tp1, digest(4, h, blocks, 30, null));
        assertEquals(tp1, digest(8, h, blocks, 30, null), "replicated heads (TP 8 over 4 heads) count once");
        assertEquals(tp1, digest(1, h, new int[][] {{3, 1}}, 30, null), "block ids do not matter, the bytes do");
        assertNotEquals(tp1, digest(2, h, blocks, 30, r -> { }), "one flipped bit changes the digest");
        assertNotEquals(tp1, digest(1, SyntheticModel.prefixHashes(tokens(30, 10)), blocks, 30, null));
        assertNotEquals(SyntheticModel.sample(h[29], tp1), SyntheticModel.sample(h[29], tp1 + 1));
        assertEquals(SyntheticModel.sample(h[29]), SyntheticModel.sample(h[29], 0));
    }
}
