package io.mooncake4j.store;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real {@code mooncake_master} (the binary named by {@code MOONCAKE_MASTER}, built from Mooncake's
 * source outside this project: docs/store.md) on OS-chosen loopback ports. Tests that use it are
 * skipped, with the reason, when the variable is unset. Its log goes to a temporary file, which
 * {@link #log()} reads.
 */
final class MasterProcess implements AutoCloseable {

    static final String ENV = "MOONCAKE_MASTER";

    private final Path binary;
    private final int rpcPort;
    private final int metricsPort;
    private final List<String> extraFlags;
    private final Path logFile;
    private Process process;

    /** {@return the binary, or skips the calling test with the reason} */
    static Path requireBinary() {
        String b = System.getenv(ENV);
        assumeTrue(b != null && !b.isBlank(), ENV + " is not set: no mooncake_master to test against (docs/store.md)");
        Path p = Path.of(b);
        assumeTrue(Files.isExecutable(p), ENV + "=" + b + " is not an executable file");
        return p;
    }

    MasterProcess(String... extraFlags) throws IOException {
        this.binary = requireBinary();
        this.rpcPort = freePort();
        this.metricsPort = freePort();
        this.extraFlags = List.of(extraFlags);
        this.logFile = Files.createTempFile("mooncake-master", ".log");
        start();
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** Starts (or restarts) the master on the same ports and waits until ServiceReady answers. */
    void start() throws IOException {
        List<String> cmd = new ArrayList<>(List.of(binary.toString(), "--rpc_address=127.0.0.1",
                "--rpc_port=" + rpcPort, "--metrics_host=127.0.0.1", "--metrics_port=" + metricsPort,
                "--enable_http_metadata_server=false", "--rpc_thread_num=2", "--logtostderr=true"));
        cmd.addAll(extraFlags);
        process = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile())).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        try (MasterClient probe = new MasterClient(address(), Duration.ofMillis(500), "default")) {
            while (true) {
                try {
                    if (probe.serviceReady().ok()) {
                        return;
                    }
                } catch (StoreException e) {
                    if (!process.isAlive() || System.nanoTime() > deadline) {
                        throw new IOException("mooncake_master did not become ready: " + e.getMessage() + "\n" + log());
                    }
                }
                // polling a child process's port: there is no event to wait for
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50));
            }
        }
    }

    /** Kills the master (SIGKILL) and waits for it to end. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /** Waits until {@code condition} holds, polling; fails naming {@code what} after {@code timeout}. */
    static void await(String what, java.util.function.BooleanSupplier condition, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toMillis() + " ms waiting for " + what);
            }
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    InetSocketAddress address() {
        return new InetSocketAddress("127.0.0.1", rpcPort);
    }

    String hostPort() {
        return "127.0.0.1:" + rpcPort;
    }

    String log() {
        try {
            return Files.readString(logFile, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(log unreadable: " + e + ")";
        }
    }

    @Override
    public void close() throws InterruptedException, IOException {
        if (process != null) {
            process.destroy();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        }
        Files.deleteIfExists(logFile);
    }
}
