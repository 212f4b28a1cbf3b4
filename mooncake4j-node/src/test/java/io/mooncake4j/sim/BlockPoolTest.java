package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class BlockPoolTest {

    @Test
    void shouldHandOutDistinctBlocksUntilExhausted() {
        BlockPool pool = new BlockPool(4);
        int[] a = pool.allocate(3);
        assertEquals(3, Arrays.stream(a).distinct().count());
        assertEquals(1, pool.numFreeBlocks());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> pool.allocate(2));
        assertTrue(e.getMessage().contains("cannot allocate 2 blocks: 1 of 4 free"), e.getMessage());
        assertEquals(1, pool.numFreeBlocks(), "a failed allocation takes nothing");
        pool.free(a);
        assertEquals(4, pool.numFreeBlocks());
        assertEquals(4, pool.allocate(4).length);
        assertEquals(0, pool.numFreeBlocks());
    }

    @Test
    void shouldRejectFreeingMoreOftenThanReferenced() {
        BlockPool pool = new BlockPool(2);
        int[] a = pool.allocate(1);
        pool.free(a);
        assertThrows(IllegalStateException.class, () -> pool.free(a));
        assertThrows(IllegalArgumentException.class, () -> pool.free(new int[] {7}));
    }

    @Test
    void shouldFindCachedPrefixAfterTheOwnerFreedIt() {
        BlockPool pool = new BlockPool(8);
        int[] blocks = pool.allocate(3);
        long[] hashes = {11, 22, 33};
        for (int i = 0; i < 3; i++) {
            pool.cacheBlock(blocks[i], hashes[i]);
        }
        pool.free(blocks);
        assertEquals(8, pool.numFreeBlocks(), "cached blocks without references are free (evictable)");
        assertArrayEquals(blocks, pool.findCachedPrefix(hashes, 3));
        assertArrayEquals(Arrays.copyOf(blocks, 2), pool.findCachedPrefix(hashes, 2), "bounded by maxBlocks");
        assertArrayEquals(Arrays.copyOf(blocks, 1), pool.findCachedPrefix(new long[] {11, 99, 33}, 3),
                "a miss ends the prefix");
        assertEquals(0, pool.findCachedPrefix(new long[] {99, 22}, 2).length);

        int[] hit = pool.findCachedPrefix(hashes, 2);
        pool.touch(hit);
        assertEquals(6, pool.numFreeBlocks(), "touching free cached blocks takes them out of the free queue");
        assertEquals(1, pool.refCount(hit[0]));
        pool.touch(hit);
        assertEquals(2, pool.refCount(hit[0]), "a shared prefix block is referenced by each request");
        assertEquals(6, pool.numFreeBlocks());
    }

    @Test
    void shouldEvictLeastRecentlyFreedCachedBlocksFirst() {
        BlockPool pool = new BlockPool(3);
        int[] a = pool.allocate(3);
        pool.cacheBlock(a[0], 1);
        pool.cacheBlock(a[1], 2);
        pool.cacheBlock(a[2], 3);
        pool.free(new int[] {a[2], a[1], a[0]}); // tail first, as the engine does
        int[] one = pool.allocate(1);
        assertEquals(a[2], one[0], "the first freed block is handed out first");
        assertFalse(pool.isCached(a[2]), "handing out a cached block evicts its hash");
        assertEquals(1, pool.evictions());
        assertArrayEquals(new int[] {a[0], a[1]}, pool.findCachedPrefix(new long[] {1, 2, 3}, 3));
    }

    @Test
    void shouldKeepTheFirstBlockForADuplicateHash() {
        BlockPool pool = new BlockPool(4);
        int[] a = pool.allocate(2);
        pool.cacheBlock(a[0], 5);
        pool.cacheBlock(a[1], 5);
        assertTrue(pool.isCached(a[0]));
        assertFalse(pool.isCached(a[1]));
        assertEquals(1, pool.numCachedBlocks());
    }
}
