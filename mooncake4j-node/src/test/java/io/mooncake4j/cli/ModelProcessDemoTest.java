package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.model.ModelDemo;
import io.mooncake4j.model.TinyModelWriter;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code demo --model DIR --processes}: P, D, kv_both reference and proxy as four JVMs, on the tiny model. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ModelProcessDemoTest {

    @Test
    void theAnswersThroughTheProxyEqualTheSingleNodesWithLayerwisePush(@TempDir Path tmp) throws Exception {
        Path model = tmp.resolve("tiny");
        TinyModelWriter.write(model, TinyModelWriter.Shape.tiny());
        Path logs = tmp.resolve("logs");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = ModelProcessDemo.run(new ModelDemo.Options(model, "F32", 4, 6, "tcp", 7, Duration.ofSeconds(120), true),
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8),
                logs, List.of());
        String o = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, o + err.toString(StandardCharsets.UTF_8));
        assertTrue(o.contains("prefill    pid ") && o.contains("decode     pid ") && o.contains("reference  pid ")
                && o.contains("proxy      pid "), o);
        assertTrue(o.contains("layer-wise push"), o);
        assertTrue(o.contains("4 requests ok, 0 failed"), "D answered every request: " + o);
        assertTrue(o.contains("OK: disaggregated tokens equal single-node tokens (4 requests, 24 tokens)"), o);
        try (Stream<Path> s = Files.list(logs)) {
            assertEquals(List.of(), s.toList(), "the demo left files behind");
        }
    }

    @Test
    void aMissingModelDirectoryIsAUsageError() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = Main.run(new String[] {"demo", "--model", "/nonexistent/mooncake4j-model", "--processes"},
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, rc);
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("does not exist"), err.toString(StandardCharsets.UTF_8));
    }
}
