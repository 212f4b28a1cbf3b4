package io.mooncake4j.fuzz;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A short run of {@link SideChannelFuzzTarget} (the long one is {@code scripts/fuzz.sh}); the
 * system properties {@code fuzz.cases} and {@code fuzz.seed} lengthen or vary it.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class SideChannelFuzzTargetTest {

    @Test
    void theSideChannelServesAVerifiedPullAfterHostileInput() throws Exception {
        try (SideChannelFuzzTarget t = new SideChannelFuzzTarget()) {
            assertEquals("side-channel", t.port());
            t.start();
            t.checkStillServing(); // baseline
            Random r = new Random(Long.getLong("fuzz.seed", 9L));
            int cases = Integer.getInteger("fuzz.cases", 200);
            for (int i = 0; i < cases; i++) {
                t.runCase(r);
            }
            t.checkStillServing();
            assertTrue(t.oversizedDrops() > 0, "the cases include oversized frame headers");
        }
    }
}
