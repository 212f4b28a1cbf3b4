package io.mooncake4j.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Mooncake's own store client (its Python {@code store} module, built from Mooncake's source outside
 * this project) and ours on one real master, in P2P handshake mode and in HTTP metadata mode (the
 * master's embedded metadata server): values put by either are read by the other, through either
 * one's segment. Skipped unless {@code MOONCAKE_MASTER} names a master and
 * {@code MOONCAKE_STORE_PYTHONPATH} the folder holding the built {@code store} module
 * (docs/store.md). The Mooncake side runs {@code scripts/store-interop/mooncake_store_peer.py}.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MooncakeClientInteropTest {

    static final String PYTHONPATH_ENV = "MOONCAKE_STORE_PYTHONPATH";

    /** The bytes the Python peer's {@code pattern} makes. */
    static byte[] pattern(int size, int seed) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) (i * 31 + seed * 7 + (i >> 8));
        }
        return b;
    }

    static String sha256(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    /** The Python peer: one command line in, one answer line out. */
    static final class Peer implements AutoCloseable {
        final Process process;
        final BufferedReader out;
        final Writer in;
        final String hostname;

        Peer(MasterProcess m, long segment) throws Exception {
            this(m, "P2PHANDSHAKE", segment);
        }

        Peer(MasterProcess m, String metadata, long segment) throws Exception {
            String pp = System.getenv(PYTHONPATH_ENV);
            assumeTrue(pp != null && !pp.isBlank(), PYTHONPATH_ENV + " is not set: no Mooncake store module (docs/store.md)");
            Path script = Path.of(System.getProperty("user.dir")).resolveSibling("scripts/store-interop/mooncake_store_peer.py");
            assumeTrue(Files.isRegularFile(script), "no " + script);
            ProcessBuilder pb = new ProcessBuilder("python3", script.toString(), m.hostPort(), metadata,
                    Long.toString(segment)).redirectError(ProcessBuilder.Redirect.DISCARD);
            pb.environment().put("PYTHONPATH", pp);
            process = pb.start();
            out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            String line;
            while ((line = out.readLine()) != null && !line.startsWith("READY ") && !line.startsWith("SETUP-FAILED")) {
                // skip anything else the module prints
            }
            assertNotNull(line, "the Mooncake client exited before it was ready");
            assumeTrue(line.startsWith("READY "), "the Mooncake client did not set up: " + line);
            hostname = line.substring(6).trim();
        }

        String ask(String cmd) throws Exception {
            in.write(cmd + "\n");
            in.flush();
            String line = out.readLine();
            assertNotNull(line, "the Mooncake client exited on '" + cmd + "'");
            return line;
        }

        @Override
        public void close() throws Exception {
            try {
                in.write("quit\n");
                in.flush();
            } catch (java.io.IOException e) {
                // already gone
            }
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(30, TimeUnit.SECONDS);
            }
        }
    }

    private static String endpointOf(MooncakeStoreClient c, String key) {
        return c.master().getReplicaList(key).orThrow().replicas().getFirst().endpoint();
    }

    @Test
    void valuesPutByEitherClientAreReadByTheOther() throws Exception {
        try (MasterProcess m = new MasterProcess();
                Peer py = new Peer(m, 64L << 20);
                MooncakeStoreClient java = MooncakeStoreClient.setup(RealMasterTest.config(m, 64L << 20))) {
            ReplicateConfig toPy = ReplicateConfig.defaults().withPreferredSegment(py.hostname);
            ReplicateConfig toJava = ReplicateConfig.defaults().withPreferredSegment(java.getHostname());
            int size = 1 << 20;
            // Mooncake's client writes into its own segment; ours reads it over Mooncake's TCP transport
            assertEquals("PUT 0", py.ask("put py-own " + size + " 1 " + py.hostname));
            assertArrayEquals(pattern(size, 1), java.get("py-own"));
            // Mooncake's client writes into our segment through our data port; both read it back
            assertEquals("PUT 0", py.ask("put py-to-java " + size + " 2 " + java.getHostname()));
            assertArrayEquals(pattern(size, 2), java.get("py-to-java"));
            assertEquals("GET " + size + " " + sha256(pattern(size, 2)), py.ask("get py-to-java"));
            // ours writes into Mooncake's segment; Mooncake's client reads it
            assertEquals(0, java.put("java-to-py", pattern(size, 3), toPy));
            assertEquals("GET " + size + " " + sha256(pattern(size, 3)), py.ask("get java-to-py"));
            assertArrayEquals(pattern(size, 3), java.get("java-to-py"));
            // ours writes into its own segment; Mooncake's client reads it from our data port
            assertEquals(0, java.put("java-own", pattern(size, 4), toJava));
            assertEquals("GET " + size + " " + sha256(pattern(size, 4)), py.ask("get java-own"));
            // each value sits where it was meant to, so every direction above crossed the wire: the pool
            // holds two segments, ours (its transfer endpoint is our engine's) and Mooncake's (whose
            // endpoint is its engine's ip:port, not the segment name get_hostname() gives)
            assertNotEquals(java.endpoint(), endpointOf(java, "py-own"));
            assertEquals(java.endpoint(), endpointOf(java, "py-to-java"));
            assertNotEquals(java.endpoint(), endpointOf(java, "java-to-py"));
            assertEquals(java.endpoint(), endpointOf(java, "java-own"));
            assertEquals(endpointOf(java, "py-own"), endpointOf(java, "java-to-py"));
            // a miss is a miss on both sides
            assertEquals("GET 0 " + sha256(new byte[0]), py.ask("get nobody"));
            assertEquals(0, java.get("nobody").length);
        }
    }

    @Test
    void inHttpMetadataModeValuesPutByEitherClientAreReadByTheOther() throws Exception {
        int port = MasterProcess.freePort();
        String url = "http://127.0.0.1:" + port + "/metadata";
        try (MasterProcess m = new MasterProcess("--enable_http_metadata_server=true",
                "--http_metadata_server_host=127.0.0.1", "--http_metadata_server_port=" + port);
                Peer py = new Peer(m, url, 64L << 20)) {
            StoreConfig c = RealMasterTest.config(m, 64L << 20);
            StoreConfig http = new StoreConfig(c.localHostname(), url, c.globalSegmentSize(), c.localBufferSize(),
                    c.protocol(), c.deviceName(), c.masterServerAddress(), c.tenantId(), c.rpcTimeout(), c.pingInterval());
            try (MooncakeStoreClient java = MooncakeStoreClient.setup(http)) {
                ReplicateConfig toPy = ReplicateConfig.defaults().withPreferredSegment(py.hostname);
                ReplicateConfig toJava = ReplicateConfig.defaults().withPreferredSegment(java.getHostname());
                int size = 1 << 20;
                // Mooncake's client (HTTP mode: its handshake port gives no descriptor) holds the value;
                // our engine finds its segment in the metadata server and reads it
                assertEquals("PUT 0", py.ask("put py-own " + size + " 5 " + py.hostname));
                assertArrayEquals(pattern(size, 5), java.get("py-own"));
                assertNotEquals(java.endpoint(), endpointOf(java, "py-own"));
                // ours writes into Mooncake's segment; Mooncake's client reads it
                assertEquals(0, java.put("java-to-py", pattern(size, 6), toPy));
                assertEquals("GET " + size + " " + sha256(pattern(size, 6)), py.ask("get java-to-py"));
                assertNotEquals(java.endpoint(), endpointOf(java, "java-to-py"));
                // Mooncake's client finds our segment in the metadata server, both ways
                assertEquals("PUT 0", py.ask("put py-to-java " + size + " 7 " + java.getHostname()));
                assertEquals(java.endpoint(), endpointOf(java, "py-to-java"));
                assertArrayEquals(pattern(size, 7), java.get("py-to-java"));
                assertEquals(0, java.put("java-own", pattern(size, 8), toJava));
                assertEquals("GET " + size + " " + sha256(pattern(size, 8)), py.ask("get java-own"));
            }
        }
    }
}
