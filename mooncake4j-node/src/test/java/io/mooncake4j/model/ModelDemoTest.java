package io.mooncake4j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code demo --model DIR} on the tiny model: the verdict line, and prefixes served from D's cache; the
 * commands of docs/model.md's "Test checkpoints" section, as written (but the directory).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class ModelDemoTest {

    @TempDir
    Path dir;

    @Test
    void printsTheVerdictLine() throws Exception {
        TinyModelWriter.write(dir, TinyModelWriter.Shape.tiny());
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int rc = ModelDemo.run(new ModelDemo.Options(dir, "F32", 4, 6, "tcp", 7, Duration.ofSeconds(60)),
                new PrintStream(buf, true, StandardCharsets.UTF_8));
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, text);
        assertTrue(text.contains("OK: disaggregated tokens equal single-node tokens (4 requests, 24 tokens)"), text);
        assertTrue(text.matches("(?s).*request 1: \\d+ prompt tokens \\([1-9]\\d* from D's prefix cache\\).*"),
                "the second prompt extends the first: " + text);
    }

    @Test
    void theDocumentedQwen2CommandsRunAsWritten() {
        Path m = dir.resolve("tiny-qwen2");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
        assertEquals(0, io.mooncake4j.cli.Main.run(new String[] {"make-model", "--tiny", m.toString(), "--like",
                "qwen2"}, o, e), err.toString(StandardCharsets.UTF_8));
        assertEquals(0, io.mooncake4j.cli.Main.run(new String[] {"demo", "--model", m.toString(), "--requests", "4",
                "--decode-tokens", "8"}, o, e), out.toString(StandardCharsets.UTF_8) + err.toString(StandardCharsets.UTF_8));
        String text = out.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("qwen2/L2/H4/KV2/D32/F32/"), text);
        assertTrue(text.contains("OK: disaggregated tokens equal single-node tokens (4 requests, 32 tokens)"), text);
    }
}
