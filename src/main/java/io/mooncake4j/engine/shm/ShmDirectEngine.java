package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.BufferRegistry;
import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.StatusCodes;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.TransferRequest;
import io.mooncake4j.engine.TransferStatus;
import io.mooncake4j.engine.handshake.HandshakeClient;
import io.mooncake4j.engine.handshake.HandshakeConfig;
import io.mooncake4j.engine.handshake.HandshakeServer;
import io.mooncake4j.engine.handshake.PeerAddress;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.internal.EngineCalls;
import io.mooncake4j.engine.internal.HandshakeService;
import io.mooncake4j.engine.spi.ExtensionDescriptors;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.RemoteSegment;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.SliceGroup;
import io.mooncake4j.engine.spi.TransportException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A direct host for {@link ShmTransport} until the engine core installs it as one of its
 * transports: the handshake port (Metadata through {@link HandshakeService}, with the
 * {@code mc4j_shm} advert), a {@link BufferRegistry}, descriptor fetches, and the synchronous batch
 * calls, which hand every slice to shm and fail (no fallback) when shm cannot reach the peer. It
 * serves {@code bin/mooncake4j bench --engine=shm-direct} and the two-process tests; it is not
 * offered by {@code TransferEngines}, and its asynchronous batch API answers
 * {@link StatusCodes#INVALID_ARGUMENT} (use the engine core for that). Thread-safe.
 */
public final class ShmDirectEngine implements TransferEngine {

    private static final Logger LOG = LoggerFactory.getLogger(ShmDirectEngine.class);

    private final BufferRegistry registry = new BufferRegistry();
    private final ShmTransport shm = new ShmTransport();
    private final HandshakeConfig config = HandshakeConfig.fromEnvironment();
    private final HandshakeClient client = new HandshakeClient(config);
    private final HandshakeService handshakes = new HandshakeService(this::descriptorJson, req -> "{}\n");
    private final Map<String, Long> idsByName = new ConcurrentHashMap<>();
    private final Map<Long, Peer> peers = new ConcurrentHashMap<>();
    private final AtomicLong nextId = new AtomicLong(1);
    private volatile HandshakeServer server;
    private volatile String segmentName;
    private volatile boolean closed;

    private record Peer(long id, String name, SegmentDescriptor descriptor) implements RemoteSegment {
        @Override
        public String machineId() {
            ShmAdvert.Peer p = ShmAdvert.peerOf(descriptor);
            return p == null ? null : p.machine().toString();
        }

        @Override
        public boolean sameMachine() {
            ShmAdvert.Peer p = ShmAdvert.peerOf(descriptor);
            return p != null && p.machine().equals(MachineIdentity.local());
        }

        @Override
        public boolean isMooncake4j() {
            return !descriptor.extensions().isEmpty();
        }

        @Override
        public SegmentDescriptor.Buffer buffer(long addr, long len) {
            for (SegmentDescriptor.Buffer b : descriptor.buffers()) {
                if (b.contains(addr, len)) {
                    return b;
                }
            }
            return null;
        }
    }

    @Override
    public synchronized int initialize(String localHostname, String metadataServer, String protocol,
            String deviceName) {
        if (closed || server != null || !P2P_HANDSHAKE.equals(metadataServer) || localHostname == null
                || localHostname.isBlank()) {
            LOG.error("initialize: needs a fresh engine, metadata server {} and a host name", P2P_HANDSHAKE);
            return -1;
        }
        try {
            shm.install(null);
            String host = PeerAddress.parse(localHostname.trim(), config.defaultPort()).host();
            server = HandshakeServer.start(config, handshakes::handle);
            segmentName = PeerAddress.format(host, server.port());
            return 0;
        } catch (TransportException | IOException e) {
            LOG.error("initialize: {}", e.getMessage());
            shm.uninstall();
            return -1;
        }
    }

    private String descriptorJson() {
        List<long[]> bufs = new ArrayList<>();
        for (BufferRegistry.Buffer b : registry.snapshot()) {
            bufs.add(new long[] {b.address(), b.length()});
        }
        return ExtensionDescriptors.describe(segmentName, 0, bufs, shm).toJson();
    }

    @Override
    public int getRpcPort() {
        HandshakeServer s = server;
        return s == null ? 0 : s.port();
    }

    @Override
    public String getLocalSegmentName() {
        return segmentName;
    }

    @Override
    public String protocol() {
        return server == null ? null : "shm";
    }

    @Override
    public synchronized int registerMemory(long address, long length, String location) {
        int rc = registry.register(address, length, location);
        if (rc == 0) {
            rc = shm.registerBuffers(List.of(LocalBuffer.of(address, length, location)));
            if (rc != 0) {
                registry.unregister(address);
            }
        }
        return rc;
    }

    @Override
    public synchronized int batchRegisterMemory(long[] addresses, long[] lengths) {
        for (int i = 0; i < addresses.length; i++) {
            int rc = registerMemory(addresses[i], lengths[i], "*");
            if (rc != 0) {
                for (int j = 0; j < i; j++) {
                    unregisterMemory(addresses[j]);
                }
                return rc;
            }
        }
        return 0;
    }

    @Override
    public synchronized int unregisterMemory(long address) {
        BufferRegistry.Buffer b = registry.byBase(address);
        if (b == null) {
            return ErrorCodes.ADDRESS_NOT_REGISTERED;
        }
        shm.unregisterBuffers(List.of(LocalBuffer.of(b.address(), b.length(), b.location())));
        return registry.unregister(address);
    }

    @Override
    public int batchUnregisterMemory(long[] addresses) {
        int rc = 0;
        for (long a : addresses) {
            int r = unregisterMemory(a);
            rc = rc == 0 ? r : rc;
        }
        return rc;
    }

    @Override
    public long openSegment(String name) {
        String n = EngineCalls.normalizedSegmentName(name);
        if (closed || server == null || n == null) {
            return -1;
        }
        if (n.equals(segmentName)) {
            return 0;
        }
        Long id = idsByName.get(n);
        if (id != null) {
            return id;
        }
        try {
            SegmentDescriptor d = client.fetchDescriptor(PeerAddress.parse(n, config.defaultPort()), "{}\n");
            long fresh = nextId.getAndIncrement();
            peers.put(fresh, new Peer(fresh, n, d));
            Long raced = idsByName.putIfAbsent(n, fresh);
            if (raced != null) {
                peers.remove(fresh);
                return raced;
            }
            return fresh;
        } catch (RuntimeException e) {
            LOG.warn("openSegment({}): {}", n, e.getMessage());
            return -1;
        }
    }

    @Override
    public long getFirstBufferAddress(String segmentName) {
        long id = openSegment(segmentName);
        Peer p = id > 0 ? peers.get(id) : null;
        return p == null || p.descriptor().buffers().isEmpty() ? -1 : p.descriptor().buffers().get(0).addr();
    }

    @Override
    public int batchTransferSyncWrite(String targetSession, long[] src, long[] dst, long[] lengths) {
        return sync(true, targetSession, src, dst, lengths);
    }

    @Override
    public int batchTransferSyncRead(String targetSession, long[] local, long[] remote, long[] lengths) {
        return sync(false, targetSession, local, remote, lengths);
    }

    private int sync(boolean write, String target, long[] local, long[] remote, long[] lengths) {
        if (closed || local == null || remote == null || lengths == null || local.length != remote.length
                || local.length != lengths.length) {
            return -1;
        }
        long id = openSegment(target);
        Peer peer = id > 0 ? peers.get(id) : null;
        if (peer == null) {
            return -1;
        }
        int n = local.length;
        LocalBuffer[] lb = new LocalBuffer[n];
        for (int i = 0; i < n; i++) {
            BufferRegistry.Buffer b = registry.find(local[i], lengths[i]);
            SegmentDescriptor.Buffer rb = lengths[i] <= 0 ? null : peer.buffer(remote[i], lengths[i]);
            if (b == null || rb == null) {
                return -1; // outside registered or advertised memory
            }
            lb[i] = LocalBuffer.of(b.address(), b.length(), b.location());
            if (!shm.canTransfer(peer, lb[i], rb)) {
                return -1;
            }
        }
        Slices s = new Slices(write, local, remote, lengths, lb);
        shm.submit(peer, s);
        return s.failed ? -1 : 0;
    }

    /** One synchronous call's slices; shm ends them on this thread. */
    private static final class Slices implements SliceGroup {
        private final boolean write;
        private final long[] local;
        private final long[] remote;
        private final long[] lengths;
        private final LocalBuffer[] buffers;
        boolean failed;

        Slices(boolean write, long[] local, long[] remote, long[] lengths, LocalBuffer[] buffers) {
            this.write = write;
            this.local = local;
            this.remote = remote;
            this.lengths = lengths;
            this.buffers = buffers;
        }

        @Override
        public int size() {
            return local.length;
        }

        @Override
        public boolean isWrite(int i) {
            return write;
        }

        @Override
        public long local(int i) {
            return local[i];
        }

        @Override
        public long remote(int i) {
            return remote[i];
        }

        @Override
        public long length(int i) {
            return lengths[i];
        }

        @Override
        public LocalBuffer localBuffer(int i) {
            return buffers[i];
        }

        @Override
        public void complete(int i) {}

        @Override
        public void fail(int i, SliceFailure failure, String why) {
            if (!failed) {
                LOG.warn("shm slice failed ({}): {}", failure, why);
            }
            failed = true;
        }

        @Override
        public boolean aborted() {
            return false;
        }
    }

    @Override
    public long allocateBatchId(int capacity) {
        return ErrorCodes.INVALID_ARGUMENT; // synchronous calls only; see the class comment
    }

    @Override
    public int submitTransfer(long batchId, List<TransferRequest> requests) {
        return StatusCodes.INVALID_ARGUMENT;
    }

    @Override
    public TransferStatus getTransferStatus(long batchId, int taskIndex) {
        return TransferStatus.invalid(StatusCodes.INVALID_ARGUMENT);
    }

    @Override
    public int freeBatchId(long batchId) {
        return StatusCodes.INVALID_ARGUMENT;
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        HandshakeServer s = server;
        if (s != null) {
            s.close();
        }
        shm.uninstall();
        for (Peer p : peers.values()) {
            shm.forget(p);
        }
    }
}
