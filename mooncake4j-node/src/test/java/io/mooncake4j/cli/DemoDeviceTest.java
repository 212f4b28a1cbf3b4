package io.mooncake4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.mooncake4j.engine.core.EngineBuilder;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.fake.FakeDeviceMemory;
import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.sim.ConnectorSimWorker;
import io.mooncake4j.sim.DemoRunner;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code demo --device cuda}: flags, the refusal without CUDA, and the whole run over an emulated GPU. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DemoDeviceTest {

    private static DemoRunner.Options parse(String... args) {
        return DemoCommand.parse(Flags.parse(List.of(args)));
    }

    private record Result(int code, String out, String err) {}

    private static Result run(DemoCommand cmd, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = cmd.run(Flags.parse(List.of(args)), new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void deviceFlagsDefaultToCpuAndGpuZero() {
        DemoRunner.Options d = parse();
        assertEquals("cpu", d.device());
        assertEquals(0, d.pGpu());
        assertEquals(0, d.dGpu());
        DemoRunner.Options g = parse("--device", "cuda", "--gpu-id", "2");
        assertEquals("cuda", g.device());
        assertEquals(2, g.pGpu());
        assertEquals(2, g.dGpu());
        DemoRunner.Options pd = parse("--device=CUDA", "--gpu_id=2", "--p-gpu=0", "--d-gpu", "1");
        assertEquals(0, pd.pGpu());
        assertEquals(1, pd.dGpu());
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--device", "tpu")).getMessage()
                .contains("cpu or cuda"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--device", "cuda", "--protocol", "mock"))
                .getMessage().contains("would touch GPU memory directly"));
        assertTrue(assertThrows(Flags.UsageException.class, () -> parse("--device", "cuda", "--d-gpu", "-1"))
                .getMessage().contains(">= 0"));
    }

    @Test
    void withoutCudaDeviceCudaPrintsTheCauseAndFixAndStartsNothing() {
        assumeFalse(CudaAvailability.isAvailable(), "a GPU is present here; DemoGpuTest covers it");
        AtomicInteger factories = new AtomicInteger();
        Result r = run(new DemoCommand(protocol -> {
            factories.incrementAndGet();
            return ConnectorSimWorker.factory(protocol);
        }), "--device", "cuda", "--requests", "8");
        assertEquals(1, r.code(), r.err());
        assertTrue(r.err().contains("cuda:0") && r.err().contains(CudaAvailability.unavailabilityCause().getMessage()),
                r.err());
        assertTrue(r.err().contains("Fix:"), r.err());
        assertTrue(r.err().contains("nothing was started"), r.err());
        assertEquals("", r.out(), "no bootstrap server, no engine, no progress line");
        assertEquals(0, factories.get(), "no worker factory asked for");
    }

    @Test
    void deviceCudaRunsTheWholeDemoOverAnEmulatedGpuAndVerifiesEveryByte() {
        try (FakeDeviceMemory fake = new FakeDeviceMemory(2)) {
            TcpConfig c = TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()));
            DemoCommand cmd = new DemoCommand(protocol -> ConnectorSimWorker.factory(
                    cfg -> EngineBuilder.of(TcpTransport.engineSettings(c), TcpTransport.factory(c, fake))), fake);
            Result r = run(cmd, "--device", "cuda", "--p-gpu", "1", "--model", "tiny", "--requests", "8",
                    "--prompt-tokens", "120", "--num-blocks", "48", "--timeout", "40");
            assertEquals(0, r.code(), r.out() + r.err());
            assertTrue(r.out().contains("8 ok, 0 failed"), r.out());
            assertTrue(r.out().contains("GPU: P on cuda:1, D on cuda:0"), r.out());
            assertTrue(r.out().contains("OK: every byte verified"), r.out());
            assertTrue(fake.copies(DeviceMemory.Direction.HOST_TO_DEVICE) > 0, "the model wrote through copies");
            assertEquals(List.of(), fake.violations());
            assertEquals(0, fake.openQueues());
        }
    }
}
