package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The memlock pre-check against {@code CAP_IPC_LOCK}: a process with the capability is not held to
 * {@code RLIMIT_MEMLOCK}, so the check must not refuse what the kernel would pin.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class RdmaMemlockCapabilityTest {

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine engine;

    @AfterEach
    void tearDown() {
        if (engine != null) {
            engine.close();
        }
        alloc.close();
    }

    @Test
    void withCapIpcLockASmallUlimitDoesNotRefuseTheRegistration() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1");
        RdmaEngineConfig cfg = EmulatedEngines.config().withMemlockLimit(() -> OptionalLong.of(64L << 10))
                .withIpcLock(() -> true);
        engine = EmulatedEngines.started(fabric, "emu0,emu1", cfg);
        HostMemoryStorage big = alloc.allocate(2L << 20);
        assertEquals(ErrorCodes.OK, engine.registerMemory(big.address(), 2L << 20, "cpu:0"),
                "4 MiB pinned over a 64 KiB ulimit -l, but the kernel ignores it with CAP_IPC_LOCK");
        assertEquals(2, fabric.liveMemoryRegions());
        assertEquals(0, engine.batchTransferSyncWrite(engine.getLocalSegmentName(), new long[] {big.address()},
                new long[] {big.address() + (1L << 20)}, new long[] {1L << 20}), "and it is usable");
    }

    @Test
    void whenTheKernelStillRefusesTheMemlockDiagnosisIsAHint() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0");
        RdmaEngineConfig cfg = EmulatedEngines.config().withMemlockLimit(() -> OptionalLong.of(64L << 10))
                .withIpcLock(() -> true);
        engine = EmulatedEngines.started(fabric, "emu0", cfg);
        HostMemoryStorage big = alloc.allocate(1L << 20);
        fabric.failPlainRegistration(big.address(), big.address() + (1L << 20), EmulatedRdmaProvider.ENOMEM);
        assertEquals(ErrorCodes.CONTEXT, engine.registerMemory(big.address(), 1L << 20, "cpu:0"));
        String why = engine.lastError();
        assertTrue(why.contains("RLIMIT_MEMLOCK") && why.contains("CAP_IPC_LOCK"), why);
        assertEquals(0, fabric.liveMemoryRegions(), "nothing kept");
    }
}
