package io.mooncake4j.store;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A value read into the client's registered staging memory, without a copy to the heap (Mooncake's
 * {@code get_buffer}): valid until closed. Close it promptly: it holds staging memory, and the
 * client's {@link MooncakeStoreClient#close} waits for open buffers as for calls in flight. Not
 * thread-safe for use after close.
 */
public final class StoreBuffer implements AutoCloseable {

    private final MemorySegment view;
    private final Runnable release;
    private final AtomicBoolean closed = new AtomicBoolean();

    StoreBuffer(MemorySegment view, Runnable release) {
        this.view = view.asReadOnly();
        this.release = release;
    }

    /** {@return the value's bytes in registered memory (read-only), valid until {@link #close}} */
    public MemorySegment segment() {
        check();
        return view;
    }

    /** {@return the value's size in bytes} */
    public long size() {
        return view.byteSize();
    }

    /** {@return a heap copy of the bytes} */
    public byte[] toArray() {
        check();
        return view.toArray(ValueLayout.JAVA_BYTE);
    }

    private void check() {
        if (closed.get()) {
            throw Args.invalid("the store buffer is closed");
        }
    }

    /** Gives the staging memory back; idempotent. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            release.run();
        }
    }
}
