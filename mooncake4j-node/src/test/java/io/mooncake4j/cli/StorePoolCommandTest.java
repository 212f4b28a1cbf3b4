package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.store.FakeMaster;
import io.mooncake4j.store.MooncakeStoreClient;
import io.mooncake4j.store.ReplicateConfig;
import io.mooncake4j.store.StoreConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The {@code store} commands against an in-memory master on the real wire ({@link FakeMaster}) and
 * a long-lived client contributing a segment (what {@code store hold} does): one-shot puts leave
 * their values in the pool after they end, a put into an empty pool says what to do, files go in
 * and come out, and the bench touches no key but its own.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StorePoolCommandTest {

    private static MooncakeStoreClient holder(FakeMaster m) {
        return MooncakeStoreClient.setup(StoreConfig.loopback(m.hostPort()).withGlobalSegmentSize(32L << 20)
                .withLocalBufferSize(1L << 20).withTimings(Duration.ofSeconds(5), Duration.ofMillis(200)));
    }

    @Test
    void valuesOfOneShotPutsSurviveThePutsAndFilesRoundTrip(@TempDir Path dir) throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient hold = holder(m)) {
            int n = 4;
            byte[][] values = new byte[n][];
            for (int i = 0; i < n; i++) {
                values[i] = new byte[3_000_000 + i];
                new Random(i).nextBytes(values[i]);
                Path in = dir.resolve("in-" + i);
                Files.write(in, values[i]);
                CliErrorsTest.Result r = CliErrorsTest.run("store", "put", "--master", m.hostPort(), "--key", "v" + i,
                        "--file", in.toString());
                assertEquals(0, r.code(), r.err());
                assertTrue(r.out().contains("put v" + i + ": " + values[i].length + " bytes"), r.out());
            }
            // every put process has gone (its client closed); every value is still held, in the holder's segment
            for (int i = 0; i < n; i++) {
                assertEquals(List.of(hold.getHostname()), m.placement("v" + i));
                Path out = dir.resolve("out-" + i);
                CliErrorsTest.Result r = CliErrorsTest.run("store", "get", "--master", m.hostPort(), "--key", "v" + i,
                        "--out", out.toString());
                assertEquals(0, r.code(), r.err());
                assertArrayEquals(values[i], Files.readAllBytes(out));
            }
            CliErrorsTest.Result miss = CliErrorsTest.run("store", "get", "--master", m.hostPort(), "--key", "absent");
            assertEquals(1, miss.code());
            assertTrue(miss.err().contains("get absent: no such key"), miss.err());
        }
    }

    @Test
    void aPutIntoAPoolWithoutSegmentsFailsAndSaysWhatToDo() throws Exception {
        try (FakeMaster m = new FakeMaster()) {
            CliErrorsTest.Result r = CliErrorsTest.run("store", "put", "--master", m.hostPort(), "--key", "k", "--value",
                    "hello");
            assertEquals(1, r.code(), r.out());
            assertTrue(r.err().contains("no segment in the pool has room") && r.err().contains("store hold")
                    && r.err().contains("--segment-size"), r.err());
            assertTrue(m.keys().isEmpty());
        }
    }

    @Test
    void theBenchRemovesOnlyTheKeysItWrote() throws Exception {
        try (FakeMaster m = new FakeMaster(); MooncakeStoreClient hold = holder(m)) {
            assertEquals(0, hold.put("someone-elses", new byte[1000], ReplicateConfig.defaults()));
            assertEquals(0, hold.put("bench-not-mine", new byte[1000], ReplicateConfig.defaults()));
            CliErrorsTest.Result r = CliErrorsTest.run("store", "bench", "--master", m.hostPort(), "--segment-size", "0",
                    "--value-size", "4K", "--batch", "8", "--duration", "1", "--verify");
            assertEquals(0, r.code(), r.out() + r.err());
            assertTrue(r.out().contains("no other key is touched"), r.out());
            assertTrue(m.calls("BatchPutStart") > 0, "the bench put nothing");
            assertEquals(0, m.calls("RemoveAll"));
            assertEquals(List.of("someone-elses", "bench-not-mine"), m.keys());
        }
    }
}
