package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.internal.sys.SharedMemory;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code bench --protocol=shm}: the target in a child JVM, the initiator here, every byte verified. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class BenchShmTest {

    private static final Pattern LISTENING = Pattern.compile("listening on (\\S+)");

    @Test
    void initiatorVerifiesEveryByteInATargetProcessThroughShmAndPrintsTheMemcpyRatio() throws Exception {
        assumeTrue(SharedMemory.available(), () -> "no memfd here: " + SharedMemory.unavailableReason());
        List<String> cmd = new ArrayList<>(NodeJvm.command(List.of()));
        cmd.addAll(List.of("bench", "--mode=target",
                "--protocol=shm", "--local_server_name=127.0.0.1", "--buffer_size=1M", "--threads=2",
                "--batch_size=4", "--block_size=65536", "--duration=60"));
        Process target = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(target.getInputStream(),
                    StandardCharsets.UTF_8));
            String segment = null;
            for (String line; segment == null && (line = out.readLine()) != null; ) {
                Matcher m = LISTENING.matcher(line);
                if (m.find()) {
                    segment = m.group(1);
                }
            }
            assertNotNull(segment, "target printed no 'listening on' line");
            for (String op : new String[] {"read", "write"}) {
                ByteArrayOutputStream o = new ByteArrayOutputStream();
                ByteArrayOutputStream e = new ByteArrayOutputStream();
                int code = Main.run(new String[] {"bench", "--mode=initiator", "--protocol=shm",
                        "--local_server_name=127.0.0.1", "--segment_id=" + segment, "--operation=" + op,
                        "--verify", "--threads=2", "--batch_size=4", "--block_size=65536", "--buffer_size=1M",
                        "--duration=0.6"}, new PrintStream(o, true, StandardCharsets.UTF_8),
                        new PrintStream(e, true, StandardCharsets.UTF_8));
                String text = o.toString(StandardCharsets.UTF_8);
                assertEquals(0, code, e.toString(StandardCharsets.UTF_8));
                assertTrue(text.contains("every byte matched"), text);
                assertTrue(text.matches("(?s).*Memcpy baseline: \\d+ batches.*transfer/memcpy \\d+\\.\\d\\dx.*"), text);
            }
        } finally {
            target.destroy();
            if (!target.waitFor(20, TimeUnit.SECONDS)) {
                target.destroyForcibly().waitFor();
            }
        }
    }
}
