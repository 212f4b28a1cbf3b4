package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Captures the golden files from a real master (both {@code MOONCAKE_MASTER} and
 * {@code MOONCAKE_GOLDEN_OUT}, the output folder, must be set; skipped otherwise) and checks the
 * captured replies decode as {@link GoldenFilesTest} expects.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GoldenCaptureTest {

    @Test
    void captureFromTheRealMaster() throws Exception {
        String out = System.getenv("MOONCAKE_GOLDEN_OUT");
        assumeTrue(out != null && !out.isBlank(), "MOONCAKE_GOLDEN_OUT is not set: nothing to capture into");
        try (MasterProcess m = new MasterProcess("--default_kv_lease_ttl=10000")) {
            Map<String, byte[]> replies = GoldenCapture.capture(m, Path.of(out));
            assertEquals(GoldenCapture.requests().size(), replies.size());
            GoldenFilesTest.checkReplies(replies);
        }
    }
}
