package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.memory.ModelPreset;
import io.mooncake4j.serve.ServeOptions;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ServeCommandTest {

    private static ServeOptions parse(Map<String, String> env, String... args) {
        return ServeCommand.parse(Flags.parse(List.of(args)), env);
    }

    @Test
    void shouldFollowVllmServesFlagsAndEnvironment() {
        ServeOptions o = parse(Map.of("VLLM_MOONCAKE_BOOTSTRAP_PORT", "9100", "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT",
                        "12.5", "VLLM_HOST_IP", "10.1.2.3"), "--model", "tiny", "--host", "127.0.0.1", "--port", "0",
                "--tensor-parallel-size", "2", "--kv-transfer-config", "{\"kv_connector\":\"MooncakeConnector\","
                        + "\"kv_role\":\"kv_producer\",\"engine_id\":\"p-1\",\"kv_connector_extra_config\":"
                        + "{\"mooncake_protocol\":\"tcp\",\"num_workers\":3}}", "--num-gpu-blocks", "40",
                "--served-model-name", "my-model", "--max-model-len", "300", "--drain-timeout", "5");
        assertEquals(ModelPreset.TINY, o.model());
        assertEquals("my-model", o.servedModelName());
        assertEquals("127.0.0.1", o.host());
        assertEquals(0, o.port());
        assertEquals(KvRole.KV_PRODUCER, o.connector().kvRole());
        assertEquals("p-1", o.connector().engineId());
        assertEquals(2, o.connector().tpSize());
        assertEquals("tcp", o.connector().protocol());
        assertEquals("tcp", o.transferEngine(), "the transfer engine follows mooncake_protocol");
        assertEquals(3, o.connector().numWorkers());
        assertEquals(9100, o.connector().bootstrapPort());
        assertEquals(Duration.ofMillis(12_500), o.connector().abortRequestTimeout());
        assertEquals("10.1.2.3", o.connector().hostname(), "VLLM_HOST_IP is what peers are told, as vLLM's get_ip");
        assertEquals(40, o.numBlocks());
        assertEquals(300, o.maxModelLen());
        assertEquals(Duration.ofSeconds(5), o.drainTimeout());
    }

    @Test
    void shouldDefaultToAKvBothNodeWithAGeneratedEngineId() {
        ServeOptions o = parse(Map.of(), "--model", "tiny", "--host", "127.0.0.1", "-tp", "4",
                "--kv-cache-memory", "1M");
        assertEquals(KvRole.KV_BOTH, o.connector().kvRole());
        assertEquals(4, UUID.fromString(o.connector().engineId()).version());
        assertEquals("127.0.0.1", o.connector().hostname());
        assertEquals(4, o.connector().tpSize());
        assertEquals(8000, o.port());
        // tiny at TP 4: 4 layers x (16 tokens x 1 head x 64 x 2 bytes x K,V) = 16 KiB per block per rank
        assertEquals(64, o.numBlocks());
        assertEquals(64 * 16, o.maxModelLen());
        assertEquals(8998, o.connector().bootstrapPort());
    }

    @Test
    void shouldTakeTheHttpLimitsFromFlagsAndTheEnvironment() {
        ServeOptions o = parse(Map.of(io.mooncake4j.http.HttpLimits.ENV_BODY_GRACE, "4"), "--model", "tiny",
                "--kv-cache-memory", "1M", "--http-header-timeout", "5", "--http-min-body-rate", "0");
        assertEquals(Duration.ofSeconds(5), o.http().headerTimeout());
        assertEquals(Duration.ofSeconds(4), o.http().bodyGrace());
        assertEquals(0, o.http().minBodyRate());
        assertEquals(io.mooncake4j.http.HttpLimits.defaults().bodySlots(), o.http().bodySlots());
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(Map.of(), "--model", "tiny",
                "--http-idle-timeout", "soon")).getMessage().contains("--http-idle-timeout"));
    }

    @Test
    void shouldRefuseBadFlagsWithUsageErrors() {
        Map<String, String> env = Map.of();
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--model", "tiny", "-tp", "3"))
                .getMessage().contains("tensor parallel size 3 does not fit the 4 KV heads of model tiny"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--model", "tiny", "--kv-transfer-config",
                "{\"kv_role\":\"prefill\"}")).getMessage().startsWith("--kv-transfer-config: "));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--kv-transfer-config", "{nope"))
                .getMessage().contains("not a JSON object"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--model", "tiny", "--max-model-len",
                "999999")).getMessage().contains("--max-model-len must be in 2.."));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--transfer-engine", "smoke"))
                .getMessage().contains("--transfer-engine must be one of"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "tiny")).getMessage()
                .contains("unexpected argument 'tiny'"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--model", "tiny", "--kv-cache-memory",
                "1K")).getMessage().contains("less than one block"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse(env, "--porrt", "1")).getMessage()
                .contains("unknown flag --porrt"));
    }

    @Test
    void shouldPrintUsageAndExit2OnABadFlag() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int code;
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            code = Main.run(new String[] {"serve", "--device", "tpu"}, out, out);
        }
        String text = buf.toString(StandardCharsets.UTF_8);
        assertEquals(2, code, text);
        assertTrue(text.contains("mooncake4j serve: --device must be cpu or cuda"), text);
        assertTrue(text.contains("serve --help lists the flags"), text);
        assertFalse(text.contains("usage: bin/mooncake4j serve"), "one error line, no usage dump: " + text);
    }

    /** {@code serve} as a child JVM: it answers, then SIGTERM drains it and it exits 0. */
    @Test
    void aServeProcessAnswersAndExitsZeroOnSigterm(@TempDir Path dir) throws Exception {
        List<String> cmd = new ArrayList<>(NodeJvm.command(List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")));
        cmd.addAll(List.of("serve", "--model", "tiny", "--host", "127.0.0.1", "--port", "0",
                "--num-gpu-blocks", "16", "--kv-transfer-config",
                "{\"kv_role\":\"kv_both\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}"));
        Path errFile = dir.resolve("stderr.txt");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(errFile.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        pb.environment().put("VLLM_MOONCAKE_BOOTSTRAP_PORT", "0");
        Process p = pb.start();
        try (HttpClient http = HttpClient.newHttpClient();
             BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String url = null;
            StringBuilder seen = new StringBuilder();
            Pattern ready = Pattern.compile("ready on (http://127\\.0\\.0\\.1:\\d+)");
            for (String line; url == null && (line = out.readLine()) != null; ) {
                seen.append(line).append('\n');
                Matcher m = ready.matcher(line);
                if (m.find()) {
                    url = m.group(1);
                }
            }
            assertTrue(url != null, "no ready line; stdout:\n" + seen + "stderr:\n" + Files.readString(errFile));
            assertTrue(seen.toString().contains("mooncake4j serve: kv_both engine "), seen.toString());
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url + "/v1/completions"))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"hello from a child JVM\",\"max_tokens\":3}"))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            assertEquals("text_completion", Json.parseObject(r.body()).get("object"));
            p.destroy(); // SIGTERM
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "serve did not stop after SIGTERM");
            String err = Files.readString(errFile);
            assertEquals(0, p.exitValue(), err);
            assertTrue(err.contains("mooncake4j serve: stopped"), err);
        } finally {
            p.destroyForcibly();
        }
    }
}
