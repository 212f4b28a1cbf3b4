package io.mooncake4j.memory;

import java.util.Locale;
import java.util.Objects;

/**
 * Bulk copies between host memory and the memory of one device for tools and the simulator (not
 * the transport's data path): copies are enqueued on one {@link DeviceMemory.CopyQueue}, opened on
 * first use, and waited for with {@link #await(int)} or {@link #synchronize()}. A failed copy
 * throws {@link IllegalStateException} naming the copy and the implementation's error code.
 *
 * <p>One owner thread at a time (the queue has one owner); {@link #close()} waits for outstanding
 * copies. The host side of every copy must stay alive until the copy was waited for.
 */
public final class DeviceCopier implements AutoCloseable {

    private final DeviceMemory memory;
    private final int device;
    private final int events;
    private DeviceMemory.CopyQueue queue;
    private boolean closed;

    /**
     * A copier for {@code device} of {@code memory} with {@code events} completion points
     * (indices {@code 0..events-1} for {@link #record} and {@link #await}).
     *
     * @param memory the device memory
     * @param device the GPU index
     * @param events the number of completion points
     */
    public DeviceCopier(DeviceMemory memory, int device, int events) {
        this.memory = Objects.requireNonNull(memory, "memory");
        if (device < 0 || events < 1) {
            throw new IllegalArgumentException("need a device >= 0 and at least one event, got " + device + ", "
                    + events);
        }
        this.device = device;
        this.events = events;
    }

    /** {@return the device} */
    public int device() {
        return device;
    }

    private DeviceMemory.CopyQueue queue() {
        if (closed) {
            throw new IllegalStateException("copier for device " + device + " is closed");
        }
        if (queue == null) {
            queue = memory.openQueue(device, events);
        }
        return queue;
    }

    /**
     * Enqueues a copy of {@code bytes} from host address {@code src} to device address {@code dst}.
     *
     * @param dst   the destination address
     * @param src   the source address
     * @param bytes the size in bytes
     */
    public void toDevice(long dst, long src, long bytes) {
        enqueue(dst, src, bytes, DeviceMemory.Direction.HOST_TO_DEVICE);
    }

    /**
     * Enqueues a copy of {@code bytes} from device address {@code src} to host address {@code dst}.
     *
     * @param dst   the destination address
     * @param src   the source address
     * @param bytes the size in bytes
     */
    public void toHost(long dst, long src, long bytes) {
        enqueue(dst, src, bytes, DeviceMemory.Direction.DEVICE_TO_HOST);
    }

    private void enqueue(long dst, long src, long bytes, DeviceMemory.Direction dir) {
        if (bytes == 0) {
            return;
        }
        int rc = queue().copyAsync(dst, src, bytes, dir);
        check(rc, String.format(Locale.ROOT, "enqueueing a %s copy of %d bytes 0x%x -> 0x%x", dir, bytes, src, dst));
    }

    /**
     * Marks completion point {@code event} after the copies enqueued so far.
     *
     * @param event the completion point
     */
    public void record(int event) {
        check(queue().record(event), "recording event " + event);
    }

    /**
     * Waits for the copies before completion point {@code event}.
     *
     * @param event the completion point
     */
    public void await(int event) {
        check(queue().await(event), "waiting for event " + event);
    }

    /** Waits for every copy enqueued so far. */
    public void synchronize() {
        if (queue != null) {
            check(queue.synchronize(), "waiting for the copies");
        }
    }

    private void check(int rc, String what) {
        if (rc != DeviceMemory.OK) {
            throw new IllegalStateException(String.format(Locale.ROOT, "%s on %s device %d failed with error %d",
                    what, memory.name(), device, rc));
        }
    }

    /** Waits for outstanding copies and releases the queue; idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (queue != null) {
            queue.close();
        }
    }
}
