package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaDeviceMemory;
import io.mooncake4j.sim.ConnectorSimWorker;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code bench --use_vram} and {@code demo --device cuda} on a real GPU (cuda:0), over TCP engines
 * on loopback with OS-assigned ports: the CUDA binding under the paths that {@code BenchVramTest} and
 * {@code DemoDeviceTest} verify with an emulated GPU. Skipped with the probe's cause without CUDA.
 */
@Tag("gpu")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CliGpuTest {

    private static final Pattern LISTENING = Pattern.compile("listening on (\\S+)");

    @BeforeEach
    void needsAGpu() {
        assumeTrue(CudaAvailability.isAvailable(), () -> "no usable GPU: " + CudaAvailability.summary());
    }

    private static Function<String, TransferEngine> tcpEngines() {
        return kind -> {
            TcpConfig c = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
            return EngineBuilder.of(TcpTransport.engineSettings(c), TcpTransport.factory(c, CudaDeviceMemory.INSTANCE));
        };
    }

    private static final class Watcher extends OutputStream {
        final CompletableFuture<String> segment = new CompletableFuture<>();
        private final StringBuilder line = new StringBuilder();

        @Override
        public synchronized void write(int b) {
            if (b == '\n') {
                Matcher m = LISTENING.matcher(line);
                if (m.find()) {
                    segment.complete(m.group(1));
                }
                line.setLength(0);
            } else {
                line.append((char) b);
            }
        }
    }

    @Test
    void benchUseVramWritesReadsBackAndVerifiesGpuBuffersOverTcp() throws Exception {
        ExecutorService pool = Executors.newSingleThreadExecutor();
        BenchCommand target = new BenchCommand(CudaDeviceMemory.INSTANCE, tcpEngines());
        try {
            Watcher w = new Watcher();
            PrintStream tout = new PrintStream(w, true, StandardCharsets.UTF_8);
            Future<Integer> texit = pool.submit(() -> target.run(Flags.parse(List.of("--mode=target", "--engine=tcp",
                    "--local_server_name=127.0.0.1", "--use_vram", "--gpu_id=0", "--buffer_size=64M")), tout, tout));
            String segment = w.segment.get(60, TimeUnit.SECONDS);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int code = new BenchCommand(CudaDeviceMemory.INSTANCE, tcpEngines()).run(Flags.parse(List.of(
                    "--mode=initiator", "--engine=tcp", "--local_server_name=127.0.0.1", "--segment_id=" + segment,
                    "--use_vram", "--gpu_id=0", "--verify", "--threads=2", "--batch_size=16",
                    "--block_size=1048577", "--duration=3")), new PrintStream(out, true, StandardCharsets.UTF_8),
                    System.err);
            String text = out.toString(StandardCharsets.UTF_8);
            System.out.println("cli-gpu: bench --use_vram --verify: " + text.lines().filter(
                    l -> l.startsWith("Test completed")).findFirst().orElse("(no summary)"));
            assertEquals(0, code, text);
            assertTrue(text.contains("every byte matched"), text);
            target.requestStop();
            assertEquals(0, texit.get(30, TimeUnit.SECONDS));
        } finally {
            target.requestStop();
            pool.shutdown();
            assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
        }
    }

    @Test
    void demoDeviceCudaMovesAndVerifiesGpuResidentKv() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int code = new DemoCommand(protocol -> ConnectorSimWorker.factory(cfg -> tcpEngines().apply("tcp")),
                CudaDeviceMemory.INSTANCE).run(Flags.parse(List.of("--device", "cuda", "--model", "tiny",
                        "--requests", "8", "--prompt-tokens", "500", "--timeout", "90")),
                new PrintStream(out, true, StandardCharsets.UTF_8), System.err);
        String text = out.toString(StandardCharsets.UTF_8);
        System.out.println("cli-gpu: demo --device cuda: " + text.lines().filter(
                l -> l.contains("throughput") || l.contains("requests ")).toList());
        assertEquals(0, code, text);
        assertTrue(text.contains("8 ok, 0 failed"), text);
        assertTrue(text.contains("OK: every byte verified"), text);
    }
}
