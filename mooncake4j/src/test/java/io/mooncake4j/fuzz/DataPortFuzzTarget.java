package io.mooncake4j.fuzz;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.tcp.TcpTransport;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Random;

/**
 * Attacks a TCP engine's data port: headers with random sizes (zero, huge, wrapping), addresses
 * inside, at the edges of and outside the registered buffer, every opcode, short and long bodies.
 * The registered buffer sits between two unregistered guard regions that must never change; a
 * well-formed v2 READ inside the buffer must return status OK and exactly the buffer's bytes.
 * Afterwards a second engine writes a pattern and reads it back.
 */
public final class DataPortFuzzTarget implements FuzzTarget {

    private static final int GUARD = 1 << 16;
    private static final int LEN = 1 << 16;
    private HostMemoryAllocator alloc;
    private HostMemoryStorage whole;
    private MemorySegment buf;
    private byte[] guardBefore;
    private byte[] guardAfter;
    private CoreEngine engine;
    private CoreEngine peer;
    private HostMemoryStorage peerBuf;
    private long base;

    @Override
    public String port() {
        return "data-port";
    }

    @Override
    public void start() {
        alloc = new HostMemoryAllocator();
        whole = alloc.allocate(GUARD + LEN + GUARD);
        HandshakeFuzzTarget.fillPattern(whole, 3);
        base = whole.address() + GUARD;
        buf = whole.segment().asSlice(GUARD, LEN);
        guardBefore = whole.segment().asSlice(0, GUARD).toArray(ValueLayout.JAVA_BYTE);
        guardAfter = whole.segment().asSlice(GUARD + LEN, GUARD).toArray(ValueLayout.JAVA_BYTE);
        engine = HandshakeFuzzTarget.started(HandshakeFuzzTarget.config());
        if (engine.registerMemory(base, LEN, "cpu:0") != 0) {
            throw new IllegalStateException("registerMemory failed");
        }
        peer = HandshakeFuzzTarget.started(HandshakeFuzzTarget.config());
        peerBuf = alloc.allocate(LEN);
        if (peer.registerMemory(peerBuf.address(), LEN, "cpu:0") != 0) {
            throw new IllegalStateException("registerMemory failed");
        }
    }

    private static byte[] header(long size, long addr, int opcode) {
        return ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN).putLong(size).putLong(addr)
                .put((byte) opcode).array();
    }

    private long address(Random r) {
        return switch (r.nextInt(8)) {
            case 0 -> base - 1 - r.nextInt(GUARD);
            case 1 -> base + LEN - r.nextInt(64);
            case 2 -> base + LEN + r.nextInt(GUARD);
            case 3 -> r.nextLong();
            case 4 -> -1L - r.nextInt(64);
            default -> base + r.nextInt(LEN);
        };
    }

    private long size(Random r) {
        return switch (r.nextInt(7)) {
            case 0 -> 0;
            case 1 -> -1L;
            case 2 -> Long.MIN_VALUE + r.nextInt(8);
            case 3 -> LEN + 1;
            case 4 -> 1 + r.nextInt(LEN);
            default -> 1 + r.nextInt(512);
        };
    }

    @Override
    public void runCase(Random r) throws Exception {
        int port = TcpTransport.in(engine).dataPort();
        int kind = r.nextInt(5);
        if (kind == 0) {
            FuzzIo.exchange(port, FuzzIo.randomBytes(r, 128), 1 << 20);
        } else if (kind == 1) {
            // a well-formed v2 READ inside the buffer: status OK and exactly those bytes are owed
            int off = r.nextInt(LEN);
            int len = 1 + r.nextInt(Math.min(4096, LEN - off));
            FuzzIo.Reply reply = FuzzIo.exchange(port, header(len, base + off, 0x80), 1 << 20);
            byte[] expected = FuzzIo.concat(ok(), buf.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE));
            if (!Arrays.equals(expected, reply.bytes())) {
                throw new AssertionError("v2 READ of " + len + " bytes at +" + off + " answered "
                        + reply.bytes().length + " bytes, not status OK and the buffer's bytes");
            }
        } else {
            int[] opcodes = {0x00, 0x01, 0x80, 0x81, 0x02, 0x82, 0x7f, 0xff};
            long size = size(r);
            byte[] body = FuzzIo.randomBytes(r, (int) Math.min(Math.max(size, 0), 2048) + r.nextInt(64));
            byte[] req = FuzzIo.concat(header(size, address(r), opcodes[r.nextInt(opcodes.length)]), body);
            if (kind == 4) {
                req = FuzzIo.mutate(r, req);
            }
            FuzzIo.exchange(port, req, 1 << 20);
        }
        checkGuards();
    }

    private static byte[] ok() {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(0).putInt(0x4D435456).array();
    }

    private void checkGuards() {
        if (!Arrays.equals(guardBefore, whole.segment().asSlice(0, GUARD).toArray(ValueLayout.JAVA_BYTE))
                || !Arrays.equals(guardAfter, whole.segment().asSlice(GUARD + LEN, GUARD).toArray(ValueLayout.JAVA_BYTE))) {
            throw new AssertionError("bytes written outside registered memory");
        }
    }

    @Override
    public void checkStillServing() {
        HandshakeFuzzTarget.fillPattern(peerBuf, 11);
        int rc = peer.batchTransferSyncWrite(engine.getLocalSegmentName(), new long[] {peerBuf.address()},
                new long[] {base}, new long[] {LEN});
        if (rc != 0) {
            throw new AssertionError("write to the fuzzed engine failed: " + rc);
        }
        long mismatch = buf.mismatch(peerBuf.segment());
        if (mismatch >= 0) {
            throw new AssertionError("written bytes differ at " + mismatch);
        }
        peerBuf.segment().fill((byte) 0);
        rc = peer.batchTransferSyncRead(engine.getLocalSegmentName(), new long[] {peerBuf.address()},
                new long[] {base}, new long[] {LEN});
        if (rc != 0 || buf.mismatch(peerBuf.segment()) >= 0) {
            throw new AssertionError("read-back from the fuzzed engine failed: " + rc);
        }
        checkGuards();
    }

    @Override
    public void close() {
        if (peer != null) {
            peer.close();
        }
        if (engine != null) {
            engine.close();
        }
        if (alloc != null) {
            alloc.close();
        }
    }
}
