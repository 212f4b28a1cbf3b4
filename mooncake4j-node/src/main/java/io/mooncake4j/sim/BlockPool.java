package io.mooncake4j.sim;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The block allocator of one KV-cache group with prefix caching, in the manner of vLLM's
 * {@code BlockPool}: every block has a reference count; a block whose count drops to 0 goes to the
 * tail of a free queue but keeps its content hash, so a later request with the same prefix can
 * take it back (a prefix-cache hit) until the block is handed out again (evicted from the head
 * of the queue, least recently freed first).
 *
 * <p>A block gets a hash only once its KV is complete ({@link #cacheBlock}); blocks whose load
 * failed are never cached. Hashes are chained (block {@code i}'s hash covers the tokens of blocks
 * {@code 0..i}), so a hit on block {@code i} implies the whole prefix matches.
 *
 * <p>Not thread-safe: owned by the engine's step-loop thread, like vLLM's scheduler state.
 */
public final class BlockPool {

    private static final long NO_HASH = 0L;
    private static final int NIL = -1;

    private final int numBlocks;
    private final int[] refCount;
    private final long[] hashOf;
    private final Map<Long, Integer> cached = new HashMap<>();
    // the free queue: a doubly linked list over block ids, head = next to hand out
    private final int[] prev;
    private final int[] next;
    private final boolean[] inFreeQueue;
    private int head = NIL;
    private int tail = NIL;
    private int numFree;
    private long evictions;

    /** A pool of {@code numBlocks} free, uncached blocks with ids {@code 0..numBlocks-1}. */
    public BlockPool(int numBlocks) {
        if (numBlocks <= 0) {
            throw new IllegalArgumentException("numBlocks must be positive, got " + numBlocks);
        }
        this.numBlocks = numBlocks;
        this.refCount = new int[numBlocks];
        this.hashOf = new long[numBlocks];
        this.prev = new int[numBlocks];
        this.next = new int[numBlocks];
        this.inFreeQueue = new boolean[numBlocks];
        Arrays.fill(prev, NIL);
        Arrays.fill(next, NIL);
        for (int b = 0; b < numBlocks; b++) {
            append(b);
        }
    }

    /** Total blocks. */
    public int numBlocks() {
        return numBlocks;
    }

    /** Blocks with no reference (uncached or cached-but-evictable): what {@link #allocate} can hand out. */
    public int numFreeBlocks() {
        return numFree;
    }

    /** Blocks evicted from the prefix cache so far (a cached block handed out again). */
    public long evictions() {
        return evictions;
    }

    /** Blocks that currently carry a hash (referenced or not). */
    public int numCachedBlocks() {
        return cached.size();
    }

    /**
     * The longest cached prefix: block ids whose hashes are {@code blockHashes[0..k)}, stopping at
     * the first miss or after {@code maxBlocks}. Takes no reference; call {@link #touch} to keep them.
     */
    public int[] findCachedPrefix(long[] blockHashes, int maxBlocks) {
        int n = Math.min(Math.max(maxBlocks, 0), blockHashes.length);
        int[] hits = new int[n];
        int k = 0;
        while (k < n) {
            Integer b = cached.get(blockHashes[k]);
            if (b == null) {
                break;
            }
            hits[k++] = b;
        }
        return k == n ? hits : Arrays.copyOf(hits, k);
    }

    /** Takes a reference on each block (prefix-cache hits); a block with no reference leaves the free queue. */
    public void touch(int[] blocks) {
        for (int b : blocks) {
            check(b);
            if (refCount[b]++ == 0) {
                unlink(b);
            }
        }
    }

    /**
     * Hands out {@code n} blocks from the head of the free queue, each with one reference; a cached
     * block handed out loses its hash (eviction).
     *
     * @throws IllegalStateException when fewer than {@code n} blocks are free (check {@link #numFreeBlocks()})
     */
    public int[] allocate(int n) {
        if (n < 0 || n > numFree) {
            throw new IllegalStateException(String.format(Locale.ROOT,
                    "cannot allocate %d blocks: %d of %d free", n, numFree, numBlocks));
        }
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            int b = head;
            unlink(b);
            if (hashOf[b] != NO_HASH) {
                cached.remove(hashOf[b], b);
                hashOf[b] = NO_HASH;
                evictions++;
            }
            refCount[b] = 1;
            out[i] = b;
        }
        return out;
    }

    /**
     * Drops one reference of each block, in the given order; blocks reaching 0 join the tail of the
     * free queue (keeping their hash). vLLM frees a request's blocks in reverse order so that its
     * tail blocks are evicted first; callers pass them in the order they want.
     */
    public void free(int[] blocks) {
        for (int b : blocks) {
            check(b);
            if (refCount[b] <= 0) {
                throw new IllegalStateException("block " + b + " freed more often than referenced");
            }
            if (--refCount[b] == 0) {
                append(b);
            }
        }
    }

    /**
     * Records that {@code block} holds the complete KV of the prefix whose chained hash is
     * {@code hash}. If another block already holds that prefix, nothing changes (vLLM keeps the
     * first). Hash 0 is reserved and ignored.
     */
    public void cacheBlock(int block, long hash) {
        check(block);
        if (hash == NO_HASH || hashOf[block] != NO_HASH) {
            return;
        }
        if (cached.putIfAbsent(hash, block) == null) {
            hashOf[block] = hash;
        }
    }

    /** The reference count of a block (for tests and diagnostics). */
    public int refCount(int block) {
        check(block);
        return refCount[block];
    }

    /** Whether the block currently carries a prefix hash. */
    public boolean isCached(int block) {
        check(block);
        return hashOf[block] != NO_HASH;
    }

    private void check(int b) {
        if (b < 0 || b >= numBlocks) {
            throw new IllegalArgumentException("block id " + b + " out of range 0.." + (numBlocks - 1));
        }
    }

    private void append(int b) {
        prev[b] = tail;
        next[b] = NIL;
        if (tail == NIL) {
            head = b;
        } else {
            next[tail] = b;
        }
        tail = b;
        inFreeQueue[b] = true;
        numFree++;
    }

    private void unlink(int b) {
        if (!inFreeQueue[b]) {
            throw new IllegalStateException("block " + b + " is not in the free queue");
        }
        int p = prev[b];
        int n = next[b];
        if (p == NIL) {
            head = n;
        } else {
            next[p] = n;
        }
        if (n == NIL) {
            tail = p;
        } else {
            prev[n] = p;
        }
        prev[b] = NIL;
        next[b] = NIL;
        inFreeQueue[b] = false;
        numFree--;
    }
}
