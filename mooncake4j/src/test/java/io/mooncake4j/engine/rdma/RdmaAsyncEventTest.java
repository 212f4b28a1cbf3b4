package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.rdma.verbs.AsyncEvent;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Asynchronous device events (port down, device fatal) take a NIC out of selection and put it back. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaAsyncEventTest {

    private static final long BUF = 1L << 20;
    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private CoreEngine target;
    private CoreEngine initiator;
    private HostMemoryStorage local;
    private HostMemoryStorage remote;

    @AfterEach
    void tearDown() {
        if (initiator != null) {
            initiator.close();
        }
        if (target != null) {
            target.close();
        }
        alloc.close();
    }

    private EmulatedRdmaProvider start() {
        EmulatedRdmaProvider fabric = new EmulatedRdmaProvider("emu0", "emu1", "emu2");
        target = EmulatedEngines.started(fabric, "emu2");
        initiator = EmulatedEngines.started(fabric, "emu0,emu1");
        local = alloc.allocate(BUF);
        remote = alloc.allocate(BUF);
        assertEquals(0, initiator.registerMemory(local.address(), BUF, "cpu:0"));
        assertEquals(0, target.registerMemory(remote.address(), BUF, "cpu:0"));
        return fabric;
    }

    private int write() {
        local.segment().fill((byte) 0x5a);
        int rc = initiator.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {BUF});
        if (rc == 0) {
            assertArrayEquals(local.segment().toArray(ValueLayout.JAVA_BYTE), remote.segment().toArray(ValueLayout.JAVA_BYTE));
        }
        return rc;
    }

    private static void await(BooleanSupplier c, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what);
            Thread.onSpinWait();
        }
    }

    /**
     * Waits until the events injected on {@code device} so far are handled, not only counted (the
     * monitor counts an event before acting on it): a neutral marker (SM_CHANGE, only logged) is queued
     * behind them on the device's single reader thread, which counts it only after it has finished the
     * earlier ones. {@code counted} is the number of events, all devices, the engine has read before the marker.
     */
    private void awaitHandled(EmulatedRdmaProvider fabric, String device, long counted) {
        fabric.injectAsyncEvent(device, AsyncEvent.SM_CHANGE, 1);
        await(() -> RdmaTransport.in(initiator).asyncEvents() == counted + 1, "events on " + device + " handled");
    }

    private static long uses(List<String> log, String device) {
        return log.stream().filter(l -> l.contains(" " + device + "->")).count(); // "ok emu0->emu2"
    }

    @Test
    void aPortDownTakesTheNicOutOfSelectionAndPortActivePutsItBack() {
        EmulatedRdmaProvider fabric = start();
        assertEquals(0, write());
        assertTrue(uses(fabric.pathLog(), "emu0") > 0, "both NICs in use at first");
        fabric.injectAsyncEvent("emu0", AsyncEvent.PORT_ERR, 1);
        await(() -> RdmaTransport.in(initiator).inactiveDevices().equals(List.of("emu0")), "emu0 out of selection");
        assertEquals(1, RdmaTransport.in(initiator).portDownEvents());
        int before = fabric.pathLog().size();
        assertEquals(0, write());
        List<String> during = fabric.pathLog().subList(before, fabric.pathLog().size());
        assertEquals(16, during.size());
        assertEquals(0, uses(during, "emu0"), "no slice on the down NIC: " + during);
        fabric.injectAsyncEvent("emu0", AsyncEvent.PORT_ACTIVE, 1);
        await(() -> RdmaTransport.in(initiator).inactiveDevices().isEmpty(), "emu0 back in selection");
        before = fabric.pathLog().size();
        assertEquals(0, write());
        assertTrue(uses(fabric.pathLog().subList(before, fabric.pathLog().size()), "emu0") > 0, "emu0 used again");
        assertEquals(2, RdmaTransport.in(initiator).asyncEvents());
        assertEquals(0, RdmaTransport.in(initiator).liveSlices());
    }

    @Test
    void eventsOnAnotherPortAreCountedButChangeNothing() {
        EmulatedRdmaProvider fabric = start();
        fabric.injectAsyncEvent("emu1", AsyncEvent.PORT_ERR, 2);
        awaitHandled(fabric, "emu1", 1);
        assertTrue(RdmaTransport.in(initiator).inactiveDevices().isEmpty());
        assertEquals(0, RdmaTransport.in(initiator).portDownEvents());
    }

    @Test
    void aDeviceFatalErrorKeepsTheNicOutAndAllNicsDownFailsCleanly() {
        EmulatedRdmaProvider fabric = start();
        fabric.injectAsyncEvent("emu1", AsyncEvent.DEVICE_FATAL, 0);
        await(() -> RdmaTransport.in(initiator).inactiveDevices().equals(List.of("emu1")), "emu1 out");
        fabric.injectAsyncEvent("emu1", AsyncEvent.PORT_ACTIVE, 1);
        awaitHandled(fabric, "emu1", 2);
        assertEquals(List.of("emu1"), RdmaTransport.in(initiator).inactiveDevices(), "a failed device does not come back");
        int before = fabric.pathLog().size();
        assertEquals(0, write());
        assertEquals(0, uses(fabric.pathLog().subList(before, fabric.pathLog().size()), "emu1"));
        fabric.injectAsyncEvent("emu0", AsyncEvent.PORT_ERR, 1);
        await(() -> RdmaTransport.in(initiator).inactiveDevices().size() == 2, "both out");
        assertEquals(-1, write(), "no NIC left");
        assertEquals(0, RdmaTransport.in(initiator).liveSlices(), "every slice accounted for");
    }

    @Test
    void theEventThreadsStopAtClose() {
        start();
        List<Thread> threads = RdmaTransport.in(initiator).asyncEventThreads();
        assertEquals(2, threads.size());
        for (Thread t : threads) {
            assertTrue(t.getName().startsWith("mooncake-rdma-events-"), t.getName());
            assertTrue(t.isAlive());
        }
        initiator.close();
        for (Thread t : threads) {
            assertFalse(t.isAlive(), t.getName() + " still running after close");
        }
        initiator = null;
    }
}
