package io.mooncake4j.engine.tcp;

import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.DeviceMemory.CopyQueue;
import io.mooncake4j.memory.DeviceMemory.Direction;
import io.mooncake4j.memory.HostMemoryStorage;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.Arrays;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Moves bytes between a socket and GPU memory through {@code depth} pinned host bounce buffers,
 * pipelined: while the socket sends chunk {@code i} from one buffer, the device-to-host copies of
 * the next chunks fill the others; while the socket receives chunk {@code i} into one buffer, the
 * host-to-device copy of chunk {@code i-1} drains another. Each buffer has a completion point on
 * the device's copy queue; a buffer is reused only after its copy completed.
 *
 * <pre>
 *  send (D2H):   queue  | D2H c0 | D2H c1 | D2H c2 | D2H c3 |        | D2H c4 | ...
 *                socket          | send c0 ------| send c1 | send c2 | send c3 | ...
 *  receive (H2D): socket | recv c0 | recv c1 | recv c2 | recv c3 | ...
 *                 queue            | H2D c0 | H2D c1 | H2D c2 | ...
 * </pre>
 *
 * <p>The engine never reads or writes device memory itself: every byte crosses a bounce buffer
 * through the {@link DeviceMemory} queue. Every method returns only after every copy it enqueued
 * has completed (also on failure), so neither device memory nor a bounce buffer is touched after
 * it returned. A queue whose copy failed is closed and reopened on next use.
 *
 * <p>Not thread-safe: one owner thread at a time (a lane thread owns one; data-port sessions and
 * local copies borrow from the engine's pool).
 */
final class Stager implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(Stager.class);

    /** Result: done. */
    static final int OK = 0;
    /** Result: the peer closed the connection inside the body. */
    static final int EOF = -1;
    /** Result: no copy queue could be opened (the cause was logged). */
    static final int NO_QUEUE = -2;

    private final DeviceMemory device;
    private final DeviceStaging owner;
    private final int depth;
    private final int chunk;
    private final HostMemoryStorage[] storages;
    private final ByteBuffer[] buffers;
    private final MemorySegment[] segments;
    private final long[] addresses;
    private CopyQueue[] queues = new CopyQueue[0];
    private boolean closed;

    Stager(DeviceStaging owner, DeviceMemory device, StagingConfig cfg) {
        this.owner = owner;
        this.device = device;
        this.depth = cfg.depth();
        this.chunk = cfg.bufferBytes();
        storages = new HostMemoryStorage[depth];
        buffers = new ByteBuffer[depth];
        segments = new MemorySegment[depth];
        addresses = new long[depth];
        try {
            for (int k = 0; k < depth; k++) {
                storages[k] = device.allocatePinned(chunk);
                segments[k] = storages[k].segment();
                buffers[k] = segments[k].asByteBuffer();
                addresses[k] = storages[k].address();
            }
        } catch (RuntimeException | Error e) {
            freeBuffers();
            throw e;
        }
    }

    int chunkBytes() {
        return chunk;
    }

    int depth() {
        return depth;
    }

    /** The copy queue of {@code dev}, opened on first use; null (logged) when it cannot be opened. */
    private CopyQueue queue(int dev) {
        if (dev >= queues.length) {
            queues = Arrays.copyOf(queues, dev + 1);
        }
        CopyQueue q = queues[dev];
        if (q == null) {
            try {
                q = device.openQueue(dev, depth);
            } catch (RuntimeException e) {
                owner.copyFailed("opening a copy queue on cuda:" + dev + ": " + e.getMessage());
                return null;
            }
            queues[dev] = q;
        }
        return q;
    }

    /** Drops a queue after a failed copy (it may be in an error state); it is reopened on next use. */
    private void discard(CopyQueue q, String what, int rc) {
        owner.copyFailed(what + " returned " + rc);
        for (int d = 0; d < queues.length; d++) {
            if (queues[d] == q) {
                queues[d] = null;
            }
        }
        try {
            q.close();
        } catch (RuntimeException e) {
            LOG.warn("closing a failed copy queue: {}", e.getMessage());
        }
    }

    /**
     * Sends {@code len} bytes of device {@code dev}'s memory at {@code src} to {@code ch}. Returns
     * {@link #OK}, {@link #NO_QUEUE} or a copy error; throws the socket's {@link IOException}
     * (after the outstanding copies completed).
     */
    int send(SocketChannel ch, int dev, long src, long len) throws IOException {
        CopyQueue q = queue(dev);
        if (q == null) {
            return NO_QUEUE;
        }
        long chunks = (len + chunk - 1) / chunk;
        long issued = 0;
        boolean clean = false;
        try {
            for (long c = 0; c < chunks; c++) {
                while (issued < chunks && issued < c + depth) {
                    int k = (int) (issued % depth);
                    long off = issued * chunk;
                    int rc = q.copyAsync(addresses[k], src + off, Math.min(chunk, len - off), Direction.DEVICE_TO_HOST);
                    if (rc == OK) {
                        rc = q.record(k);
                    }
                    if (rc != OK) {
                        q.synchronize();
                        clean = true;
                        discard(q, "device-to-host copy", rc);
                        return rc;
                    }
                    issued++;
                }
                int k = (int) (c % depth);
                int rc = q.await(k);
                if (rc != OK) {
                    q.synchronize();
                    clean = true;
                    discard(q, "device-to-host copy", rc);
                    return rc;
                }
                ByteBuffer b = buffers[k];
                b.clear().limit((int) Math.min(chunk, len - c * chunk));
                while (b.hasRemaining()) {
                    ch.write(b);
                }
            }
            clean = true;
            owner.staged(len);
            return OK;
        } finally {
            if (!clean) {
                q.synchronize(); // a socket error: let enqueued copies finish before the buffers are reused
            }
        }
    }

    /**
     * Receives {@code len} bytes into device {@code dev}'s memory at {@code dst}: first what
     * {@code in} (read mode, backed by {@code inSegment}) already holds, then from {@code ch}, never
     * reading beyond the body. Returns {@link #OK}, {@link #EOF}, {@link #NO_QUEUE} or a copy error;
     * throws the socket's {@link IOException}. Returns or throws only after every copy completed.
     */
    int receive(SocketChannel ch, ByteBuffer in, MemorySegment inSegment, int dev, long dst, long len)
            throws IOException {
        CopyQueue q = queue(dev);
        if (q == null) {
            return NO_QUEUE;
        }
        boolean clean = false;
        try {
            long done = 0;
            long c = 0;
            while (done < len) {
                int k = (int) (c % depth);
                if (c >= depth) { // buffer k still feeds the copy of chunk c - depth
                    int rc = q.await(k);
                    if (rc != OK) {
                        q.synchronize();
                        clean = true;
                        discard(q, "host-to-device copy", rc);
                        return rc;
                    }
                }
                int n = (int) Math.min(chunk, len - done);
                ByteBuffer b = buffers[k];
                b.clear().limit(n);
                int avail = in.remaining();
                if (avail > 0) {
                    int m = Math.min(avail, n);
                    MemorySegment.copy(inSegment, in.position(), segments[k], 0, m);
                    in.position(in.position() + m);
                    b.position(m);
                }
                while (b.hasRemaining()) {
                    if (ch.read(b) < 0) {
                        return EOF;
                    }
                }
                int rc = q.copyAsync(dst + done, addresses[k], n, Direction.HOST_TO_DEVICE);
                if (rc == OK) {
                    rc = q.record(k);
                }
                if (rc != OK) {
                    q.synchronize();
                    clean = true;
                    discard(q, "host-to-device copy", rc);
                    return rc;
                }
                done += n;
                c++;
            }
            int rc = q.synchronize();
            clean = true;
            if (rc != OK) {
                discard(q, "host-to-device copy", rc);
                return rc;
            }
            owner.staged(len);
            return OK;
        } finally {
            if (!clean) {
                q.synchronize();
            }
        }
    }

    /**
     * A copy within this process where at least one side is device memory: device-to-device,
     * host-to-device or device-to-host, on the queue of {@code dev}, waited for. Returns
     * {@link #OK}, {@link #NO_QUEUE} or the copy error.
     */
    int copy(int dev, long dst, long src, long len, Direction direction) {
        CopyQueue q = queue(dev);
        if (q == null) {
            return NO_QUEUE;
        }
        int rc = q.copyAsync(dst, src, len, direction);
        if (rc == OK) {
            rc = q.record(0);
        }
        int sync = q.synchronize();
        if (rc == OK) {
            rc = sync;
        }
        if (rc != OK) {
            discard(q, direction + " copy", rc);
        }
        return rc;
    }

    private void freeBuffers() {
        for (HostMemoryStorage s : storages) {
            if (s != null) {
                try {
                    s.close();
                } catch (RuntimeException e) {
                    LOG.warn("freeing a bounce buffer: {}", e.getMessage());
                }
            }
        }
    }

    /** Closes the queues (waiting for their copies) and frees the bounce buffers; idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (CopyQueue q : queues) {
            if (q != null) {
                try {
                    q.close();
                } catch (RuntimeException e) {
                    LOG.warn("closing a copy queue: {}", e.getMessage());
                }
            }
        }
        freeBuffers();
    }
}
