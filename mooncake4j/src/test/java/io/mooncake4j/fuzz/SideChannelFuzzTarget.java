package io.mooncake4j.fuzz;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.wire.MooncakeXferMetadataCodec;
import io.mooncake4j.connector.worker.KvConnectorTransferResults;
import io.mooncake4j.connector.worker.KvRegistration;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.connector.worker.SideChannelLimits;
import io.mooncake4j.connector.worker.WorkerHealth;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferEngines;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.KvCacheLayout;
import io.mooncake4j.memory.KvCaches;
import io.mooncake4j.memory.ModelPreset;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The producer's side channel (its ZMQ ROUTER) under fuzzing: real P and D workers over the TCP
 * transfer engine on 127.0.0.1. Each case is one of: random bytes or a mutated valid
 * {@code MooncakeXferMetadata} as a frame from a DEALER (malformed msgpack); or, over a raw TCP
 * connection, a bad greeting, a frame header declaring more than the maximum message size (the
 * connection must be dropped), a truncated frame, random bytes after a valid handshake, or a run of
 * {@code MORE} frames. {@link #checkStillServing()} makes a real pull and verifies every byte, and
 * that the producer's health is still good.
 */
public final class SideChannelFuzzTarget implements FuzzTarget {

    private static final ModelPreset MODEL = ModelPreset.TINY;
    private static final int BLOCKS = 16;
    private static final Duration READ = Duration.ofSeconds(10);
    private static final Duration PULL_DEADLINE = Duration.ofSeconds(30);

    private final HostMemoryAllocator alloc = new HostMemoryAllocator();
    private final List<AutoCloseable> closeLast = new ArrayList<>();
    private MooncakeConnectorWorker p;
    private MooncakeConnectorWorker d;
    private KvCaches pKv;
    private KvCaches dKv;
    private ZContext zmq;
    private ZMQ.Socket dealer;
    private byte[] validMetadata;
    private int serial;
    private long dropsSeen;

    /** Public no-arg constructor: {@code FuzzMain} loads this class by name. */
    public SideChannelFuzzTarget() {
    }

    @Override
    public String port() {
        return "side-channel";
    }

    @Override
    public void start() throws Exception {
        TransferEngine pe = TransferEngines.create("tcp");
        closeLast.add(pe);
        pKv = KvCaches.allocate(MODEL, 1, BLOCKS, KvCacheLayout.FUSED, alloc::allocate);
        p = worker(KvRole.KV_PRODUCER, "FUZZ-P", pe, pKv);
        TransferEngine de = TransferEngines.create("tcp");
        closeLast.add(de);
        dKv = KvCaches.allocate(MODEL, 1, BLOCKS, KvCacheLayout.FUSED, alloc::allocate);
        d = worker(KvRole.KV_CONSUMER, "FUZZ-D", de, dKv);
        KvRegistration reg = d.registration();
        Map<String, MooncakeXferMetadata.ReqBlocks> rb = new LinkedHashMap<>();
        rb.put("fuzz-d1", new MooncakeXferMetadata.ReqBlocks("fuzz-x1", new long[][] {{1, 2}}));
        validMetadata = MooncakeXferMetadataCodec.encode(new MooncakeXferMetadata("127.0.0.1", d.rpcPort(), 1, 0, rb,
                longs(reg.kvCachesBaseAddr()), longs(reg.blockLenPerLayer()), longs(reg.kvBlockLenPerLayer()),
                reg.registeredLayerNames(), ints(reg.registeredLayerIndices()), ints(reg.registeredGroupIndices()),
                1));
        zmq = new ZContext();
        dealer = zmq.createSocket(SocketType.DEALER);
        dealer.setLinger(0);
        dealer.connect("tcp://127.0.0.1:" + p.sideChannelPort());
    }

    private MooncakeConnectorWorker worker(KvRole role, String engineId, TransferEngine engine, KvCaches kv) {
        MooncakeConnectorConfig config = MooncakeConnectorConfig.builder().kvRole(role).engineId(engineId)
                .protocol("tcp").hostname("127.0.0.1").numWorkers(2).bootstrapPort(0)
                .abortRequestTimeout(Duration.ofSeconds(2)).listenerReadyTimeout(Duration.ofSeconds(10)).build();
        MooncakeConnectorWorker w = MooncakeConnectorWorker.builder(config, engine, kv.config())
                .memlockLimit(OptionalLong::empty).bootstrapBindHost("127.0.0.1").model(false, MODEL.numKvHeads())
                .build();
        closeLast.add(0, w);
        w.registerKvCaches(kv.tensorsByLayer());
        return w;
    }

    @Override
    public void runCase(Random random) throws Exception {
        int kind = random.nextInt(8);
        switch (kind) {
            case 0 -> dealer.send(randomBytes(random, random.nextInt(300)), ZMQ.DONTWAIT);
            case 1 -> dealer.send(mutate(random, validMetadata), ZMQ.DONTWAIT);
            case 2 -> badGreeting(random);
            case 3 -> hugeHeader(random);
            case 4 -> truncatedFrame(random);
            case 5 -> randomAfterHandshake(random);
            case 6 -> manyMoreFrames(random);
            default -> wrongFrameCount(random);
        }
        while (dealer.recv(ZMQ.DONTWAIT) != null) {
            // answers to earlier malformed messages (ERROR, or FINISH after the abort timeout): drained
        }
    }

    private static byte[] randomBytes(Random r, int n) {
        byte[] b = new byte[n];
        r.nextBytes(b);
        return b;
    }

    private static byte[] mutate(Random r, byte[] valid) {
        byte[] b = valid.clone();
        int flips = 1 + r.nextInt(4);
        for (int i = 0; i < flips; i++) {
            b[r.nextInt(b.length)] = (byte) r.nextInt(256);
        }
        if (r.nextInt(4) == 0) {
            byte[] cut = new byte[r.nextInt(b.length)];
            System.arraycopy(b, 0, cut, 0, cut.length);
            return cut;
        }
        return b;
    }

    private ZmtpPeer raw() throws IOException {
        return ZmtpPeer.connect(p.sideChannelPort(), READ);
    }

    private void badGreeting(Random r) throws IOException {
        try (ZmtpPeer z = raw()) {
            byte[] g = ZmtpPeer.greeting();
            switch (r.nextInt(4)) {
                case 0 -> g = randomBytes(r, 1 + r.nextInt(64));
                case 1 -> g[10] = (byte) r.nextInt(256); // version
                case 2 -> System.arraycopy("CURVE".getBytes(java.nio.charset.StandardCharsets.US_ASCII), 0, g, 12, 5);
                default -> g[0] = 0x01; // not a ZMTP 3 signature
            }
            z.write(g);
        }
    }

    /** The node must drop a peer that declares a frame above the maximum message size. */
    private void hugeHeader(Random r) throws IOException {
        long max = SideChannelLimits.DEFAULT_MAX_METADATA_BYTES;
        long size = max + 1 + (long) (r.nextDouble() * (Long.MAX_VALUE - max - 1));
        if (r.nextInt(4) == 0) {
            size = Long.MIN_VALUE | r.nextLong(); // 2^63 and above: negative if read as a signed long
            try (ZmtpPeer z = raw()) {
                z.handshake("DEALER");
                z.write(ZmtpPeer.longHeader(0, size));
                // our ZMTP rejects a size with the top bit set on the header: the peer is dropped
                if (!z.closedByPeer()) {
                    throw new AssertionError("P kept a peer that declared a frame of "
                            + Long.toUnsignedString(size) + " bytes");
                }
                dropsSeen++;
            }
            return;
        }
        try (ZmtpPeer z = raw()) {
            z.handshake("DEALER");
            z.write(ZmtpPeer.longHeader(r.nextBoolean() ? ZmtpPeer.MORE : 0, size));
            if (!z.closedByPeer()) {
                throw new AssertionError(String.format(Locale.ROOT,
                        "P kept a peer that declared a %d-byte frame for %d s", size, READ.toSeconds()));
            }
            dropsSeen++;
        }
    }

    private void truncatedFrame(Random r) throws IOException {
        try (ZmtpPeer z = raw()) {
            z.handshake("DEALER");
            int declared = 10 + r.nextInt(1 << 16);
            z.write(ZmtpPeer.longHeader(0, declared));
            z.write(randomBytes(r, r.nextInt(declared)));
        }
    }

    private void randomAfterHandshake(Random r) throws IOException {
        try (ZmtpPeer z = raw()) {
            z.handshake(r.nextBoolean() ? "DEALER" : "PUB");
            z.write(randomBytes(r, 1 + r.nextInt(512)));
        }
    }

    private void manyMoreFrames(Random r) throws IOException {
        try (ZmtpPeer z = raw()) {
            z.handshake("DEALER");
            int n = 1 + r.nextInt(64);
            for (int i = 0; i < n; i++) {
                z.write(ZmtpPeer.frame(ZmtpPeer.MORE, randomBytes(r, r.nextInt(200))));
            }
            if (r.nextBoolean()) {
                z.write(ZmtpPeer.frame(0, mutate(r, validMetadata)));
            }
        }
    }

    private void wrongFrameCount(Random r) {
        int n = r.nextBoolean() ? 0 : 2 + r.nextInt(3);
        if (n == 0) {
            dealer.send(new byte[0], ZMQ.DONTWAIT);
            return;
        }
        for (int i = 0; i < n; i++) {
            dealer.send(i == 0 ? validMetadata : randomBytes(r, r.nextInt(100)), i < n - 1 ? ZMQ.SNDMORE : ZMQ.DONTWAIT);
        }
    }

    @Override
    public void checkStillServing() {
        int pBlock = 1 + serial % (BLOCKS - 1);
        int dBlock = BLOCKS - 1 - serial % (BLOCKS - 1);
        String id = "fuzz-check-" + serial++;
        fill(pKv, pBlock);
        MooncakeConnectorMetadata announce = new MooncakeConnectorMetadata();
        announce.addNewReq("p-" + id, new int[0][], Map.of("transfer_id", id), false);
        p.startLoadKv(announce);
        MooncakeConnectorMetadata finished = new MooncakeConnectorMetadata();
        finished.addNewReq("p-" + id, new int[][] {{pBlock}}, Map.of("transfer_id", id), false);
        p.startLoadKv(finished);
        MooncakeConnectorMetadata pull = new MooncakeConnectorMetadata();
        pull.addNewReq("d-" + id, new int[][] {{dBlock}}, Map.of("transfer_id", id, "remote_engine_id", "FUZZ-P",
                "remote_bootstrap_addr", p.bootstrapServerUrl().orElseThrow()), true);
        d.startLoadKv(pull);
        long deadline = System.nanoTime() + PULL_DEADLINE.toNanos();
        Set<String> recving = new LinkedHashSet<>();
        Set<Integer> errors = new LinkedHashSet<>();
        while (!recving.contains("d-" + id)) {
            KvConnectorTransferResults r = d.getTransferResults();
            recving.addAll(r.finishedRecving());
            errors.addAll(d.getBlockIdsWithLoadErrors());
            p.getFinished();
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("the side channel did not serve a valid pull within " + PULL_DEADLINE);
            }
            LockSupport.parkNanos(2_000_000); // polling interval of the embedder's loop, not synchronisation
        }
        if (errors.contains(dBlock)) {
            throw new AssertionError("the valid pull after fuzzing failed (block " + dBlock + ")");
        }
        verify(pBlock, dBlock);
        WorkerHealth h = p.health();
        if (!h.healthy()) {
            throw new AssertionError("P is unhealthy after fuzzing: " + h);
        }
    }

    private static long[] longs(List<Long> l) {
        return l.stream().mapToLong(Long::longValue).toArray();
    }

    private static int[] ints(List<Integer> l) {
        return l.stream().mapToInt(Integer::intValue).toArray();
    }

    private static byte pattern(int layer, int block, long off) {
        return (byte) (layer * 131 + block * 7 + off * 13 + (off >> 8) + 1);
    }

    private static MemorySegment block(KvCaches kv, int layer, int block) {
        long addr = kv.tensorsByLayer().get(MODEL.layerName(layer)).getFirst().blockAddress(block);
        return MemorySegment.ofAddress(addr).reinterpret(MODEL.pageBytes(1));
    }

    private void fill(KvCaches kv, int b) {
        for (int l = 0; l < MODEL.numLayers(); l++) {
            MemorySegment s = block(kv, l, b);
            for (long off = 0; off < s.byteSize(); off++) {
                s.set(ValueLayout.JAVA_BYTE, off, pattern(l, b, off));
            }
        }
    }

    private void verify(int pBlock, int dBlock) {
        for (int l = 0; l < MODEL.numLayers(); l++) {
            MemorySegment got = block(dKv, l, dBlock);
            for (long off = 0; off < got.byteSize(); off++) {
                if (got.get(ValueLayout.JAVA_BYTE, off) != pattern(l, pBlock, off)) {
                    throw new AssertionError(String.format(Locale.ROOT,
                            "D block %d layer %d offset %d does not hold P block %d", dBlock, l, off, pBlock));
                }
            }
        }
    }

    /** Raw connections the node dropped for an oversized frame header (for the summary). */
    public long oversizedDrops() {
        return dropsSeen;
    }

    @Override
    public void close() throws Exception {
        if (zmq != null) {
            zmq.close();
        }
        Exception first = null;
        for (AutoCloseable c : closeLast) {
            try {
                c.close();
            } catch (Exception e) {
                first = first == null ? e : first;
            }
        }
        alloc.close();
        if (first != null) {
            throw first;
        }
    }
}
