package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.blocks;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.metadataFor;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.wire.MooncakeXferResponse;
import io.mooncake4j.connector.wire.MooncakeXferResponseStatus;
import io.mooncake4j.connector.worker.send.ListenerStats;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Hostile side-channel input (spec §15 #6 fixed): random bytes, mutated valid messages and
 * wrong frame counts. Every message gets exactly one final answer (FINISH or ERROR), the listener
 * keeps serving, and no producer state is left once the abort timeout has passed.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SideChannelFuzzTest {

    private static final int WINDOW = 500;

    @Test
    void everyMessageIsAnsweredAndTheListenerSurvives() {
        AtomicLong clock = new AtomicLong();
        Random rnd = new Random(20261129L);
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofMillis(500))) {
            PdTestbed.Node p = bed.node(KvRole.KV_PRODUCER, "P", 0, 1, null, b -> b.nanoClock(clock::get));
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            Map<String, MooncakeXferMetadata.ReqBlocks> rb = new LinkedHashMap<>();
            rb.put("d1", blocks("fuzz-1", 1, 2, 3));
            rb.put("d2", blocks("fuzz-2", 4));
            byte[] valid = MooncakeXferMetadataCodec.encode(metadataFor(d, rb));
            int sent = 0;
            int wrongFrames = 0;
            int finishes = 0;
            int errors = 0;
            try (PdTestbed.RawDealer dealer = PdTestbed.RawDealer.to(p)) {
                for (int window = 0; window < 21; window++) {
                    int inWindow = 0;
                    for (int i = 0; i < WINDOW; i++, inWindow++) {
                        int kind = rnd.nextInt(10);
                        if (kind < 4) {
                            byte[] b = new byte[rnd.nextInt(200)];
                            rnd.nextBytes(b);
                            dealer.send(b);
                        } else if (kind < 8) {
                            byte[] b = valid.clone();
                            int flips = 1 + rnd.nextInt(4);
                            for (int f = 0; f < flips; f++) {
                                b[rnd.nextInt(b.length)] = (byte) rnd.nextInt(256);
                            }
                            if (rnd.nextInt(8) == 0) {
                                b = java.util.Arrays.copyOf(b, rnd.nextInt(b.length));
                            }
                            dealer.send(b);
                        } else {
                            List<byte[]> frames = new ArrayList<>();
                            int n = 2 + rnd.nextInt(3);
                            for (int f = 0; f < n; f++) {
                                frames.add(f == 0 && rnd.nextBoolean() ? valid : new byte[rnd.nextInt(16)]);
                            }
                            dealer.sendFrames(frames);
                            wrongFrames++;
                        }
                    }
                    sent += inWindow;
                    for (int got = 0; got < inWindow; ) {
                        MooncakeXferResponse r = dealer.recv();
                        if (r.status() == MooncakeXferResponseStatus.FINISH) {
                            finishes++;
                            got++;
                        } else if (r.status() == MooncakeXferResponseStatus.ERROR) {
                            errors++;
                            got++;
                        }
                    }
                }
            }
            assertTrue(sent >= 10_000);
            assertEquals(sent, finishes + errors, "one final answer per message");
            ListenerStats ls = p.worker.listenerStats();
            assertEquals(sent, ls.messagesReceived());
            assertEquals(sent, ls.answers().sent(), "the listener counted one final answer sent per message");
            assertEquals(0, ls.answers().dropped());
            assertEquals(wrongFrames, ls.malformedMessages());
            assertEquals(0, ls.listenerErrors());
            assertEquals(0, ls.handlerErrors());
            assertEquals(0, p.worker.backgroundErrorCount());
            // no state leaked: every waiting pull ended; placeholders go once the abort timeout passed
            WorkerDiagnostics diag = p.worker.diagnostics();
            assertEquals(0, diag.activeSends());
            clock.addAndGet(TimeUnit.SECONDS.toNanos(2));
            p.poll();
            assertEquals(0, p.worker.diagnostics().pendingTransfers());
            // and the listener still serves a real transfer
            p.fill(7);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 7));
            d.step(pull("dx", "X", "P", p.bootstrapUrl(), 8));
            bed.awaitAll(() -> d.finishedRecving.contains("dx") && p.finishedSending.contains("p1"),
                    Duration.ofSeconds(20), "a transfer after the fuzzing");
            PdTestbed.assertSameTpCopy(p, 7, d, 8);
        }
    }
}
