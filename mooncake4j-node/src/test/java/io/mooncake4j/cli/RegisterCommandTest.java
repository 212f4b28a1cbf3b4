package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class RegisterCommandTest {

    private record Result(int code, String out, String err) {}

    private static Result run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code;
        try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
             PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            code = Main.run(args, o, e);
        }
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void printsThePlanAndRegisters() {
        Result r = run("register", "--model", "tiny", "--num-blocks", "8");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("regions (4, in layer order)"), r.out());
        assertTrue(r.out().contains("unique storages (4, registered in one batch)"), r.out());
        assertTrue(r.out().contains("model.layers.3.self_attn.attn"), r.out());
        assertTrue(r.out().contains("memlock (RLIMIT_MEMLOCK soft)"), r.out());
        assertTrue(r.out().contains("side channel tcp://127.0.0.1:"), r.out());
    }

    @Test
    void sharedLayoutShowsOneStorage() {
        Result r = run("register", "--model", "tiny", "--num-blocks", "8", "--layout", "shared");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("unique storages (1, registered in one batch)"), r.out());
    }

    @Test
    void jsonOutputCarriesThePlan() {
        Result r = run("register", "--model", "tiny", "--num-blocks", "2", "--layout", "split-kv", "--json",
                "--role", "kv_consumer");
        assertEquals(0, r.code(), r.err());
        Map<String, Object> root = Json.parseObject(r.out().strip());
        assertEquals(Boolean.TRUE, root.get("registered"));
        assertEquals(0L, root.get("side_channel_port"));
        @SuppressWarnings("unchecked")
        Map<String, Object> plan = (Map<String, Object>) root.get("plan");
        assertEquals(8, ((List<?>) plan.get("regions")).size());
        assertEquals(4, ((List<?>) plan.get("storages")).size());
        assertEquals(4L * 2 * 16 * 1024, plan.get("total_bytes"));
    }

    @Test
    void failRegisterExitsNonZeroWithTheDocumentedMessage() {
        Result r = run("register", "--model", "tiny", "--num-blocks", "4", "--fail-register");
        assertEquals(1, r.code());
        assertTrue(r.err().contains("Mooncake batch memory registration failed."), r.err());
        assertTrue(r.out().contains("unique storages (4"), "the plan is printed before the failure");
    }

    @Test
    void rejectsAnUnknownLayoutAsUsageError() {
        Result r = run("register", "--layout", "diagonal");
        assertEquals(2, r.code());
        assertTrue(r.err().contains("unknown layout 'diagonal'"), r.err());
        assertFalse(r.out().contains("regions"));
    }
}
