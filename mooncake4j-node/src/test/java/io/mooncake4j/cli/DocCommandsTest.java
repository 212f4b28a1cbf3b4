package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.internal.json.Json;

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
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The commands of docs/model.md's "Serving a model" run as written on a machine without RDMA: {@code make-model},
 * then {@code serve --model ... kv_both} as a child JVM, then the {@code curl} body, with only the port (0, the
 * OS's choice) and the model directory (a temporary one) replaced.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class DocCommandsTest {

    private static final Path DOC = Path.of("../docs/model.md");

    /** The lines of the first fenced block after {@code heading}. */
    static List<String> block(String doc, String heading) {
        int h = doc.indexOf("\n" + heading + "\n");
        assertTrue(h >= 0, "no heading " + heading);
        int open = doc.indexOf("```\n", h);
        int close = doc.indexOf("\n```", open + 4);
        return List.of(doc.substring(open + 4, close).split("\n"));
    }

    /** Splits a shell line into words: blanks separate, single quotes keep what they enclose. */
    static List<String> words(String line) {
        List<String> out = new ArrayList<>();
        StringBuilder w = new StringBuilder();
        boolean quoted = false;
        boolean any = false;
        for (char c : line.toCharArray()) {
            if (c == '\'') {
                quoted = !quoted;
                any = true;
            } else if (c == ' ' && !quoted) {
                if (any) {
                    out.add(w.toString());
                    w.setLength(0);
                    any = false;
                }
            } else {
                w.append(c);
                any = true;
            }
        }
        assertTrue(!quoted, "unbalanced quote in " + line);
        if (any) {
            out.add(w.toString());
        }
        return out;
    }

    @Test
    void theServingCommandsOfModelMdRunAsWritten(@TempDir Path tmp) throws Exception {
        List<String> lines = block(Files.readString(DOC, StandardCharsets.UTF_8), "## Serving a model");
        assertEquals(3, lines.size(), lines.toString());
        String dir = tmp.resolve("tiny").toString();
        List<String> make = words(lines.get(0).replace("/tmp/tiny", dir));
        List<String> serve = words(lines.get(1).replace("/tmp/tiny", dir));
        List<String> curl = words(lines.get(2));
        assertEquals("bin/mooncake4j", make.getFirst());
        assertEquals("bin/mooncake4j", serve.getFirst());
        assertEquals(List.of("curl", "-s", "localhost:8000/v1/completions", "-d"), curl.subList(0, 4));
        int port = serve.indexOf("--port");
        assertEquals("8000", serve.get(port + 1));
        serve.set(port + 1, "0"); // the OS's choice: tests never take a fixed port

        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            assertEquals(0, Main.run(make.subList(1, make.size()).toArray(String[]::new), out, out),
                    buf.toString(StandardCharsets.UTF_8));
        }

        List<String> cmd = new ArrayList<>(NodeJvm.command(List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")));
        cmd.addAll(serve.subList(1, serve.size()));
        Path errFile = tmp.resolve("stderr.txt");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(errFile.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        pb.environment().put("VLLM_MOONCAKE_BOOTSTRAP_PORT", "0"); // rank 0's bootstrap server: any free port
        Process p = pb.start();
        try (HttpClient http = HttpClient.newHttpClient();
             BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String url = null;
            StringBuilder seen = new StringBuilder();
            Pattern ready = Pattern.compile("ready on (http://[^ ]+:\\d+)");
            for (String line; url == null && (line = out.readLine()) != null; ) {
                seen.append(line).append('\n');
                Matcher m = ready.matcher(line);
                if (m.find()) {
                    url = m.group(1);
                }
            }
            assertTrue(url != null, "serve did not start; stdout:\n" + seen + "stderr:\n" + Files.readString(errFile));
            String path = curl.get(2).substring("localhost:8000".length());
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:"
                    + URI.create(url).getPort() + path)).timeout(Duration.ofSeconds(60))
                    .POST(HttpRequest.BodyPublishers.ofString(curl.get(4))).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            Map<String, Object> answer = Json.parseObject(r.body());
            assertEquals("text_completion", answer.get("object"), r.body());
            @SuppressWarnings("unchecked")
            Map<String, Object> usage = (Map<String, Object>) answer.get("usage");
            assertEquals(16L, usage.get("completion_tokens"), r.body());
            p.destroy(); // SIGTERM
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "serve did not stop after SIGTERM");
            assertEquals(0, p.exitValue(), Files.readString(errFile));
        } finally {
            p.destroyForcibly();
        }
    }
}
