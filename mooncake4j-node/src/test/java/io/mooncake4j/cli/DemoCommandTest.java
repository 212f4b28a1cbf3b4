package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.sim.DemoRunner;
import io.mooncake4j.sim.LoopbackHub;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DemoCommandTest {

    private static DemoRunner.Options parse(String... args) {
        return DemoCommand.parse(Flags.parse(List.of(args)));
    }

    @Test
    void shouldDefaultTo64LlamaRequestsOf2kTokensOverTcp() {
        DemoRunner.Options o = parse();
        assertEquals(ModelPreset.LLAMA_3_8B, o.model());
        assertEquals(64, o.requests());
        assertEquals(2048, o.promptTokens());
        assertEquals("tcp", o.protocol());
        assertEquals(1, o.pTp());
        assertEquals(1, o.dTp());
        assertEquals(0, o.numBlocks(), "auto: 2 GiB of KV per engine");
    }

    @Test
    void shouldReadEveryFlag() {
        DemoRunner.Options o = parse("--model", "tiny", "--requests", "5", "--prompt-tokens", "300", "--shared-prefix",
                "20", "--decode-tokens", "2", "--p-tp", "2", "--d-tp", "4", "--protocol", "mock", "--num-blocks", "99",
                "--concurrency", "3", "--seed", "7", "--timeout", "30");
        assertEquals(new DemoRunner.Options(ModelPreset.TINY, 5, 300, 20, 2, 2, 4, "mock", 99, 3, 7,
                java.time.Duration.ofSeconds(30)), o);
        assertEquals(300 / 8, parse("--prompt-tokens", "300").sharedPrefixTokens(),
                "the default shared prefix shrinks with short prompts");
    }

    @Test
    void shouldRejectBadFlagsWithUsageErrors() {
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--protocol", "rdma")).getMessage()
                .contains("--engine must be tcp, auto, shm or mock"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--model", "deepseek-v2-lite")).getMessage()
                .contains("MLA"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--model", "nope")).getMessage()
                .contains("unknown model preset"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--p-tp", "3")).getMessage()
                .contains("tensor parallel size 3 does not fit the 8 KV heads"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--model", "tiny", "--d-tp", "6"))
                .getMessage().contains("tensor parallel size 6 does not fit the 4 KV heads of model tiny"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("requests=4")).getMessage()
                .contains("unexpected argument 'requests=4'"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--requests", "0")).getMessage()
                .contains("--requests must be positive"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--bogus", "1")).getMessage()
                .contains("unknown flag --bogus"));
    }

    @Test
    void shouldSampleFromThePromptByDefaultAndFromTheKvWhenAsked() {
        assertEquals(io.mooncake4j.sim.SimEngine.Sampling.PROMPT, parse().sampling());
        assertEquals(io.mooncake4j.sim.SimEngine.Sampling.KV, parse("--sampling", "kv").sampling());
        assertEquals(io.mooncake4j.sim.SimEngine.Sampling.KV, parse("--sampling", "KV").sampling());
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--sampling", "random")).getMessage()
                .contains("--sampling must be prompt or kv, got 'random'"));
        assertEquals(io.mooncake4j.sim.SimEngine.Sampling.KV, DemoCommand.withRequests(parse("--sampling", "kv"), 3)
                .sampling(), "the warm-up runs the same way");
    }

    @Test
    void shouldRejectPromptSamplingWithProcesses() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = Main.run(new String[] {"demo", "--processes", "--sampling", "prompt"}, out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(2, code, text);
        assertTrue(text.contains("always sample from the KV"), text);
    }

    @Test
    void shouldRunInJvmWithTokensSampledFromTheKvEachEngineHolds() {
        // P's first token comes from the digest of the KV it wrote, D's from the KV it received: the run
        // passes only when the two agree for every request (and every byte verifies)
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = new DemoCommand().run(Flags.parse(List.of("--model", "tiny", "--requests", "4", "--prompt-tokens",
                    "70", "--shared-prefix", "16", "--protocol", "mock", "--num-blocks", "24", "--sampling", "kv",
                    "--timeout", "40")), out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, text);
        assertTrue(text.contains("sampling             kv: tokens from the KV each engine holds"), text);
        assertTrue(text.contains("4 ok, 0 failed") && text.contains("OK: every byte verified"), text);
    }

    @Test
    void shouldRejectAPositionalArgumentWithExitCode2() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = Main.run(new String[] {"demo", "requests=4"}, out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(2, code, text);
        assertTrue(text.contains("mooncake4j demo: unexpected argument 'requests=4'"), text);
    }

    @Test
    void shouldMoveKvToADecodeEngineWhoseTpReplicatesTheKvHeads() throws Exception {
        // tiny has 4 KV heads: D at TP 8 holds each head on two ranks, as vLLM allows (tp % heads == 0);
        // the real connector worker must be told the head count to plan the per-head transfers
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = new DemoCommand().run(Flags.parse(List.of("--model", "tiny", "--d-tp", "8", "--requests", "3",
                    "--prompt-tokens", "40", "--protocol", "mock", "--num-blocks", "16", "--timeout", "40")), out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, text);
        assertTrue(text.contains("3 ok, 0 failed"), text);
    }

    @Test
    void engineAutoMovesTheKvOverShmBetweenTheTwoEnginesOfThisJvm() throws Exception {
        // real engines (the core with every transport that runs here) over shareable KV memory:
        // the same-machine shm transport must carry P's writes, and every byte still verifies at D
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (io.mooncake4j.testlog.LogCapture logs = io.mooncake4j.testlog.LogCapture.start("io.mooncake4j");
             PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = new DemoCommand().run(Flags.parse(List.of("--model", "tiny", "--requests", "4",
                    "--prompt-tokens", "64", "--engine", "auto", "--num-blocks", "16", "--timeout", "40")), out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, text);
        assertTrue(text.contains("OK: every byte verified"), text);
        java.util.regex.Matcher moved = java.util.regex.Pattern.compile("KV bytes moved +\\S+ \\S+ \\((\\d+) bytes\\)")
                .matcher(text);
        assertTrue(moved.find(), text);
        assertTrue(Long.parseLong(moved.group(1)) > 0, text);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("KV by transport +shm ([^,]+), tcp 0 B").matcher(text);
        assertTrue(m.find(), "P's writes all went over shm: " + text);
        assertTrue(!m.group(1).equals("0 B"), text);
    }

    @Test
    void shouldPrintTheTableAndExitZeroWhenEverythingVerified() throws Exception {
        LoopbackHub hub = new LoopbackHub();
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = new DemoCommand(protocol -> hub.factory()).run(Flags.parse(List.of("--model", "tiny",
                    "--requests", "6", "--prompt-tokens", "100", "--protocol", "mock", "--num-blocks", "32")), out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, text);
        assertTrue(text.contains("6 ok, 0 failed"), text);
        assertTrue(text.contains("transfer latency"), text);
        assertTrue(text.contains("OK: every byte verified"), text);
    }

    @Test
    void shouldBeListedByHelp() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            assertEquals(0, Main.run(new String[] {"help"}, out, out));
            assertEquals(0, Main.run(new String[] {"demo", "--help"}, out, out));
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertTrue(text.contains("demo "), text);
        assertTrue(text.contains("--d-tp"), text);
    }
}
