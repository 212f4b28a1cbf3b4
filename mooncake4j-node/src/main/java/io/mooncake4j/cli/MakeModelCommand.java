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
                usage: bin/mooncake4j make-model --tiny DIR [--seed N] [--layers N]
                  --tiny DIR     write the tiny model into DIR (created; files of the same name replaced):
                                 hidden 128, 4 query heads over 2 KV heads of 32, MLP 256, context 512
                  --seed N       the weights' seed (default 25): same seed, same bytes
                  --layers N     attention layers (default 2)""";
    }

    @Override
    public Set<String> flagNames() {
        return Set.of("tiny", "seed", "layers");
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
        TinyModelWriter.Shape shape = new TinyModelWriter.Shape(t.hidden(), flags.positiveInt("layers", t.layers()),
                t.heads(), t.kvHeads(), t.intermediate(), t.context(), flags.longValue("seed", t.seed()));
        List<Path> files = TinyModelWriter.write(Path.of(dir), shape);
        for (Path f : files) {
            out.println("wrote " + f);
        }
        out.println("tiny Llama (seed " + shape.seed() + ", " + shape.layers() + " layers) in " + dir
                + ": bin/mooncake4j demo --model " + dir);
        return 0;
    }
}
