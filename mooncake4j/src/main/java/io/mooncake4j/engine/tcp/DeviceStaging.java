package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.BufferRegistry.Buffer;
import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.MemoryLocation;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU-memory side of one TCP engine: its {@link DeviceMemory}, the staging settings, and the
 * {@link Stager}s. Lane threads own one stager each (created on their first GPU request, freed
 * when the thread ends); data-port sessions and local copies borrow one from a pool of
 * {@link StagingConfig#shared()} and wait when none is free (back-pressure on the socket).
 *
 * <p>Why lanes own theirs: a lane thread never waits for a stager, so every session holding a
 * pooled stager talks to a peer whose lane makes progress, and the pool cannot deadlock even when
 * two engines stage towards each other. Thread-safe.
 */
final class DeviceStaging implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(DeviceStaging.class);

    final DeviceMemory device;
    final StagingConfig config;
    private final Semaphore permits;
    private final ConcurrentLinkedQueue<Stager> idle = new ConcurrentLinkedQueue<>();
    private final Set<Stager> all = ConcurrentHashMap.newKeySet();
    private final Set<String> reported = ConcurrentHashMap.newKeySet();
    private final AtomicLong stagedBytes = new AtomicLong();
    private final AtomicLong copyFailures = new AtomicLong();
    private final AtomicLong borrowWaits = new AtomicLong();
    private volatile boolean closed;

    DeviceStaging(DeviceMemory device, StagingConfig config) {
        this.device = device;
        this.config = config;
        this.permits = new Semaphore(config.shared());
    }

    /** The GPU of a registered buffer, or -1 for host memory: one string check per request. */
    static int deviceOf(Buffer b) {
        String loc = b.location();
        return loc.startsWith("cuda:") ? MemoryLocation.index(loc) : -1;
    }

    /** A stager owned by the calling thread (a lane's); the owner closes it. */
    Stager own() {
        Stager s = new Stager(this, device, config);
        all.add(s);
        return s;
    }

    /** Closes a stager made by {@link #own()}. */
    void disown(Stager s) {
        if (s != null) {
            all.remove(s);
            s.close();
        }
    }

    /** Borrows a pooled stager, waiting while all are in use; null when the engine closes. */
    Stager borrow() {
        try {
            if (!permits.tryAcquire()) {
                borrowWaits.incrementAndGet();
                while (!permits.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    if (closed) {
                        return null;
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
        if (closed) {
            permits.release();
            return null;
        }
        Stager s = idle.poll();
        if (s == null) {
            try {
                s = new Stager(this, device, config);
            } catch (RuntimeException e) {
                permits.release();
                copyFailed("allocating bounce buffers: " + e.getMessage());
                return null;
            }
            all.add(s);
        }
        return s;
    }

    /** Returns a borrowed stager. */
    void release(Stager s) {
        idle.add(s);
        if (closed && idle.remove(s)) { // closed meanwhile: free it here (close() may have missed it)
            all.remove(s);
            s.close();
        }
        permits.release();
    }

    void staged(long bytes) {
        stagedBytes.addAndGet(bytes);
    }

    /** Counts a failed copy and logs each distinct failure once at WARN (later ones at DEBUG). */
    void copyFailed(String what) {
        copyFailures.incrementAndGet();
        if (reported.size() < 64 && reported.add(what)) {
            LOG.warn("GPU staging ({}): {}", device.name(), what);
        } else {
            LOG.debug("GPU staging ({}): {}", device.name(), what);
        }
    }

    long stagedBytes() {
        return stagedBytes.get();
    }

    long copyFailures() {
        return copyFailures.get();
    }

    long borrowWaits() {
        return borrowWaits.get();
    }

    /** Stagers alive (owned and pooled). */
    int stagers() {
        return all.size();
    }

    /**
     * Frees the idle pooled stagers; a stager still borrowed is freed when it is returned, and a
     * lane's own stager by its thread when it ends (so no copy can run on freed bounce buffers even
     * when a transfer races with the engine's close).
     */
    @Override
    public void close() {
        closed = true;
        Stager s;
        while ((s = idle.poll()) != null) {
            all.remove(s);
            s.close();
        }
    }
}
