package io.mooncake4j.engine.tcp;

import io.mooncake4j.engine.BufferRegistry;
import io.mooncake4j.engine.BufferRegistry.Buffer;
import io.mooncake4j.engine.ErrorCodes;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The registered memory of one engine, shared by its initiator lanes, its target sessions and
 * its local copies: the {@link BufferRegistry}, a generation counter that invalidates cached
 * {@link ByteBuffer} views, and use tracking that keeps unregistration from freeing memory a
 * thread is still reading or writing.
 *
 * <p><b>Use protocol.</b> A thread that touches registered memory owns a {@link Slot}. Before
 * touching buffer {@code b} it publishes {@code b} in the slot and then re-checks that {@code b}
 * is still registered ({@link Slot#enter}); afterwards it clears the slot. {@link #unregister}
 * removes the buffer from the registry first and then waits until no slot holds it; both sides
 * use volatile accesses, so either the user sees the removal or the unregistering thread sees
 * the use (Dekker). A use that outlasts the wait is aborted through the slot's abort action
 * (closing its socket), which makes the blocked I/O return.
 *
 * <p>Thread-safe.
 */
@SuppressWarnings("restricted") // reinterpret: views of registered native memory (native access is enabled)
final class LocalMemory {

    private static final Logger LOG = LoggerFactory.getLogger(LocalMemory.class);
    /** Largest view a {@link ByteBuffer} can hold comfortably; registered buffers are viewed in chunks of this. */
    static final long CHUNK = 1L << 30;
    /** The whole address space, for allocation-free {@link MemorySegment#copy} of local transfers. */
    static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    final BufferRegistry registry = new BufferRegistry();
    private final AtomicLong generation = new AtomicLong();
    private final Set<Slot> slots = ConcurrentHashMap.newKeySet();
    private final long unregisterWaitNanos;
    /** GPU memory access and bounce buffers for buffers at {@code cuda:N}. */
    final DeviceStaging staging;

    LocalMemory(long unregisterWaitNanos, DeviceStaging staging) {
        this.unregisterWaitNanos = unregisterWaitNanos;
        this.staging = staging;
    }

    /** One thread's claim on up to two buffers. */
    final class Slot implements AutoCloseable {
        private volatile Buffer a;
        private volatile Buffer b;
        private final Runnable abort;

        private Slot(Runnable abort) {
            this.abort = abort;
        }

        /**
         * Claims {@code buf} in position 0 or 1 and re-checks its registration; returns false (and
         * releases the claim) when it was unregistered meanwhile.
         */
        boolean enter(int pos, Buffer buf) {
            if (pos == 0) {
                a = buf;
            } else {
                b = buf;
            }
            if (registry.byBase(buf.address()) != buf) {
                exit(pos);
                return false;
            }
            return true;
        }

        void exit(int pos) {
            if (pos == 0) {
                a = null;
            } else {
                b = null;
            }
        }

        boolean uses(Buffer buf) {
            return a == buf || b == buf;
        }

        @Override
        public void close() {
            a = null;
            b = null;
            slots.remove(this);
        }
    }

    /** A new slot; {@code abort} makes the owner's blocked I/O fail (e.g. closes its socket). */
    Slot slot(Runnable abort) {
        Slot s = new Slot(abort);
        slots.add(s);
        return s;
    }

    long generation() {
        return generation.get();
    }

    int register(long[] addrs, long[] lens, String[] locations) {
        int rc = registry.registerBatch(addrs, lens, locations);
        if (rc == 0) {
            generation.incrementAndGet();
        }
        return rc;
    }

    /**
     * Unregisters the buffers based at {@code addrs} (all or none), then waits until no thread
     * uses them; uses that outlast the wait are aborted.
     */
    int unregister(long[] addrs) {
        Buffer[] removed = new Buffer[addrs.length];
        synchronized (registry) {
            for (int i = 0; i < addrs.length; i++) {
                removed[i] = registry.byBase(addrs[i]);
                if (removed[i] == null) {
                    return ErrorCodes.ADDRESS_NOT_REGISTERED;
                }
            }
            for (long a : addrs) {
                registry.unregister(a);
            }
            generation.incrementAndGet();
        }
        for (Buffer buf : removed) {
            awaitUnused(buf);
        }
        return ErrorCodes.OK;
    }

    private void awaitUnused(Buffer buf) {
        long deadline = System.nanoTime() + unregisterWaitNanos;
        boolean aborted = false;
        while (true) {
            boolean busy = false;
            for (Slot s : slots) {
                if (s.uses(buf)) {
                    busy = true;
                    if (aborted) {
                        continue;
                    }
                    if (System.nanoTime() > deadline) {
                        LOG.warn("unregister of 0x{} waited {} ms for transfers using it; aborting them",
                                Long.toHexString(buf.address()), TimeUnit.NANOSECONDS.toMillis(unregisterWaitNanos));
                        s.abort.run();
                    }
                }
            }
            if (!busy) {
                return;
            }
            if (!aborted && System.nanoTime() > deadline) {
                aborted = true;
                deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            } else if (aborted && System.nanoTime() > deadline) {
                throw new IllegalStateException("buffer 0x" + Long.toHexString(buf.address())
                        + " still in use 30 s after aborting its transfers");
            }
            LockSupport.parkNanos(100_000);
        }
    }

    /**
     * Per-thread cache of {@link ByteBuffer} views of registered buffers, so the data path does not
     * allocate per descriptor. Not thread-safe: one per owning thread.
     */
    static final class Views {
        private final LocalMemory mem;
        private final IdentityHashMap<Buffer, ByteBuffer[]> cache = new IdentityHashMap<>();
        private long gen = -1;

        Views(LocalMemory mem) {
            this.mem = mem;
        }

        /**
         * A view of {@code buf} positioned at {@code addr}, limited to {@code addr+len} or the end of
         * the chunk holding {@code addr}, whichever comes first. Callers loop for ranges crossing a
         * 1 GiB chunk boundary.
         */
        ByteBuffer view(Buffer buf, long addr, long len) {
            long g = mem.generation();
            if (g != gen) {
                cache.clear();
                gen = g;
            }
            ByteBuffer[] chunks = cache.get(buf);
            if (chunks == null) {
                int n = (int) ((buf.length() + CHUNK - 1) / CHUNK);
                chunks = new ByteBuffer[n];
                for (int i = 0; i < n; i++) {
                    long off = i * CHUNK;
                    chunks[i] = MemorySegment.ofAddress(buf.address() + off)
                            .reinterpret(Math.min(CHUNK, buf.length() - off)).asByteBuffer();
                }
                cache.put(buf, chunks);
            }
            long off = addr - buf.address();
            int idx = (int) (off / CHUNK);
            ByteBuffer v = chunks[idx];
            int pos = (int) (off - idx * CHUNK);
            long lim = Math.min((long) pos + len, v.capacity());
            v.limit((int) lim).position(pos);
            return v;
        }
    }
}
