package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.EngineCounters;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.testlog.LogCapture;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.event.Level;

/**
 * Two engine cores in this JVM over loopback handshakes for the core's own tests: the target with
 * one plain {@link FaultTransport}, the initiator with the fault transports a test gives it. Bytes
 * are moved by the initiator's fault transports in process; the target's transport only has to be
 * installed. Every engine made here is closed after the test.
 */
abstract class CoreFixture {

    static final int N = 4;
    static final long Q = 16 << 10;
    static final long LEN = N * Q;

    final List<CoreEngine> engines = new ArrayList<>();
    HostMemoryAllocator alloc;
    HostMemoryStorage local;
    HostMemoryStorage remote;
    CoreEngine target;

    /** Settings on loopback with OS-assigned ports and this synchronous deadline. */
    static EngineSettings settings(long transferTimeoutMs) {
        return new EngineSettings(HandshakeConfig.ephemeral(InetAddress.getLoopbackAddress()), transferTimeoutMs, 64,
                Map.of());
    }

    /** An engine offering {@code transports}, initialised with {@code protocol}; the caller checks rc via {@code expectRc}. */
    CoreEngine engine(long transferTimeoutMs, String protocol, FaultTransport... transports) {
        List<TransportFactory> fs = new ArrayList<>();
        for (FaultTransport t : transports) {
            fs.add(t.factory());
        }
        CoreEngine e = EngineBuilder.of(settings(transferTimeoutMs), fs.toArray(TransportFactory[]::new));
        engines.add(e);
        e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, protocol, "");
        return e;
    }

    CoreEngine initiator(FaultTransport... transports) {
        CoreEngine e = engine(600_000, "", transports);
        assertEquals(0, e.registerMemory(local.address(), LEN, "cpu:0"));
        return e;
    }

    @BeforeEach
    void setUp() {
        alloc = new HostMemoryAllocator();
        local = alloc.allocate(LEN);
        remote = alloc.allocate(LEN);
        for (long i = 0; i < LEN; i += 8) {
            local.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 31 + 7);
        }
        target = engine(600_000, "", new FaultTransport("far", 3));
        assertEquals(0, target.registerMemory(remote.address(), LEN, "cpu:0"));
    }

    @AfterEach
    void tearDown() {
        for (CoreEngine e : engines) {
            e.close();
        }
        alloc.close();
    }

    int write(CoreEngine e) {
        long[] src = new long[N];
        long[] dst = new long[N];
        long[] len = new long[N];
        for (int i = 0; i < N; i++) {
            src[i] = local.address() + i * Q;
            dst[i] = remote.address() + i * Q;
            len[i] = Q;
        }
        return e.batchTransferSyncWrite(target.getLocalSegmentName(), src, dst, len);
    }

    int writeOne(CoreEngine e) {
        return e.batchTransferSyncWrite(target.getLocalSegmentName(), new long[] {local.address()},
                new long[] {remote.address()}, new long[] {Q});
    }

    void assertArrived() {
        assertArrayEquals(local.segment().toArray(ValueLayout.JAVA_BYTE), remote.segment().toArray(ValueLayout.JAVA_BYTE));
    }

    /** Submits the {@link #N} write requests as one batch; returns its id. */
    long submitAsync(CoreEngine e) {
        long seg = e.openSegment(target.getLocalSegmentName());
        assertTrue(seg > 0, "segment opened");
        long batch = e.allocateBatchId(N);
        List<TransferRequest> rs = new ArrayList<>();
        for (int i = 0; i < N; i++) {
            rs.add(new TransferRequest(TransferRequest.Opcode.WRITE, local.address() + i * Q, seg, remote.address() + i * Q,
                    Q));
        }
        assertEquals(StatusCodes.OK, e.submitTransfer(batch, rs));
        return batch;
    }
}
