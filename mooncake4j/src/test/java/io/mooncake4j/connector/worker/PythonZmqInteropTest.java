package io.mooncake4j.connector.worker;

import static io.mooncake4j.connector.worker.PdTestbed.announce;
import static io.mooncake4j.connector.worker.PdTestbed.finished;
import static io.mooncake4j.connector.worker.PdTestbed.pull;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.bootstrap.BootstrapClient;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;
import io.mooncake4j.connector.bootstrap.RegisterWorkerPayload;
import io.mooncake4j.internal.json.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A Java node talks to a Python node over the real libzmq (pyzmq), with msgpack built the way
 * vLLM's msgspec writes {@code MooncakeXferMetadata}/{@code MooncakeXferResponse}: a map keyed by
 * field name, defaults omitted. Needs {@code /usr/bin/python3} with the {@code zmq} and
 * {@code msgpack} modules (Debian: python3-zmq, python3-msgpack); skipped otherwise.
 *
 * <p>The Python scripts bound themselves (receive timeouts, then exit), and every process is
 * destroyed at the end of its test.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PythonZmqInteropTest {

    /** {@code -Dmooncake4j.test.python=/nowhere} shows the skip on a host that has pyzmq. */
    private static final String PYTHON = System.getProperty("mooncake4j.test.python", "/usr/bin/python3");
    /** Why the tests cannot run here, or null; probed once by {@link #probePython}. */
    private static String missing;

    /** A vLLM-style D: DEALER, sends the metadata (argv[2], JSON) to port argv[1], prints each decoded reply. */
    private static final String PY_DEALER = """
            import json, sys, zmq, msgpack
            ctx = zmq.Context()
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.RCVTIMEO, 20000)
            s.connect("tcp://127.0.0.1:%d" % int(sys.argv[1]))
            meta = json.loads(sys.argv[2])
            s.send(msgpack.packb(meta, use_bin_type=True))
            while True:
                r = msgpack.unpackb(s.recv(), raw=False)
                print(json.dumps(r), flush=True)
                if r["status"] != 1:
                    break
            s.close()
            ctx.term()
            """;

    /** A vLLM-style P: ROUTER on a random port (printed), answers one pull FINISH with all its requests ok. */
    private static final String PY_ROUTER = """
            import json, sys, zmq, msgpack
            ctx = zmq.Context()
            s = ctx.socket(zmq.ROUTER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.RCVTIMEO, 20000)
            port = s.bind_to_random_port("tcp://127.0.0.1")
            print(port, flush=True)
            identity, payload = s.recv_multipart()
            meta = msgpack.unpackb(payload, raw=False)
            print(json.dumps(meta), flush=True)
            reply = {"status": 0, "ok_reqs": list(meta["req_blocks"].keys())}
            s.send_multipart([identity, msgpack.packb(reply, use_bin_type=True)])
            s.close(linger=1000)
            ctx.term()
            """;

    @BeforeAll
    static void probePython() throws Exception {
        boolean ok = false;
        String why = PYTHON + " is missing";
        if (Files.isExecutable(Path.of(PYTHON))) {
            Process p = new ProcessBuilder(PYTHON, "-c", "import zmq, msgpack").redirectErrorStream(true).start();
            try {
                ok = p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
                why = PYTHON + " cannot import zmq and msgpack (apt-get install python3-zmq python3-msgpack)";
            } finally {
                p.destroyForcibly();
            }
        }
        missing = ok ? null : why;
    }

    /**
     * Each test is reported as skipped with the reason (an assumption failing in {@code @BeforeAll}
     * would abort the class, which surefire reports as "Tests run: 0" without the reason).
     */
    @BeforeEach
    void pythonWithZmqAndMsgpack() {
        Assumptions.assumeTrue(missing == null, missing);
    }

    private static Process python(Path dir, String script, String... args) throws IOException {
        Path file = dir.resolve("node.py");
        Files.writeString(file, script);
        List<String> cmd = new ArrayList<>(List.of(PYTHON, file.toString()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
    }

    /** MooncakeXferMetadata of {@code d} as vLLM's msgspec would encode it, as JSON for the Python side. */
    private static String vllmMetadata(PdTestbed.Node d, String reqId, String transferId, long... blockIds) {
        KvRegistration reg = d.worker.registration();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("remote_hostname", "127.0.0.1");
        m.put("remote_port", d.worker.rpcPort());
        m.put("remote_tp_size", d.tpSize);
        m.put("remote_tp_rank", d.tpRank);
        List<Long> ids = new ArrayList<>();
        for (long b : blockIds) {
            ids.add(b);
        }
        m.put("req_blocks", Map.of(reqId, List.of(transferId, List.of(ids))));
        m.put("kv_caches_base_addr", reg.kvCachesBaseAddr());
        m.put("block_lens", reg.blockLenPerLayer());
        m.put("kv_block_lens", reg.kvBlockLenPerLayer());
        // msgspec omits defaults: the three lists when empty, remote_pp_size when 1
        if (!reg.registeredLayerNames().isEmpty()) {
            m.put("registered_layer_names", reg.registeredLayerNames());
            m.put("registered_layer_indices", reg.registeredLayerIndices());
            m.put("registered_group_indices", reg.registeredGroupIndices());
        }
        return Json.write(m);
    }

    @Test
    void pythonDealerPullsFromOurRouterAndDecodesTheFinish(@TempDir Path dir) throws Exception {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.producer("P", 0, 1, null);
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(2);
            p.step(announce("p1", "X"));
            p.step(finished("p1", "X", 2));
            Process py = python(dir, PY_DEALER, Integer.toString(p.worker.sideChannelPort()),
                    vllmMetadata(d, "d1", "X", 5));
            try (BufferedReader out = new BufferedReader(new InputStreamReader(py.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line = out.readLine(); // the script exits after its 20 s receive timeout at worst
                assertTrue(py.waitFor(30, TimeUnit.SECONDS), "the Python DEALER did not exit");
                assertEquals(0, py.exitValue(), "Python DEALER failed; its reply line: " + line);
                assertEquals(Map.of("status", 0L, "ok_reqs", List.of("d1")), Json.parseObject(line));
            } finally {
                py.destroyForcibly();
            }
            bed.awaitAll(() -> p.finishedSending.contains("p1"), Duration.ofSeconds(20), "P frees p1");
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
        }
    }

    @Test
    void pythonDealerPullsFromALayerwiseRouterAndGetsTheSameFinish(@TempDir Path dir) throws Exception {
        try (PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30))) {
            PdTestbed.Node p = bed.node(io.mooncake4j.connector.KvRole.KV_PRODUCER, "P", 0, 1, null,
                    c -> c.layerwisePush(true), b -> { });
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            p.fill(2, 3);
            p.step(announce("p1", "X"));
            Process py = python(dir, PY_DEALER, Integer.toString(p.worker.sideChannelPort()),
                    vllmMetadata(d, "d1", "X", 5, 6));
            try (BufferedReader out = new BufferedReader(new InputStreamReader(py.getInputStream(),
                    StandardCharsets.UTF_8))) {
                bed.awaitAll(() -> p.worker.diagnostics().activeSends() == 1, Duration.ofSeconds(20),
                        "the Python pull at P");
                io.mooncake4j.connector.MooncakeConnectorMetadata m = new io.mooncake4j.connector.MooncakeConnectorMetadata();
                m.addLayerwiseChunk("p1", new io.mooncake4j.connector.MooncakeConnectorMetadata.LayerwiseChunk("X",
                        new int[][] {{2, 3}}, 0, 2, true));
                p.step(m);
                for (int l = 0; l < PdTestbed.MODEL.numLayers(); l++) {
                    p.worker.saveKvLayer(PdTestbed.MODEL.layerName(l));
                }
                p.worker.waitForSave();
                String line = out.readLine();
                assertTrue(py.waitFor(30, TimeUnit.SECONDS), "the Python DEALER did not exit");
                assertEquals(0, py.exitValue(), "Python DEALER failed; its reply line: " + line);
                assertEquals(Map.of("status", 0L, "ok_reqs", List.of("d1")), Json.parseObject(line));
            } finally {
                py.destroyForcibly();
            }
            p.step(finished("p1", "X", 2, 3));
            bed.awaitAll(() -> p.finishedSending.contains("p1"), Duration.ofSeconds(20), "P frees p1");
            PdTestbed.assertSameTpCopy(p, 2, d, 5);
            PdTestbed.assertSameTpCopy(p, 3, d, 6);
        }
    }

    @Test
    void ourDealerPullsFromAPythonRouterThatAnswersFinish(@TempDir Path dir) throws Exception {
        Process py = python(dir, PY_ROUTER);
        try (BufferedReader out = new BufferedReader(new InputStreamReader(py.getInputStream(),
                StandardCharsets.UTF_8));
             PdTestbed bed = new PdTestbed().abortTimeout(Duration.ofSeconds(30));
             MooncakeBootstrapServer boot = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            int port = Integer.parseInt(out.readLine().strip());
            boot.start();
            String url = "http://127.0.0.1:" + boot.port();
            try (BootstrapClient c = new BootstrapClient()) {
                c.register(url, new RegisterWorkerPayload("P", 0, 0, 0, "tcp://127.0.0.1:" + port),
                        Duration.ofSeconds(5));
            }
            PdTestbed.Node d = bed.consumer("D", 0, 1);
            d.step(pull("d1", "X", "P", url, 5, 6));
            bed.awaitAll(() -> d.finishedRecving.contains("d1"), Duration.ofSeconds(30), "D's pull from Python");
            assertTrue(d.blocksWithLoadErrors.isEmpty(), "FINISH with ok_reqs: no load error");
            Map<String, Object> seen = Json.parseObject(out.readLine());
            assertEquals(Map.of("d1", List.of("X", List.of(List.of(5L, 6L)))), seen.get("req_blocks"));
            assertEquals("127.0.0.1", seen.get("remote_hostname"));
            assertEquals(1L, seen.get("remote_tp_size"));
            assertTrue(py.waitFor(30, TimeUnit.SECONDS), "the Python ROUTER did not exit");
            assertEquals(0, py.exitValue());
        } finally {
            py.destroyForcibly();
        }
    }
}
