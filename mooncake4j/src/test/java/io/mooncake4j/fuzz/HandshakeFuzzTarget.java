package io.mooncake4j.fuzz;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeFrame;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.tcp.TcpConfig;
import io.mooncake4j.engine.tcp.TcpEngines;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;

/**
 * Attacks a TCP engine's handshake (RPC) port: frames with random, zero, huge and truncated
 * length prefixes, every type byte, legacy frames, random and broken JSON. A well-formed Probe must
 * get the exact Probe reply and a well-formed Metadata request the engine's descriptor; anything
 * else must be answered or closed in time. Afterwards a second engine opens the segment and reads
 * registered bytes back.
 */
public final class HandshakeFuzzTarget implements FuzzTarget {

    static final int LEN = 1 << 16;
    private HostMemoryAllocator alloc;
    private CoreEngine engine;
    private CoreEngine reader;
    private HostMemoryStorage buf;
    private HostMemoryStorage local;
    private byte[] probeReply;

    @Override
    public String port() {
        return "handshake";
    }

    static TcpConfig config() {
        return TcpConfig.fromEnvironment(Map.of(), HandshakeConfig.ephemeral(FuzzIo.LOOPBACK)
                .withRequestLimits(3_000, 10_000, 256));
    }

    static CoreEngine started(TcpConfig cfg) {
        CoreEngine e = TcpEngines.alone(cfg);
        if (e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0) {
            e.close();
            throw new IllegalStateException("engine initialisation failed");
        }
        return e;
    }

    static void fillPattern(HostMemoryStorage b, int seed) {
        for (long i = 0; i < b.segment().byteSize(); i++) {
            b.segment().set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + seed));
        }
    }

    @Override
    public void start() {
        alloc = new HostMemoryAllocator();
        buf = alloc.allocate(LEN);
        local = alloc.allocate(LEN);
        fillPattern(buf, 7);
        engine = started(config());
        if (engine.registerMemory(buf.address(), LEN, "cpu:0") != 0) {
            throw new IllegalStateException("registerMemory failed");
        }
        reader = started(config());
        if (reader.registerMemory(local.address(), LEN, "cpu:0") != 0) {
            throw new IllegalStateException("registerMemory failed");
        }
        probeReply = new HandshakeFrame(HandshakeFrame.PROBE, "{\"status\":\"success\"}\n").encode();
    }

    private static byte[] frame(long length, byte[] body) {
        byte[] len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(length).array();
        return FuzzIo.concat(len, body);
    }

    @Override
    public void runCase(Random r) throws Exception {
        int port = engine.getRpcPort();
        int kind = r.nextInt(6);
        if (kind == 0) {
            FuzzIo.exchange(port, FuzzIo.randomBytes(r, 256), 1 << 21);
            return;
        }
        if (kind == 1) {
            // a well-formed Probe: the exact reply is owed
            FuzzIo.Reply reply = FuzzIo.exchange(port, new HandshakeFrame(HandshakeFrame.PROBE, "{}\n").encode(), 4096);
            if (!Arrays.equals(probeReply, reply.bytes())) {
                throw new AssertionError("Probe answered " + reply.bytes().length + " bytes, not the Probe reply");
            }
            return;
        }
        if (kind == 2) {
            // a well-formed Metadata request: the descriptor with the registered buffer is owed
            FuzzIo.Reply reply = FuzzIo.exchange(port, new HandshakeFrame(HandshakeFrame.METADATA, "{}\n").encode(),
                    1 << 21);
            HandshakeFrame f = HandshakeFrame.read(new java.io.ByteArrayInputStream(reply.bytes()), 1 << 21);
            SegmentDescriptor d = SegmentDescriptor.parse(f.json());
            if (d.buffers().size() != 1 || d.buffers().get(0).addr() != buf.address()) {
                throw new AssertionError("Metadata reply lost the registered buffer: " + f.json());
            }
            return;
        }
        byte type = (byte) switch (r.nextInt(4)) {
            case 0 -> r.nextInt(4);
            case 1 -> '{'; // legacy frame
            case 2 -> 4 + r.nextInt(120);
            default -> r.nextInt(256);
        };
        byte[] json = (kind == 3 ? FuzzIo.jsonValue(r, 0) + "\n"
                : new String(FuzzIo.mutate(r, "{\"name\":\"x\",\"notify_msg\":\"y\"}\n".getBytes(StandardCharsets.UTF_8)),
                        StandardCharsets.ISO_8859_1)).getBytes(StandardCharsets.ISO_8859_1);
        byte[] body = FuzzIo.concat(new byte[] {type}, json);
        long declared = switch (r.nextInt(6)) {
            case 0 -> 0;
            case 1 -> -1L;
            case 2 -> (2L << 20) + r.nextInt(1000); // over MC_HANDSHAKE_MAX_LENGTH
            case 3 -> body.length + 1 + r.nextInt(64); // truncated
            case 4 -> r.nextInt(body.length + 1);
            default -> body.length;
        };
        byte[] req = kind == 5 ? FuzzIo.mutate(r, frame(declared, body)) : frame(declared, body);
        FuzzIo.exchange(port, req, 1 << 21);
    }

    @Override
    public void checkStillServing() {
        PeerAddress addr = new PeerAddress("127.0.0.1", engine.getRpcPort());
        new HandshakeClient(HandshakeConfig.ephemeral(FuzzIo.LOOPBACK)).probe(addr);
        readBack(reader, engine, local, buf);
    }

    /** {@code reader} reads all of {@code remote} from {@code target} into {@code into}; every byte compared. */
    static void readBack(CoreEngine reader, CoreEngine target, HostMemoryStorage into,
            HostMemoryStorage remote) {
        into.segment().fill((byte) 0);
        int rc = reader.batchTransferSyncRead(target.getLocalSegmentName(), new long[] {into.address()},
                new long[] {remote.address()}, new long[] {remote.segment().byteSize()});
        if (rc != 0) {
            throw new AssertionError("read from the fuzzed engine failed: " + rc);
        }
        long mismatch = into.segment().mismatch(remote.segment());
        if (mismatch >= 0) {
            throw new AssertionError("read-back differs at byte " + mismatch);
        }
    }

    @Override
    public void close() {
        if (reader != null) {
            reader.close();
        }
        if (engine != null) {
            engine.close();
        }
        if (alloc != null) {
            alloc.close();
        }
    }
}
