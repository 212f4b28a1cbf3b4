package io.mooncake4j.store.connector;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * vLLM's chained prefix-cache block hash ({@code hash_block_tokens} in
 * {@code vllm/v1/core/kv_cache_utils.py}): block {@code i}'s hash is
 * {@code H((hash of block i-1, tuple(its token ids), extra_keys))}, the first block's parent being
 * {@code NONE_HASH = H(seed)}, where the seed is {@code PYTHONHASHSEED} when set and
 * {@code "vllm-none-hash"} otherwise. {@code H} is {@code --prefix-caching-hash-algo}: {@code sha256}
 * (vLLM's default, SHA-256 of the pickle) or {@code sha256_cbor} (SHA-256 of canonical CBOR), see
 * {@link HashInput}. Every node sharing a pool must use the same algorithm and seed.
 *
 * <p>The {@code xxhash} algorithms are refused: vLLM seeds them randomly per process unless
 * {@code PYTHONHASHSEED} is set, and they need a library this module does not carry.
 *
 * <p>Immutable and thread-safe.
 */
public final class BlockHasher {

    /** vLLM's {@code DEFAULT_NONE_HASH_SEED}, the seed when {@code PYTHONHASHSEED} is not set. */
    public static final String DEFAULT_SEED = "vllm-none-hash";

    /** {@code --prefix-caching-hash-algo} values this port reproduces. */
    public enum Algorithm {
        /** SHA-256 over pickle protocol 5 (vLLM's default). */
        SHA256("sha256"),
        /** SHA-256 over canonical CBOR. */
        SHA256_CBOR("sha256_cbor");

        private final String wireName;

        Algorithm(String wireName) {
            this.wireName = wireName;
        }

        /** {@return vLLM's name of the algorithm} */
        public String wireName() {
            return wireName;
        }

        /**
         * The algorithm vLLM calls {@code name}; a clear error for the ones not reproduced.
         *
         * @param name vLLM's name ({@code sha256}, {@code sha256_cbor})
         * @return the algorithm
         */
        public static Algorithm of(String name) {
            Objects.requireNonNull(name, "name");
            for (Algorithm a : values()) {
                if (a.wireName.equals(name)) {
                    return a;
                }
            }
            if (name.startsWith("xxhash")) {
                throw new IllegalArgumentException("prefix-caching hash algorithm '" + name
                        + "' is not supported by the store connector (its keys are not reproducible across"
                        + " processes without PYTHONHASHSEED); use sha256 or sha256_cbor");
            }
            throw new IllegalArgumentException("unknown prefix-caching hash algorithm '" + name
                    + "' (expected sha256 or sha256_cbor)");
        }
    }

    private final Algorithm algorithm;
    private final String seed;
    private final byte[] noneHash;

    /**
     * A hasher for {@code algorithm} whose {@code NONE_HASH} comes from {@code seed}.
     *
     * @param algorithm the hash algorithm
     * @param seed      the {@code NONE_HASH} seed ({@link #seedFrom} reads it as vLLM does)
     */
    public BlockHasher(Algorithm algorithm, String seed) {
        this.algorithm = Objects.requireNonNull(algorithm, "algorithm");
        this.seed = Objects.requireNonNull(seed, "seed");
        this.noneHash = sha256(algorithm == Algorithm.SHA256 ? HashInput.pickleString(seed) : HashInput.cborString(seed));
    }

    /**
     * The seed vLLM derives {@code NONE_HASH} from: {@code PYTHONHASHSEED} when set, else {@link #DEFAULT_SEED}.
     *
     * @param env the environment
     * @return the seed
     */
    public static String seedFrom(Map<String, String> env) {
        String s = env.get("PYTHONHASHSEED");
        return s != null ? s : DEFAULT_SEED;
    }

    /** {@return the algorithm} */
    public Algorithm algorithm() {
        return algorithm;
    }

    /** {@return the seed} */
    public String seed() {
        return seed;
    }

    /** {@return a copy of {@code NONE_HASH}, the first block's parent} */
    public byte[] noneHash() {
        return noneHash.clone();
    }

    /**
     * The hash of one full block: vLLM's {@code hash_block_tokens(H, parent, tokens[from:to], extra)}.
     *
     * @param parent the previous block's hash, or null (or empty) for the first block
     * @param tokens the request's token ids
     * @param from   the block's first token
     * @param to     one past the block's last token
     * @param extra  the block's extra keys ({@code String}, {@code byte[]}, {@code Integer}), or null for none
     * @return the block's hash (32 bytes)
     */
    public byte[] hashBlock(byte[] parent, int[] tokens, int from, int to, List<Object> extra) {
        Objects.checkFromToIndex(from, to, tokens.length);
        byte[] p = parent == null || parent.length == 0 ? noneHash : parent;
        byte[] input = algorithm == Algorithm.SHA256 ? HashInput.pickleBlock(p, tokens, from, to, extra)
                : HashInput.cborBlock(p, tokens, from, to, extra);
        return sha256(input);
    }

    /**
     * The hashes of the full blocks of {@code tokens} (a partial last block has none), chained from
     * {@code NONE_HASH}, with no extra keys.
     *
     * @param tokens    the token ids
     * @param blockSize tokens per block
     * @return one hash per full block, in order
     */
    public List<byte[]> blockHashes(int[] tokens, int blockSize) {
        return blockHashes(tokens, tokens.length, blockSize, null);
    }

    /**
     * The hashes of the full blocks of {@code tokens[0:length)}; {@code extra} (or null) is every
     * block's extra keys (vLLM adds the cache salt to the first block only: pass null and hash that
     * block with {@link #hashBlock} when a salt is in use).
     *
     * @param tokens    the token ids
     * @param length    how many of them count
     * @param blockSize tokens per block
     * @param extra     every block's extra keys, or null
     * @return one hash per full block, in order
     */
    public List<byte[]> blockHashes(int[] tokens, int length, int blockSize, List<Object> extra) {
        if (blockSize <= 0) {
            throw new IllegalArgumentException("blockSize must be positive, got " + blockSize);
        }
        Objects.checkFromToIndex(0, length, tokens.length);
        List<byte[]> out = new ArrayList<>(length / blockSize);
        byte[] parent = null;
        for (int end = blockSize; end <= length; end += blockSize) {
            parent = hashBlock(parent, tokens, end - blockSize, end, extra);
            out.add(parent);
        }
        return out;
    }

    /**
     * Lower-case hex, as Python's {@code bytes.hex()}.
     *
     * @param b the bytes
     * @return their hex
     */
    public static String hex(byte[] b) {
        return java.util.HexFormat.of().formatHex(b);
    }

    private static byte[] sha256(byte[] input) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(input);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK", e);
        }
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "BlockHasher[%s, seed %s]", algorithm.wireName(),
                seed.equals(DEFAULT_SEED) ? "default" : "PYTHONHASHSEED");
    }
}
