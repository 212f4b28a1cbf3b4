package io.mooncake4j.memory;

import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * The KV-cache shape of a model: what a layout builder needs to carve KV caches.
 *
 * @param name        preset name as used on the command line
 * @param numLayers   attention layers
 * @param numKvHeads  KV heads (GQA); 1 for MLA
 * @param headSize    head dimension; for MLA the latent width (kv_lora_rank + rope dim)
 * @param dtypeBytes  bytes per element (2 for bf16/fp16)
 * @param blockSize   tokens per block
 * @param mla         whether the model stores one latent vector per token (no separate K and V)
 */
public record ModelPreset(String name, int numLayers, int numKvHeads, int headSize, int dtypeBytes, int blockSize,
                          boolean mla) {

    /** Llama-3-8B: 32 layers, 8 KV heads of 128, bf16, block 16: 64 KiB per layer per block. */
    public static final ModelPreset LLAMA_3_8B = new ModelPreset("llama-3-8b", 32, 8, 128, 2, 16, false);
    /** Llama-3-70B: 80 layers, 8 KV heads of 128, bf16, block 16. */
    public static final ModelPreset LLAMA_3_70B = new ModelPreset("llama-3-70b", 80, 8, 128, 2, 16, false);
    /** DeepSeek-V2-Lite (MLA): 27 layers, latent 512 + rope 64, bf16, block 16. */
    public static final ModelPreset DEEPSEEK_V2_LITE = new ModelPreset("deepseek-v2-lite", 27, 1, 576, 2, 16, true);
    /** A tiny model for tests and quick demos: 4 layers, 4 KV heads of 64, fp16, block 16 (16 KiB pages). */
    public static final ModelPreset TINY = new ModelPreset("tiny", 4, 4, 64, 2, 16, false);

    private static final List<ModelPreset> ALL = List.of(LLAMA_3_8B, LLAMA_3_70B, DEEPSEEK_V2_LITE, TINY);

    /**
     * Checks the dimensions.
     *
     * @throws IllegalArgumentException when a dimension is not positive or an MLA model has more than one KV head
     */
    public ModelPreset {
        Objects.requireNonNull(name, "name");
        if (numLayers <= 0 || numKvHeads <= 0 || headSize <= 0 || dtypeBytes <= 0 || blockSize <= 0) {
            throw new IllegalArgumentException("model dimensions must be positive: " + name);
        }
        if (mla && numKvHeads != 1) {
            throw new IllegalArgumentException("an MLA model has one latent 'head'");
        }
    }

    /** {@return all built-in presets} */
    public static List<ModelPreset> all() {
        return ALL;
    }

    /**
     * {@return the preset with this name (case-insensitive)}
     *
     * @param name a preset name (for example {@code tiny})
     */
    public static ModelPreset byName(String name) {
        for (ModelPreset p : ALL) {
            if (p.name.equalsIgnoreCase(name)) {
                return p;
            }
        }
        throw new IllegalArgumentException(String.format(Locale.ROOT, "unknown model preset '%s'; known: %s",
                name, ALL.stream().map(ModelPreset::name).toList()));
    }

    /**
     * KV heads held by one rank at tensor-parallel size {@code tp}, validated as vLLM does: the heads
     * are split evenly ({@code heads % tp == 0}), or, when TP exceeds the heads, each head is
     * replicated on {@code tp / heads} ranks ({@code tp % heads == 0}); MLA latents are replicated.
     *
     * @param tp the tensor-parallel size
     * @return the KV heads of one rank
     * @throws IllegalArgumentException when {@code tp} is not positive or does not fit the KV heads
     */
    public int kvHeadsPerRank(int tp) {
        if (tp <= 0) {
            throw new IllegalArgumentException("TP size must be positive, got " + tp);
        }
        if (mla) {
            return 1;
        }
        if (tp >= numKvHeads ? tp % numKvHeads != 0 : numKvHeads % tp != 0) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "tensor parallel size %d does not fit the %d KV heads of model %s: the heads must split "
                            + "evenly (%d %% tp == 0) or, above %d, be replicated evenly (tp %% %d == 0)",
                    tp, numKvHeads, name, numKvHeads, numKvHeads, numKvHeads));
        }
        return tp >= numKvHeads ? 1 : numKvHeads / tp;
    }

    /**
     * {@return bytes of K (or V) of one block of one layer on one rank}
     *
     * @param tp the tensor-parallel size
     */
    public long halfPageBytes(int tp) {
        return (long) blockSize * kvHeadsPerRank(tp) * headSize * dtypeBytes;
    }

    /**
     * {@return bytes of one block of one layer on one rank: K and V (or the MLA latent)}
     *
     * @param tp the tensor-parallel size
     */
    public long pageBytes(int tp) {
        return mla ? halfPageBytes(tp) : 2 * halfPageBytes(tp);
    }

    /**
     * {@return vLLM's attention layer name for layer {@code i}}
     *
     * @param i the layer index, from 0
     */
    public String layerName(int i) {
        return "model.layers." + i + ".self_attn.attn";
    }
}
