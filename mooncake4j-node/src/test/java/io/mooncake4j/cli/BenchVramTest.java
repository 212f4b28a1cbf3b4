package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.engine.testing.ScriptedTransferEngine;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.memory.cuda.CudaAvailability;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code bench --use_vram --gpu_id N} without a GPU: the buffers are {@link FakeDeviceMemory}
 * (host-untouchable mappings reached only through its copy queues), the engines real TCP engines
 * staging that memory; target and initiator in one JVM, every byte verified through host copies.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BenchVramTest {

    private static final Pattern LISTENING = Pattern.compile("listening on (\\S+)");

    private ExecutorService pool;
    private final List<BenchCommand> targets = new ArrayList<>();
    private final List<CoreEngine> engines = new CopyOnWriteArrayList<>();

    @BeforeEach
    void setUp() {
        pool = Executors.newCachedThreadPool();
    }

    @AfterEach
    void tearDown() throws InterruptedException {
        targets.forEach(BenchCommand::requestStop);
        pool.shutdown();
        assertTrue(pool.awaitTermination(20, TimeUnit.SECONDS), "bench threads finished");
    }

    private Function<String, TransferEngine> tcpOver(DeviceMemory memory) {
        return kind -> {
            TcpConfig c = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
            CoreEngine e = EngineBuilder.of(TcpTransport.engineSettings(c), TcpTransport.factory(c, memory));
            engines.add(e);
            return e;
        };
    }

    private static final class ListeningWatcher extends OutputStream {
        final CompletableFuture<String> segment = new CompletableFuture<>();
        final CompletableFuture<Void> ready = new CompletableFuture<>();
        final StringBuilder all = new StringBuilder();
        private final StringBuilder line = new StringBuilder();

        @Override
        public synchronized void write(int b) {
            all.append((char) b);
            if (b == '\n') {
                Matcher m = LISTENING.matcher(line);
                if (m.find()) {
                    segment.complete(m.group(1));
                }
                if (line.indexOf("bench target:") >= 0) {
                    ready.complete(null);
                }
                line.setLength(0);
            } else {
                line.append((char) b);
            }
        }
    }

    private record Started(String segment, Future<Integer> exit, ListeningWatcher output) {}

    private Started startTarget(DeviceMemory memory, String... extra) throws Exception {
        BenchCommand cmd = new BenchCommand(memory, tcpOver(memory));
        targets.add(cmd);
        ListeningWatcher watcher = new ListeningWatcher();
        List<String> args = new ArrayList<>(List.of("--mode=target", "--engine=tcp", "--local_server_name=127.0.0.1",
                "--buffer_size=256K", "--threads=1", "--batch_size=1", "--block_size=4096"));
        args.addAll(List.of(extra));
        PrintStream out = new PrintStream(watcher, true, StandardCharsets.UTF_8);
        Future<Integer> exit = pool.submit(() -> cmd.run(Flags.parse(args), out, out));
        String segment = watcher.segment.get(20, TimeUnit.SECONDS);
        watcher.ready.get(20, TimeUnit.SECONDS);
        return new Started(segment, exit, watcher);
    }

    private record Result(int code, String out, String err) {}

    private static Result run(BenchCommand cmd, String... args) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> all = new ArrayList<>(List.of("--mode=initiator", "--engine=tcp", "--local_server_name=127.0.0.1"));
        all.addAll(List.of(args));
        int code;
        try {
            code = cmd.run(Flags.parse(all), new PrintStream(out, true, StandardCharsets.UTF_8),
                    new PrintStream(err, true, StandardCharsets.UTF_8));
        } catch (Flags.UsageException e) {
            code = 2;
            err.writeBytes(e.getMessage().getBytes(StandardCharsets.UTF_8));
        }
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void vramInitiatorAndTargetVerifyEveryByteThroughHostStaging() throws Exception {
        try (FakeDeviceMemory target = new FakeDeviceMemory(2); FakeDeviceMemory initiator = new FakeDeviceMemory(1)) {
            Started t = startTarget(target, "--use_vram", "--gpu_id=1");
            assertTrue(t.output().all.toString().contains("(cuda:1)"), t.output().all.toString());
            assertEquals(256 * 1024, target.bytes(DeviceMemory.Direction.HOST_TO_DEVICE),
                    "--init_mem filled the whole target buffer with host-to-device copies");
            for (String api : List.of("sync", "async")) {
                Result r = run(new BenchCommand(initiator, tcpOver(initiator)), "--segment_id=" + t.segment(),
                        "--use_vram", "--gpu_id=0", "--verify", "--api=" + api, "--threads=2", "--batch_size=4",
                        "--block_size=1001", "--buffer_size=1", "--duration=0.4", "--noinit_mem");
                assertEquals(0, r.code(), r.err() + r.out());
                assertTrue(r.out().contains("every byte matched"), r.out());
                assertTrue(r.out().contains("patterns staged to and from cuda:0"), r.out());
                assertTrue(r.out().contains("sync, cuda:0)") || r.out().contains("async, cuda:0)"), r.out());
            }
            // the initiator's patterns went to its GPU and back through copies, the target staged its side
            assertTrue(initiator.copies(DeviceMemory.Direction.HOST_TO_DEVICE) > 0);
            assertTrue(initiator.copies(DeviceMemory.Direction.DEVICE_TO_HOST) > 0);
            assertTrue(engines.stream().mapToLong(e -> TcpTransport.in(e).stagedBytes()).sum() > 0);
            // the initiator's last pattern is in the target's GPU buffer (read through the fake, not the engine)
            byte[] remote = target.hostView(firstBufferOf(t)).reinterpret(1001).toArray(
                    java.lang.foreign.ValueLayout.JAVA_BYTE);
            assertTrue(countOf(remote, (byte) 0xCC) < remote.length, "the 0xCC fill was overwritten");
            targets.getFirst().requestStop();
            assertEquals(0, t.exit().get(10, TimeUnit.SECONDS));
            assertEquals(List.of(), target.violations());
            assertEquals(List.of(), initiator.violations());
            assertEquals(0, initiator.openQueues(), "every copy queue closed");
            assertEquals(0, initiator.pinnedBytesLive(), "every scratch freed");
        }
    }

    private long firstBufferOf(Started t) {
        Matcher m = Pattern.compile("buffer \\S+ \\S* ?at 0x([0-9a-f]+) \\(cuda").matcher(t.output().all);
        assertTrue(m.find(), t.output().all.toString());
        return Long.parseUnsignedLong(m.group(1), 16);
    }

    private static int countOf(byte[] a, byte v) {
        int n = 0;
        for (byte b : a) {
            n += b == v ? 1 : 0;
        }
        return n;
    }

    @Test
    void hostInitiatorWritesAndReadsAGpuTarget() throws Exception {
        try (FakeDeviceMemory target = new FakeDeviceMemory(1)) {
            Started t = startTarget(target, "--use_vram");
            for (String op : List.of("write", "read")) {
                Result r = run(new BenchCommand(), "--segment_id=" + t.segment(), "--operation=" + op, "--threads=1",
                        "--batch_size=8", "--block_size=8192", "--duration=0.3");
                assertEquals(0, r.code(), r.err());
                assertTrue(r.out().contains("Test completed:"), r.out());
            }
            assertTrue(TcpTransport.in(engines.getFirst()).stagedBytes() > 0, "the target staged its GPU buffer");
        }
    }

    @Test
    void aFailingGpuCopyFailsTheRun() throws Exception {
        try (FakeDeviceMemory target = new FakeDeviceMemory(1); FakeDeviceMemory initiator = new FakeDeviceMemory(1)) {
            Started t = startTarget(target, "--use_vram");
            initiator.failCopy(DeviceMemory.Direction.DEVICE_TO_HOST, 50);
            Result r = run(new BenchCommand(initiator, tcpOver(initiator)), "--segment_id=" + t.segment(),
                    "--use_vram", "--verify", "--threads=1", "--batch_size=4", "--block_size=4096", "--duration=5");
            assertEquals(1, r.code(), r.out());
            assertTrue(r.err().contains("FAILED: worker 0 batch"), r.err());
        }
    }

    @Test
    void withoutCudaUseVramPrintsTheCauseAndFixAndStartsNothing() throws Exception {
        assumeFalse(CudaAvailability.isAvailable(), "a GPU is present here; BenchGpuTest covers it");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = Main.run(new String[] {"bench", "--mode=target", "--use_vram", "--gpu_id=0", "--duration=30"},
                new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        String e = err.toString(StandardCharsets.UTF_8);
        assertEquals(1, code, e);
        assertTrue(e.contains("cuda:0") && e.contains(CudaAvailability.unavailabilityCause().getMessage()), e);
        assertTrue(e.contains("Fix:"), e);
        assertTrue(e.contains("nothing was started"), e);
        assertEquals("", out.toString(StandardCharsets.UTF_8), "no engine, no 'listening on' line");
    }

    @Test
    void useVramRefusesTheMockEngineAllGpusAndEnginesThatCannotMoveGpuMemory() throws Exception {
        try (FakeDeviceMemory fake = new FakeDeviceMemory(1)) {
            Result mock = run(new BenchCommand(fake, tcpOver(fake)), "--segment_id=x:1", "--use_vram", "--engine=mock");
            assertEquals(2, mock.code());
            assertTrue(mock.err().contains("would touch GPU memory directly"), mock.err());
            Result all = run(new BenchCommand(fake, tcpOver(fake)), "--segment_id=x:1", "--use_vram", "--gpu_id=-1");
            assertEquals(2, all.code());
            assertTrue(all.err().contains("one buffer per GPU"), all.err());
            Result noGpu = run(new BenchCommand(fake, tcpOver(fake)), "--segment_id=x:1", "--use_vram", "--gpu_id=3");
            assertEquals(1, noGpu.code());
            assertTrue(noGpu.err().contains("GPU 3 does not exist"), noGpu.err());
            Result scripted = run(new BenchCommand(fake, kind -> new ScriptedTransferEngine()), "--segment_id=x:1",
                    "--use_vram", "--engine=scripted");
            assertEquals(1, scripted.code());
            assertTrue(scripted.err().contains("cannot move GPU memory at cuda:0"), scripted.err());
            assertEquals(0, fake.pinnedAllocations(), "nothing allocated");
        }
    }
}
