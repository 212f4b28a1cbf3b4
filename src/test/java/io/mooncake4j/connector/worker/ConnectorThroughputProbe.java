package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.addPull;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.engine.testing.EngineCall;
import io.mooncake4j.engine.testing.EngineMethod;
import io.mooncake4j.memory.ModelPreset;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Connector throughput against the raw engine on the in-JVM byte-copying engine: P → D over the
 * real side channel, requests of 16 Llama-3-8B blocks (2 MiB each over its 32 layers; 64 blocks per round), then the
 * same descriptor lists replayed straight on the engine. Not a test (no assertions); run:
 *
 * <pre>
 * mvn -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp target/test-classes:target/classes:$(cat target/test.classpath) \
 *     io.mooncake4j.connector.worker.ConnectorThroughputProbe [rounds]
 * </pre>
 */
public final class ConnectorThroughputProbe {

    private ConnectorThroughputProbe() {
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int blocks = 64;
        int perRequest = 16;
        try (PdTestbed bed = new PdTestbed().model(ModelPreset.LLAMA_3_8B, blocks)
                .abortTimeout(Duration.ofSeconds(60))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            long bytesPerRound = (long) blocks * p.page() * p.model.numLayers();
            int req = 0;
            for (int warm = 0; warm < 2; warm++) {
                req = round(bed, p, d, req, blocks, perRequest);
            }
            int callsBefore = p.engine.callCount(EngineMethod.BATCH_TRANSFER_SYNC_WRITE);
            long t0 = System.nanoTime();
            long[] roundMs = new long[rounds];
            for (int r = 0; r < rounds; r++) {
                long rs = System.nanoTime();
                req = round(bed, p, d, req, blocks, perRequest);
                roundMs[r] = (System.nanoTime() - rs) / 1_000_000;
            }
            System.out.println("round latencies (ms): " + java.util.Arrays.toString(roundMs));
            double connectorS = (System.nanoTime() - t0) / 1e9;
            List<EngineCall> calls = p.engine.calls(EngineMethod.BATCH_TRANSFER_SYNC_WRITE);
            List<EngineCall> measured = calls.subList(callsBefore, calls.size());
            long t1 = System.nanoTime();
            for (EngineCall c : measured) {
                int ret = p.engine.batchTransferSyncWrite(c.string(0), c.longs(1), c.longs(2), c.longs(3));
                if (ret != 0) {
                    throw new IllegalStateException("raw replay failed: " + ret);
                }
            }
            double rawS = (System.nanoTime() - t1) / 1e9;
            double mib = rounds * bytesPerRound / (1024.0 * 1024.0);
            System.out.printf(Locale.ROOT, "rounds=%d bytes/round=%d MiB requests/round=%d transfer calls=%d%n",
                    rounds, bytesPerRound >> 20, blocks / perRequest, measured.size());
            System.out.printf(Locale.ROOT, "connector end-to-end: %.1f MiB/s (%.3f s)%n", mib / connectorS, connectorS);
            System.out.printf(Locale.ROOT, "raw engine replay   : %.1f MiB/s (%.3f s)%n", mib / rawS, rawS);
            System.out.printf(Locale.ROOT, "ratio               : %.1f %%%n", 100 * rawS / connectorS);
            System.out.println("D connections: " + d.worker.diagnostics().dealerConnections() + ", handshake retries: "
                    + d.worker.diagnostics().handshakeRetries() + ", reconnects: "
                    + d.worker.diagnostics().handshakeReconnects());
            System.out.println("stats: " + p.worker.getKvConnectorStats().map(MooncakeKvConnectorStats::reduce));
        }
    }

    /** One round: every block of P to D as requests of {@code perRequest} blocks, all in flight together. */
    private static int round(PdTestbed bed, PdTestbed.Node p, PdTestbed.Node d, int firstReq, int blocks,
            int perRequest) {
        int n = blocks / perRequest;
        MooncakeConnectorMetadata announce = new MooncakeConnectorMetadata();
        MooncakeConnectorMetadata fin = new MooncakeConnectorMetadata();
        MooncakeConnectorMetadata pulls = new MooncakeConnectorMetadata();
        for (int i = 0; i < n; i++) {
            int r = firstReq + i;
            int[] src = new int[perRequest];
            int[] dst = new int[perRequest];
            for (int k = 0; k < perRequest; k++) {
                src[k] = i * perRequest + k;
                dst[k] = blocks - 1 - (i * perRequest + k); // reversed: one descriptor per block and layer
            }
            announce.addNewReq("p" + r, new int[0][], Map.of("transfer_id", "t" + r), false);
            fin.addNewReq("p" + r, new int[][] {src}, Map.of("transfer_id", "t" + r), false);
            addPull(pulls, "d" + r, "t" + r, "P", p.bootstrapUrl(), dst);
        }
        p.step(announce);
        p.step(fin);
        d.step(pulls);
        int last = firstReq + n - 1;
        bed.awaitAll(() -> d.finishedRecving.contains("d" + last) && p.finishedSending.contains("p" + last)
                && d.finishedRecving.size() >= last + 1, Duration.ofSeconds(60), "round");
        return firstReq + n;
    }
}
