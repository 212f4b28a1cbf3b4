package io.mooncake4j.cli;

import io.mooncake4j.model.TinyModelWriter;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * {@code bin/mooncake4j make-model --tiny DIR}: writes a small random-weight checkpoint (safetensors,
 * config, tokenizer with a chat template) for {@code serve --model DIR} and {@code demo --model DIR},
 * deterministic from {@code --seed}, in any of the forms a download comes in ({@code --like}, or
 * {@code --arch}, {@code --dtype}, {@code --shards}, {@code --tied}, {@code --tokenizer}).
 */
final class MakeModelCommand implements CliCommand {

    @Override
    public String name() {
        return "make-model";
    }

    @Override
    public String summary() {
        return "write a tiny random-weight checkpoint (Llama, Qwen2, Mistral; for serve/demo --model DIR)";
    }

    @Override
    public String usage() {
        return """
                usage: bin/mooncake4j make-model --tiny DIR [--seed N] [--layers N] [--hidden N] [--heads N]
                                                 [--kv-heads N] [--intermediate N] [--context N]
                                                 [--like KIND] [--arch A] [--dtype T] [--shards N] [--tied]
                                                 [--tokenizer K]
                  --tiny DIR        write the tiny model into DIR (created; files of the same name replaced):
                                    hidden 128, 4 query heads over 2 KV heads of 32, MLP 256, context 512
                  --seed N          the weights' seed (default 25): same seed, same bytes
                  --layers N        attention layers (default 2)
                  --hidden N        hidden size (default 128); hidden / heads must be a multiple of 32
                  --heads N         query heads (default 4)
                  --kv-heads N      KV heads (default 2), dividing the query heads
                  --intermediate N  MLP size (default 256)
                  --context N       max_position_embeddings (default 512)
                the form of the checkpoint (default: llama, F32, one file, an lm_head, the character tokenizer):
                  --like KIND       llama3 (BF16, 2 shards, tied, byte-level BPE), qwen2 (F16, 2 shards, tied,
                                    biases, byte-level BPE without BOS), mistral (BF16, 3 shards, SentencePiece
                                    byte fallback), llama2 (F16, SentencePiece byte fallback); the flags
                                    below override it
                  --arch A          llama, qwen2 or mistral
                  --dtype T         the weights' dtype: F32, F16 or BF16
                  --shards N        weight files (more than 1: model.safetensors.index.json and its shards)
                  --tied[=BOOL]     tied embeddings (no lm_head.weight)
                  --tokenizer K     char, llama3, qwen2 or sentencepiece
                a larger shape gives measurable compute, e.g. for benchmarks on a few cores:
                  --layers 8 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 2816 --context 2048""";
    }

    @Override
    public Set<String> flagNames() {
        return Set.of("tiny", "seed", "layers", "hidden", "heads", "kv-heads", "intermediate", "context", "like",
                "arch", "dtype", "shards", "tied", "tokenizer");
    }

    @Override
    public int run(Flags flags, PrintStream out, PrintStream err) {
        String dir = flags.string("tiny", null);
        if (dir == null || dir.isBlank()) {
            err.println("make-model: --tiny DIR is required");
            err.println(usage());
            return 2;
        }
        TinyModelWriter.Shape t = TinyModelWriter.Shape.tiny();
        TinyModelWriter.Shape shape;
        TinyModelWriter.Variant variant;
        try {
            variant = variant(flags);
            shape = new TinyModelWriter.Shape(flags.positiveInt("hidden", t.hidden()),
                    flags.positiveInt("layers", t.layers()), flags.positiveInt("heads", t.heads()),
                    flags.positiveInt("kv-heads", t.kvHeads()), flags.positiveInt("intermediate", t.intermediate()),
                    flags.positiveInt("context", t.context()), flags.longValue("seed", t.seed()));
        } catch (IllegalArgumentException e) {
            err.println("make-model: " + e.getMessage());
            return 2;
        }
        List<Path> files = TinyModelWriter.write(Path.of(dir), shape, variant);
        for (Path f : files) {
            out.println("wrote " + f);
        }
        out.println("tiny " + variant.arch().name().toLowerCase(Locale.ROOT) + " (seed " + shape.seed() + ", "
                + shape.layers() + " layers, hidden " + shape.hidden() + ", " + shape.heads() + " heads over "
                + shape.kvHeads() + " KV heads, " + variant.dtype() + " weights in " + variant.shards() + " file"
                + (variant.shards() == 1 ? "" : "s") + (variant.tied() ? ", tied embeddings" : "") + ", "
                + variant.tokenizer().name().toLowerCase(Locale.ROOT) + " tokenizer) in " + dir
                + ": bin/mooncake4j demo --model " + dir);
        return 0;
    }

    private static TinyModelWriter.Variant variant(Flags flags) {
        String like = flags.string("like", null);
        TinyModelWriter.Variant v = like == null ? TinyModelWriter.Variant.defaults()
                : switch (like.toLowerCase(Locale.ROOT)) {
                    case "llama3" -> TinyModelWriter.Variant.llama3();
                    case "qwen2" -> TinyModelWriter.Variant.qwen2();
                    case "mistral" -> TinyModelWriter.Variant.mistral();
                    case "llama2" -> TinyModelWriter.Variant.llama2();
                    default -> throw new IllegalArgumentException("--like must be llama3, qwen2, mistral or llama2, got "
                            + like);
                };
        TinyModelWriter.Arch arch = v.arch();
        if (flags.has("arch")) {
            arch = switch (flags.string("arch", "").toLowerCase(Locale.ROOT)) {
                case "llama" -> TinyModelWriter.Arch.LLAMA;
                case "qwen2" -> TinyModelWriter.Arch.QWEN2;
                case "mistral" -> TinyModelWriter.Arch.MISTRAL;
                default -> throw new IllegalArgumentException("--arch must be llama, qwen2 or mistral, got "
                        + flags.string("arch", ""));
            };
        }
        TinyModelWriter.TokenizerKind tok = v.tokenizer();
        if (flags.has("tokenizer")) {
            tok = switch (flags.string("tokenizer", "").toLowerCase(Locale.ROOT)) {
                case "char" -> TinyModelWriter.TokenizerKind.CHAR;
                case "llama3" -> TinyModelWriter.TokenizerKind.LLAMA3;
                case "qwen2" -> TinyModelWriter.TokenizerKind.QWEN2;
                case "sentencepiece" -> TinyModelWriter.TokenizerKind.SENTENCEPIECE;
                default -> throw new IllegalArgumentException("--tokenizer must be char, llama3, qwen2 or "
                        + "sentencepiece, got " + flags.string("tokenizer", ""));
            };
        }
        return new TinyModelWriter.Variant(arch, flags.string("dtype", v.dtype()).toUpperCase(Locale.ROOT),
                flags.intValue("shards", v.shards()), flags.bool("tied", v.tied()), tok);
    }
}
