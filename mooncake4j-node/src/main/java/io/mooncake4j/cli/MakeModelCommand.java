package io.mooncake4j.cli;

import io.mooncake4j.model.TinyModelWriter;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;

/**
 * {@code bin/mooncake4j make-model --tiny DIR}: writes a small random-weight Llama checkpoint
 * (safetensors, config, tokenizer with a chat template) for {@code serve --model DIR} and
 * {@code demo --model DIR}, deterministic from {@code --seed}.
 */
final class MakeModelCommand implements CliCommand {

    @Override
    public String name() {
        return "make-model";
    }

    @Override
    public String summary() {
        return "write a tiny random-weight Llama checkpoint (for serve/demo --model DIR)";
    }

    @Override
    public String usage() {
        return """
                usage: bin/mooncake4j make-model --tiny DIR [--seed N] [--layers N] [--hidden N] [--heads N]
                                                 [--kv-heads N] [--intermediate N] [--context N]
                  --tiny DIR        write the tiny model into DIR (created; files of the same name replaced):
                                    hidden 128, 4 query heads over 2 KV heads of 32, MLP 256, context 512
                  --seed N          the weights' seed (default 25): same seed, same bytes
                  --layers N        attention layers (default 2)
                  --hidden N        hidden size (default 128); hidden / heads must be a multiple of 32
                  --heads N         query heads (default 4)
                  --kv-heads N      KV heads (default 2), dividing the query heads
                  --intermediate N  MLP size (default 256)
                  --context N       max_position_embeddings (default 512)
                a larger shape gives measurable compute, e.g. for benchmarks on a few cores:
                  --layers 8 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 2816 --context 2048""";
    }

    @Override
    public Set<String> flagNames() {
        return Set.of("tiny", "seed", "layers", "hidden", "heads", "kv-heads", "intermediate", "context");
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
        try {
            shape = new TinyModelWriter.Shape(flags.positiveInt("hidden", t.hidden()),
                    flags.positiveInt("layers", t.layers()), flags.positiveInt("heads", t.heads()),
                    flags.positiveInt("kv-heads", t.kvHeads()), flags.positiveInt("intermediate", t.intermediate()),
                    flags.positiveInt("context", t.context()), flags.longValue("seed", t.seed()));
        } catch (IllegalArgumentException e) {
            err.println("make-model: " + e.getMessage());
            return 2;
        }
        List<Path> files = TinyModelWriter.write(Path.of(dir), shape);
        for (Path f : files) {
            out.println("wrote " + f);
        }
        out.println("tiny Llama (seed " + shape.seed() + ", " + shape.layers() + " layers, hidden " + shape.hidden()
                + ", " + shape.heads() + " heads over " + shape.kvHeads() + " KV heads) in " + dir
                + ": bin/mooncake4j demo --model " + dir);
        return 0;
    }
}
