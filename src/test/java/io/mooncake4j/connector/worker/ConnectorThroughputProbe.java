package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.addPull;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.ModelPreset;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Connector throughput against the raw engine: P → D over the real side channel, requests of 16
 * Llama-3-8B blocks (2 MiB each over its 32 layers; 64 blocks per round), then the same recorded
 * descriptor lists replayed straight on the same engine ({@code batchTransferSyncWrite} to the
 * same D segment). Engine {@code mock} (in-JVM byte copies) or {@code tcp} (the real TCP engine
 * on loopback). Not a test (no assertions); run:
 *
 * <pre>
 * mvn -B -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/test.classpath -Dmdep.includeScope=test
 * java --enable-native-access=ALL-UNNAMED -cp target/test-classes:target/classes:$(cat target/test.classpath) \
 *     io.mooncake4j.connector.worker.ConnectorThroughputProbe [rounds] [mock|tcp] [blocks] [blocksPerRequest]
 * </pre>
 */
public final class ConnectorThroughputProbe {

    private ConnectorThroughputProbe() {
    }

    /** One recorded {@code batchTransferSyncWrite}. */
    private record Write(String target, long[] src, long[] dst, long[] len) {}

    /** Wraps an engine so that every {@code batchTransferSyncWrite} of the connector is recorded. */
    private static TransferEngine recording(TransferEngine delegate, List<Write> writes) {
        return (TransferEngine) Proxy.newProxyInstance(TransferEngine.class.getClassLoader(),
                new Class<?>[] {TransferEngine.class}, (proxy, method, a) -> {
                    if (method.getName().equals("batchTransferSyncWrite")) {
                        writes.add(new Write((String) a[0], ((long[]) a[1]).clone(), ((long[]) a[2]).clone(),
                                ((long[]) a[3]).clone()));
                    }
                    try {
                        return method.invoke(delegate, a);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        String kind = args.length > 1 ? args[1] : "mock";
        int blocks = args.length > 2 ? Integer.parseInt(args[2]) : 64;
        int perRequest = args.length > 3 ? Integer.parseInt(args[3]) : 16;
        List<Write> writes = Collections.synchronizedList(new ArrayList<>());
        try (PdTestbed bed = new PdTestbed().model(ModelPreset.LLAMA_3_8B, blocks)
                .engines(() -> recording(kind.equals("mock") ? new ScriptedTransferEngine().copyData(true)
                        : TransferEngines.create(kind), writes))
                .abortTimeout(Duration.ofSeconds(60))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            long bytesPerRound = (long) blocks * p.page() * p.model.numLayers();
            int req = 0;
            for (int warm = 0; warm < 2; warm++) {
                req = round(bed, p, d, req, blocks, perRequest);
            }
            int callsBefore = writes.size();
            long t0 = System.nanoTime();
            long[] roundMs = new long[rounds];
            for (int r = 0; r < rounds; r++) {
                long rs = System.nanoTime();
                req = round(bed, p, d, req, blocks, perRequest);
                roundMs[r] = (System.nanoTime() - rs) / 1_000_000;
            }
            System.out.println("round latencies (ms): " + java.util.Arrays.toString(roundMs));
            double connectorS = (System.nanoTime() - t0) / 1e9;
            List<Write> measured = List.copyOf(writes.subList(callsBefore, writes.size()));
            long t1 = System.nanoTime();
            for (Write c : measured) {
                int ret = p.transferEngine.batchTransferSyncWrite(c.target(), c.src(), c.dst(), c.len());
                if (ret != 0) {
                    throw new IllegalStateException("raw replay failed: " + ret);
                }
            }
            double rawS = (System.nanoTime() - t1) / 1e9;
            double mib = rounds * bytesPerRound / (1024.0 * 1024.0);
            System.out.printf(Locale.ROOT, "engine=%s rounds=%d bytes/round=%d MiB requests/round=%d transfer calls=%d%n",
                    kind, rounds, bytesPerRound >> 20, blocks / perRequest, measured.size());
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
