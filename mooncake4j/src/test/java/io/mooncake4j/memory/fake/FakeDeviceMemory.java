package io.mooncake4j.memory.fake;

import io.mooncake4j.memory.DeviceMemory;
import io.mooncake4j.memory.HostMemoryAllocator;
import io.mooncake4j.memory.HostMemoryStorage;
import io.mooncake4j.memory.MemoryLocation;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * A {@link DeviceMemory} for tests on machines without a GPU. "Device memory" is an address range
 * reserved with {@code mmap(PROT_NONE)}: the host cannot read or write it (a transport that touches
 * it directly gets {@code EFAULT} from a socket call or crashes the JVM), and only this fake's copy
 * queues reach the bytes, which live in a separate host backing segment. Copy queues execute their
 * copies in order on their own thread, optionally after an injected delay, so completion is truly
 * asynchronous; copies that are malformed (host side inside device memory, device side outside an
 * allocation or on another device's queue) are refused and recorded as violations; a failure can be
 * injected into the n-th copy of a direction.
 *
 * <p>Thread-safe; close it after the engines using it.
 */
@SuppressWarnings("restricted")
public final class FakeDeviceMemory implements DeviceMemory, AutoCloseable {

    /** cudaErrorInvalidValue, for malformed copies. */
    public static final int INVALID_VALUE = 1;
    /** cudaErrorIllegalAddress, for injected failures. */
    public static final int ILLEGAL_ADDRESS = 700;
    private static final int TIMED_OUT = 999;

    private static final MethodHandle MMAP;
    private static final MethodHandle MUNMAP;
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    static {
        Linker linker = Linker.nativeLinker();
        MMAP = linker.downcallHandle(linker.defaultLookup().find("mmap").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
        MUNMAP = linker.downcallHandle(linker.defaultLookup().find("munmap").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
    }

    private static final AtomicInteger QUEUE_SERIAL = new AtomicInteger();

    private final int devices;
    private final String unavailable;
    private final List<DeviceBuffer> allocations = new CopyOnWriteArrayList<>();
    private final HostMemoryAllocator pinned = new HostMemoryAllocator(MemoryLocation.cpu(0));
    private final AtomicInteger openQueues = new AtomicInteger();
    private final AtomicInteger queuesOpened = new AtomicInteger();
    private final AtomicLong pinnedAllocations = new AtomicLong();
    private final Map<Direction, AtomicLong> copies = new EnumMap<>(Direction.class);
    private final Map<Direction, AtomicLong> bytes = new EnumMap<>(Direction.class);
    private final AtomicLong maxOutstanding = new AtomicLong();
    private final List<String> violations = new CopyOnWriteArrayList<>();
    private volatile LongSupplier delayNanos = () -> 0;
    private final Object failureLock = new Object();
    private Direction failDirection; // guarded by failureLock
    private long failCountdown;      // guarded by failureLock

    /** A fake with {@code devices} GPUs. */
    public FakeDeviceMemory(int devices) {
        this(devices, null);
    }

    private FakeDeviceMemory(int devices, String unavailable) {
        this.devices = devices;
        this.unavailable = unavailable;
        for (Direction d : Direction.values()) {
            copies.put(d, new AtomicLong());
            bytes.put(d, new AtomicLong());
        }
    }

    /** A fake where device memory is unavailable for {@code reason} (the message of every refusal). */
    public static FakeDeviceMemory unavailable(String reason) {
        return new FakeDeviceMemory(0, reason);
    }

    // ------------------------------------------------------------------ test controls

    /** Delays every copy by what {@code nanos} answers (called on the queue thread per copy). */
    public FakeDeviceMemory withCopyDelay(LongSupplier nanos) {
        this.delayNanos = nanos;
        return this;
    }

    /** Fails the copy in {@code direction} that follows {@code successfulFirst} successful ones (once). */
    public void failCopy(Direction direction, long successfulFirst) {
        synchronized (failureLock) {
            failDirection = direction;
            failCountdown = successfulFirst;
        }
    }

    /** Copies executed in {@code d}. */
    public long copies(Direction d) {
        return copies.get(d).get();
    }

    /** Bytes copied in {@code d}. */
    public long bytes(Direction d) {
        return bytes.get(d).get();
    }

    /** Copies executed in every direction. */
    public long totalCopies() {
        long n = 0;
        for (AtomicLong a : copies.values()) {
            n += a.get();
        }
        return n;
    }

    /** The most copies ever enqueued on one queue and not yet executed: above 1 means copies were pipelined. */
    public long maxOutstanding() {
        return maxOutstanding.get();
    }

    public int openQueues() {
        return openQueues.get();
    }

    public int queuesOpened() {
        return queuesOpened.get();
    }

    /** Pinned bytes allocated and not freed. */
    public long pinnedBytesLive() {
        return pinned.allocatedBytes();
    }

    public long pinnedAllocations() {
        return pinnedAllocations.get();
    }

    /** Malformed copies refused so far (each described). */
    public List<String> violations() {
        return List.copyOf(violations);
    }

    /**
     * The test's view of fake device memory at {@code deviceAddress}: a zero-length segment at the
     * backing bytes (reinterpret it to the size needed); for assertions and set-up, never for an engine.
     */
    public MemorySegment hostView(long deviceAddress) {
        DeviceBuffer b = allocationOf(deviceAddress, 0);
        if (b == null) {
            throw new IllegalArgumentException(String.format(Locale.ROOT, "0x%x is not fake device memory",
                    deviceAddress));
        }
        return MemorySegment.ofAddress(b.backingAddress(deviceAddress));
    }

    /** Allocates {@code bytes} of fake memory on {@code device}, zeroed. */
    @Override
    public DeviceBuffer allocate(int device, long bytes) {
        if (unavailable != null) {
            throw new IllegalStateException(unavailable);
        }
        if (device < 0 || device >= devices) {
            throw new IllegalArgumentException("no fake device " + device);
        }
        long size = (bytes + 4095) & ~4095L;
        long base;
        try {
            // PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
            base = (long) MMAP.invokeExact(0L, size, 0, 0x02 | 0x20 | 0x4000, -1, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
        if (base == -1L || base == 0) {
            throw new IllegalStateException("mmap failed");
        }
        Arena arena = Arena.ofShared();
        MemorySegment backing = arena.allocate(bytes, 4096);
        DeviceBuffer b = new DeviceBuffer(base, bytes, size, device, arena, backing);
        allocations.add(b);
        return b;
    }

    /** Fake GPU memory: a {@code cuda:N} storage whose address the host cannot touch. */
    public final class DeviceBuffer implements Allocation {
        private final long base;
        private final long size;
        private final long reserved;
        private final int device;
        private final Arena arena;
        private final MemorySegment backing;
        private volatile boolean closed;

        private DeviceBuffer(long base, long size, long reserved, int device, Arena arena, MemorySegment backing) {
            this.base = base;
            this.size = size;
            this.reserved = reserved;
            this.device = device;
            this.arena = arena;
            this.backing = backing;
        }

        @Override
        public long address() {
            return base;
        }

        @Override
        public long byteSize() {
            return size;
        }

        @Override
        public String location() {
            return MemoryLocation.cuda(device);
        }

        @Override
        public int device() {
            return device;
        }

        /** The bytes, as the test (not the engine) sees them: what a cudaMemcpy from the test would read. */
        public MemorySegment contents() {
            return backing;
        }

        boolean containsReserved(long addr) {
            return Long.compareUnsigned(addr - base, reserved) < 0;
        }

        boolean spans(long addr, long len) {
            return len >= 0 && Long.compareUnsigned(addr, base) >= 0 && addr - base <= size - len;
        }

        long backingAddress(long addr) {
            return backing.address() + (addr - base);
        }

        @Override
        public synchronized void close() {
            if (closed) {
                return;
            }
            closed = true;
            allocations.remove(this);
            try {
                int rc = (int) MUNMAP.invokeExact(base, reserved);
                if (rc != 0) {
                    throw new IllegalStateException("munmap failed");
                }
            } catch (Throwable t) {
                throw new IllegalStateException(t);
            } finally {
                arena.close();
            }
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "FakeDeviceBuffer[0x%x, %d B, cuda:%d]", base, size, device);
        }
    }

    private DeviceBuffer allocationOf(long addr, long len) {
        for (DeviceBuffer b : allocations) {
            if (b.spans(addr, len)) {
                return b;
            }
        }
        return null;
    }

    private boolean inAnyReservation(long addr, long len) {
        for (DeviceBuffer b : allocations) {
            if (b.containsReserved(addr) || (len > 0 && b.containsReserved(addr + len - 1))
                    || (Long.compareUnsigned(addr, b.base) < 0 && Long.compareUnsigned(addr + len, b.base) > 0)) {
                return true;
            }
        }
        return false;
    }

    // ------------------------------------------------------------------ DeviceMemory

    @Override
    public String name() {
        return "fake";
    }

    @Override
    public boolean isAvailable() {
        return unavailable == null;
    }

    @Override
    public RuntimeException unavailabilityCause() {
        return unavailable == null ? null : new IllegalStateException(unavailable);
    }

    @Override
    public int deviceOf(long address) {
        for (DeviceBuffer b : allocations) {
            // inside [base, base + size): the first byte after a buffer may start the next mapping
            // (a host buffer mapped right above it), which is not device memory
            if (Long.compareUnsigned(address - b.base, b.size) < 0) {
                return b.device;
            }
        }
        return -1;
    }

    @Override
    public void checkLocation(String location) {
        MemoryLocation.validate(location);
        if (!MemoryLocation.isCuda(location)) {
            return;
        }
        if (unavailable != null) {
            throw new IllegalStateException("memory location '" + location + "' needs a GPU, but " + unavailable);
        }
        int d = MemoryLocation.index(location);
        if (d >= devices) {
            throw new IllegalStateException("GPU " + d + " does not exist: the fake has " + devices + " device(s)");
        }
    }

    @Override
    public CopyQueue openQueue(int device, int events) {
        checkLocation(MemoryLocation.cuda(device));
        openQueues.incrementAndGet();
        queuesOpened.incrementAndGet();
        return new Queue(device, events);
    }

    @Override
    public HostMemoryStorage allocatePinned(long bytes) {
        if (unavailable != null) {
            throw new IllegalStateException(unavailable);
        }
        pinnedAllocations.incrementAndGet();
        return pinned.allocate(bytes);
    }

    @Override
    public String summary() {
        return unavailable == null ? "fake device memory, " + devices + " device(s)" : unavailable;
    }

    /** Frees what the tests left allocated. */
    @Override
    public void close() {
        for (DeviceBuffer b : new ArrayList<>(allocations)) {
            b.close();
        }
        pinned.close();
    }

    // ------------------------------------------------------------------ queue

    private record Op(long seq, long dst, long src, long bytes, Direction dir) {}

    private static final Op STOP = new Op(-1, 0, 0, 0, null);

    /** Executes its copies in order on its own thread. */
    private final class Queue implements CopyQueue {
        private final int device;
        private final long[] eventAt;
        private final LinkedBlockingQueue<Op> ops = new LinkedBlockingQueue<>();
        private final Thread worker;
        private final Object monitor = new Object();
        private long submitted;                         // owner thread
        private volatile long executed;                 // worker thread
        private volatile long failedSeq = Long.MAX_VALUE;
        private volatile int failCode;
        private boolean closed;

        Queue(int device, int events) {
            this.device = device;
            this.eventAt = new long[events];
            worker = Thread.ofPlatform().daemon(true).name("mooncake-test-fakegpu-" + QUEUE_SERIAL.getAndIncrement())
                    .start(this::run);
        }

        private void run() {
            while (true) {
                Op op;
                try {
                    op = ops.take();
                } catch (InterruptedException e) {
                    return;
                }
                if (op == STOP) {
                    return;
                }
                if (failedSeq == Long.MAX_VALUE) {
                    long d = delayNanos.getAsLong();
                    if (d > 0) {
                        LockSupport.parkNanos(d); // emulated device time
                    }
                    if (shouldFail(op.dir)) {
                        failCode = ILLEGAL_ADDRESS;
                        failedSeq = op.seq;
                    } else {
                        execute(op);
                    }
                }
                synchronized (monitor) {
                    executed = op.seq;
                    monitor.notifyAll();
                }
            }
        }

        private void execute(Op op) {
            long dst = op.dst;
            long src = op.src;
            if (op.dir != Direction.HOST_TO_DEVICE) {
                src = allocationOf(op.src, op.bytes).backingAddress(op.src);
            }
            if (op.dir != Direction.DEVICE_TO_HOST) {
                dst = allocationOf(op.dst, op.bytes).backingAddress(op.dst);
            }
            MemorySegment.copy(ALL, src, ALL, dst, op.bytes);
            copies.get(op.dir).incrementAndGet();
            bytes.get(op.dir).addAndGet(op.bytes);
        }

        @Override
        public int device() {
            return device;
        }

        @Override
        public int events() {
            return eventAt.length;
        }

        @Override
        public int copyAsync(long dst, long src, long n, Direction direction) {
            if (closed) {
                throw new IllegalStateException("queue is closed");
            }
            String problem = validate(dst, src, n, direction);
            if (problem != null) {
                violations.add(problem);
                return INVALID_VALUE;
            }
            long seq = ++submitted;
            ops.add(new Op(seq, dst, src, n, direction));
            maxOutstanding.accumulateAndGet(seq - executed, Math::max);
            return OK;
        }

        private String validate(long dst, long src, long n, Direction dir) {
            if (n <= 0) {
                return "copy of " + n + " bytes";
            }
            boolean dstDev = dir != Direction.DEVICE_TO_HOST;
            boolean srcDev = dir != Direction.HOST_TO_DEVICE;
            DeviceBuffer sd = srcDev ? allocationOf(src, n) : null;
            DeviceBuffer dd = dstDev ? allocationOf(dst, n) : null;
            if (srcDev && (sd == null || sd.device != device)) {
                return String.format(Locale.ROOT, "%s: source 0x%x+%d is not device memory of cuda:%d", dir, src, n,
                        device);
            }
            if (dstDev && (dd == null || (dir == Direction.HOST_TO_DEVICE && dd.device != device))) {
                return String.format(Locale.ROOT, "%s: destination 0x%x+%d is not device memory of cuda:%d", dir, dst,
                        n, device);
            }
            if (!srcDev && (src == 0 || inAnyReservation(src, n))) {
                return String.format(Locale.ROOT, "%s: host source 0x%x+%d is device memory", dir, src, n);
            }
            if (!dstDev && (dst == 0 || inAnyReservation(dst, n))) {
                return String.format(Locale.ROOT, "%s: host destination 0x%x+%d is device memory", dir, dst, n);
            }
            return null;
        }

        @Override
        public int record(int event) {
            eventAt[event] = submitted;
            return OK;
        }

        private int statusAt(long seq) {
            if (failedSeq <= seq) {
                return failCode;
            }
            return executed >= seq ? OK : NOT_READY;
        }

        @Override
        public int poll(int event) {
            return statusAt(eventAt[event]);
        }

        @Override
        public int await(int event) {
            return awaitSeq(eventAt[event]);
        }

        private int awaitSeq(long seq) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            synchronized (monitor) {
                while (executed < seq) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        violations.add("await timed out");
                        return TIMED_OUT;
                    }
                    try {
                        TimeUnit.NANOSECONDS.timedWait(monitor, left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return TIMED_OUT;
                    }
                }
            }
            return statusAt(seq);
        }

        @Override
        public int synchronize() {
            return awaitSeq(submitted);
        }

        @Override
        public void close() {
            if (closed) {
                return;
            }
            synchronize();
            closed = true;
            ops.add(STOP);
            try {
                worker.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            openQueues.decrementAndGet();
        }
    }

    private boolean shouldFail(Direction dir) {
        synchronized (failureLock) {
            if (failDirection != dir) {
                return false;
            }
            if (failCountdown == 0) {
                failDirection = null;
                return true;
            }
            failCountdown--;
            return false;
        }
    }
}
