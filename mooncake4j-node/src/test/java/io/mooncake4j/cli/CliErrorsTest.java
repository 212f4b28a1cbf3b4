package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.testlog.LogCapture;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/** Usage errors: one line naming the flag and its value, exit 2; runtime failures exit 1; --help the full text. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CliErrorsTest {

    record Result(int code, String out, String err) {
        /** The lines of stderr. */
        java.util.List<String> errLines() {
            return err.lines().toList();
        }
    }

    static Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code;
        try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
             PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            code = Main.run(args, o, e);
        }
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    /** Exit 2 and exactly one line on stderr containing every {@code expected} part. */
    static Result usageError(String[] args, String... expected) {
        Result r = run(args);
        assertEquals(2, r.code(), String.join(" ", args) + ": " + r.err());
        assertEquals(1, r.errLines().size(), "one error line: " + r.err());
        for (String part : expected) {
            assertTrue(r.err().contains(part), String.join(" ", args) + " should name '" + part + "': " + r.err());
        }
        assertFalse(r.err().contains("usage:"), "no usage dump: " + r.err());
        return r;
    }

    @Test
    void anUnknownFlagIsReportedBeforeWhatItsAbsenceCauses() {
        usageError(new String[] {"bench", "--frobnicate"}, "unknown flag --frobnicate");
        usageError(new String[] {"register", "--frobnicate=1"}, "unknown flag --frobnicate");
        usageError(new String[] {"demo", "--frobnicate"}, "unknown flag --frobnicate");
    }

    @Test
    void aBadValueNamesOnlyItsFlag() {
        Result r = usageError(new String[] {"bench", "--threads=-1", "--segment_id=127.0.0.1:1"}, "--threads", "-1");
        for (String other : new String[] {"--batch_size", "--block_size", "--buffer_size"}) {
            assertFalse(r.err().contains(other), r.err());
        }
        usageError(new String[] {"bench", "--block_size=0", "--segment_id=127.0.0.1:1"}, "--block_size", "0");
        usageError(new String[] {"bench", "--threads=x"}, "--threads", "'x'");
        usageError(new String[] {"register", "--num-blocks", "0"}, "--num-blocks", "0");
    }

    @Test
    void tpSizesThatDoNotDivideTheHeadsAreUsageErrorsInBothCommands() {
        usageError(new String[] {"register", "--tp", "3"}, "--tp 3", "does not fit the 8 KV heads");
        usageError(new String[] {"demo", "--p-tp", "3"}, "--p-tp 3", "does not fit the 8 KV heads");
        usageError(new String[] {"demo", "--d-tp=3"}, "--d-tp 3");
    }

    @Test
    void theDemoListsOnlyTheModelsItRuns() {
        Result r = usageError(new String[] {"demo", "--model", "x"}, "--model x", "llama-3-8b", "tiny");
        assertFalse(r.err().contains("deepseek"), "the demo rejects MLA models, so it does not offer them: " + r.err());
        usageError(new String[] {"demo", "--model", "deepseek-v2-lite"}, "--model deepseek-v2-lite", "MLA");
    }

    @Test
    void demoAndRegisterBothTakeEngineAndTheDemoStillTakesProtocol() {
        usageError(new String[] {"demo", "--engine", "rdma"}, "--engine", "'rdma'");
        usageError(new String[] {"demo", "--protocol", "bogus"}, "--engine", "'bogus'");
        usageError(new String[] {"demo", "--engine", "tcp", "--protocol", "mock"}, "disagree");
        assertEquals("mock", DemoCommand.parse(Flags.parse(java.util.List.of("--protocol", "mock"))).protocol());
        assertEquals("mock", DemoCommand.parse(Flags.parse(java.util.List.of("--engine=mock"))).protocol());
        usageError(new String[] {"register", "--engine", "bogus"}, "--engine", "'bogus'");
        usageError(new String[] {"register", "--engine", "tcp", "--protocol", "rdma"}, "--protocol rdma",
                "--engine tcp");
    }

    @Test
    void anEngineThatCannotStartIsARuntimeFailureWithACliMessage() {
        Result r;
        try (LogCapture logs = LogCapture.start("io.mooncake4j.engine")) {
            r = run("register", "--engine", "rdma");
            if (r.code() == 0) {
                return; // this host has a working RDMA device: nothing to report
            }
            logs.assertLogged(Level.ERROR, "initialize(protocol \"rdma\")"); // the engine's own log line
        }
        assertEquals(1, r.code(), r.err());
        String line = r.errLines().stream().filter(l -> l.startsWith("mooncake4j register:")).findFirst()
                .orElseThrow(() -> new AssertionError(r.err()));
        assertTrue(line.contains("--engine rdma did not start"), line);
        assertTrue(line.contains("try --engine tcp"), line);
        assertFalse(line.contains("TransferEngines.create"), "CLI advice, not API advice: " + line);
    }

    @Test
    void positionalArgumentsAndUnknownCommandsAreRejected() {
        usageError(new String[] {"register", "extra"}, "unexpected argument 'extra'");
        usageError(new String[] {"bench", "--mode=target", "stray"}, "unexpected argument 'stray'");
        usageError(new String[] {"demo", "--", "x"}, "unexpected argument 'x'");
        Result r = run("frobnicate");
        assertEquals(2, r.code());
        assertEquals(1, r.errLines().size(), r.err());
        assertTrue(r.err().contains("unknown command 'frobnicate'") && r.err().contains("bench"), r.err());
    }

    @Test
    void helpPrintsTheFullTextAndExitsZero() {
        for (String cmd : new String[] {"bench", "register", "demo"}) {
            Result r = run(cmd, "--help");
            assertEquals(0, r.code());
            assertTrue(r.out().contains("usage: bin/mooncake4j " + cmd), r.out());
        }
    }

    private static final Pattern FLAG = Pattern.compile("--([a-z][a-z0-9_-]*)");

    @Test
    void everyAcceptedFlagIsInTheUsageTextAndBack() {
        for (CliCommand c : Main.commands()) {
            if (c.flagNames().isEmpty()) {
                continue;
            }
            Set<String> inUsage = new TreeSet<>();
            Matcher m = FLAG.matcher(c.usage());
            while (m.find()) {
                inUsage.add(m.group(1).replace('-', '_'));
            }
            inUsage.remove("help");
            Set<String> accepted = new TreeSet<>();
            c.flagNames().forEach(f -> accepted.add(f.replace('-', '_')));
            assertEquals(accepted, inUsage, c.name() + ": flags accepted vs flags in the usage text");
        }
    }
}
