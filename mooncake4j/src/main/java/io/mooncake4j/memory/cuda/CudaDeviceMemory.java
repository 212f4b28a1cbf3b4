package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryLocation;
import java.util.Locale;

/**
 * {@link DeviceMemory} over CUDA: a queue is a non-blocking {@link CudaStream} with
 * {@link CudaEvent}s as completion points, device memory is detected with
 * {@link CudaPointers#deviceOf}, bounce buffers come from a {@link CudaPinnedHostAllocator}.
 * Without CUDA, {@link #isAvailable()} is false, {@link #deviceOf} answers -1 for every address,
 * and asking for a {@code cuda:N} location, a queue or pinned memory throws
 * {@link CudaUnavailableException} with the probe's cause and fix. Thread-safe.
 */
public final class CudaDeviceMemory implements DeviceMemory {

    /** The process-wide instance (CUDA state is process-wide). */
    public static final CudaDeviceMemory INSTANCE = new CudaDeviceMemory();

    private CudaPinnedHostAllocator pinned; // guarded by this, created on first use

    private CudaDeviceMemory() {}

    @Override
    public String name() {
        return "cuda";
    }

    @Override
    public boolean isAvailable() {
        return CudaAvailability.isAvailable();
    }

    @Override
    public RuntimeException unavailabilityCause() {
        return CudaAvailability.unavailabilityCause();
    }

    @Override
    public int deviceOf(long address) {
        return CudaPointers.deviceOf(address);
    }

    @Override
    public void checkLocation(String location) {
        CudaAvailability.checkLocation(location);
    }

    @Override
    public CopyQueue openQueue(int device, int events) {
        if (events < 1) {
            throw new IllegalArgumentException("a copy queue needs at least one completion point, got " + events);
        }
        CudaStream stream = CudaStream.create(device);
        CudaEvent[] ev = new CudaEvent[events];
        try {
            for (int i = 0; i < events; i++) {
                ev[i] = CudaEvent.create(device);
            }
        } catch (RuntimeException e) {
            for (CudaEvent x : ev) {
                if (x != null) {
                    x.close();
                }
            }
            stream.close();
            throw e;
        }
        return new Queue(stream, ev);
    }

    /** {@link CudaDeviceStorage#allocate(int, long)}: {@code cudaMalloc} on {@code device}. */
    @Override
    public CudaDeviceStorage allocate(int device, long bytes) {
        return CudaDeviceStorage.allocate(device, bytes);
    }

    @Override
    public HostMemoryStorage allocatePinned(long bytes) {
        CudaPinnedHostAllocator a;
        synchronized (this) {
            if (pinned == null) {
                pinned = new CudaPinnedHostAllocator(MemoryLocation.cpu(0));
            }
            a = pinned;
        }
        return a.allocate(bytes);
    }

    @Override
    public String summary() {
        return CudaAvailability.summary();
    }

    @Override
    public String toString() {
        return "CudaDeviceMemory[" + (isAvailable() ? CudaAvailability.deviceCount() + " device(s)" : "unavailable")
                + "]";
    }

    /** A CUDA stream and its events; one owner thread. */
    private static final class Queue implements CopyQueue {
        private final CudaStream stream;
        private final CudaEvent[] events;
        private boolean closed;

        Queue(CudaStream stream, CudaEvent[] events) {
            this.stream = stream;
            this.events = events;
        }

        @Override
        public int device() {
            return stream.device();
        }

        @Override
        public int events() {
            return events.length;
        }

        @Override
        public int copyAsync(long dst, long src, long bytes, Direction direction) {
            CudaCopyKind kind = switch (direction) {
                case HOST_TO_DEVICE -> CudaCopyKind.HOST_TO_DEVICE;
                case DEVICE_TO_HOST -> CudaCopyKind.DEVICE_TO_HOST;
                case DEVICE_TO_DEVICE -> CudaCopyKind.DEVICE_TO_DEVICE;
            };
            return stream.copyAsync(dst, src, bytes, kind);
        }

        @Override
        public int record(int event) {
            return events[event].record(stream);
        }

        @Override
        public int poll(int event) {
            return events[event].query();
        }

        @Override
        public int await(int event) {
            return events[event].synchronize();
        }

        @Override
        public int synchronize() {
            return stream.synchronize();
        }

        @Override
        public void close() {
            if (closed) {
                return;
            }
            closed = true;
            RuntimeException first = null;
            try {
                stream.close(); // waits for outstanding copies first
            } catch (RuntimeException e) {
                first = e;
            }
            for (CudaEvent e : events) {
                try {
                    e.close();
                } catch (RuntimeException x) {
                    if (first == null) {
                        first = x;
                    } else {
                        first.addSuppressed(x);
                    }
                }
            }
            if (first != null) {
                throw first;
            }
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "CudaCopyQueue[%s, %d events]", stream, events.length);
        }
    }
}
