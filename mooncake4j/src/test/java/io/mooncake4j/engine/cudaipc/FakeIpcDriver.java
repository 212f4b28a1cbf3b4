package io.mooncake4j.engine.cudaipc;

import io.mooncake4j.memory.fake.FakeDeviceMemory;
import java.lang.foreign.MemorySegment;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A fake {@link IpcDriver} for machines without a GPU: one instance is one "process" on a
 * {@link Machine}, whose GPUs are a {@link FakeDeviceMemory} (addresses the host cannot touch,
 * bytes in a host backing). A process owns the allocations the test gives it ({@link #own});
 * exporting one files a random 64-byte handle with the machine; another process opening it gets a
 * fresh alias address range (never mapped: only this fake's copy resolves it), so a transport that
 * got the base or offset arithmetic wrong copies the wrong bytes or is refused. Copies resolve both
 * addresses (an own allocation or a live alias) and refuse anything else, recording a violation:
 * copies through a closed alias are caught that way. Failures can be injected. Thread-safe.
 */
public final class FakeIpcDriver implements IpcDriver {

    /** The machine: its GPUs and the handles exported on it. */
    public static final class Machine {
        final FakeDeviceMemory memory;
        final int devices;
        final Map<String, Exported> exported = new ConcurrentHashMap<>();
        final AtomicLong nextAlias = new AtomicLong(0x5000_0000_0000L);

        /**
         * @param memory  the fake GPUs
         * @param devices how many of them
         */
        public Machine(FakeDeviceMemory memory, int devices) {
            this.memory = memory;
            this.devices = devices;
        }

        static String uuid(int device) {
            return String.format(Locale.ROOT, "GPU-fake0000-0000-0000-0000-%012d", device);
        }
    }

    record Exported(FakeIpcDriver owner, FakeDeviceMemory.DeviceBuffer buffer) {}

    /** An opened alias of another process's allocation. */
    record Alias(long base, long size, FakeDeviceMemory.DeviceBuffer target, int device) {}

    private final Machine machine;
    private final String token;
    private final List<FakeDeviceMemory.DeviceBuffer> own = new CopyOnWriteArrayList<>();
    private final Map<Long, Alias> aliases = new ConcurrentHashMap<>();
    private final List<String> violations = new CopyOnWriteArrayList<>();
    private final AtomicInteger opens = new AtomicInteger();
    private final AtomicInteger closes = new AtomicInteger();
    private final AtomicInteger copies = new AtomicInteger();
    private volatile String unavailable;
    private volatile String refuseOpen;
    private volatile Runnable duringCopy;
    private volatile boolean shutDown;

    /**
     * @param machine the machine this process runs on
     * @param name    the process's name (part of its token)
     */
    public FakeIpcDriver(Machine machine, String name) {
        this.machine = machine;
        this.token = "fake-" + name + "-" + HexFormat.of().formatHex(new SecureRandom().generateSeed(4));
    }

    /** This process owns {@code b} (its "cudaMalloc"). */
    public FakeIpcDriver own(FakeDeviceMemory.DeviceBuffer b) {
        own.add(b);
        return this;
    }

    /** {@link #unavailability()} answers {@code why} from now on. */
    public FakeIpcDriver unavailable(String why) {
        this.unavailable = why;
        return this;
    }

    /** Every open fails from now on, as in another container (null: opens work again). */
    public FakeIpcDriver refuseOpens(String why) {
        this.refuseOpen = why;
        return this;
    }

    /** Runs {@code r} inside every copy, after its addresses resolved and before its bytes move. */
    public FakeIpcDriver duringCopy(Runnable r) {
        this.duringCopy = r;
        return this;
    }

    /** Successful opens so far. */
    public int opens() {
        return opens.get();
    }

    /** Closes so far. */
    public int closes() {
        return closes.get();
    }

    /** Copies done so far. */
    public int copies() {
        return copies.get();
    }

    /** Aliases open now. */
    public int liveAliases() {
        return aliases.size();
    }

    /** Malformed calls refused so far (each described). */
    public List<String> violations() {
        return List.copyOf(violations);
    }

    /** Whether {@link #shutdown} ran. */
    public boolean shutDown() {
        return shutDown;
    }

    @Override
    public String unavailability() {
        return unavailable;
    }

    @Override
    public String processToken() {
        return token;
    }

    @Override
    public DeviceId device(int device) throws Failure {
        if (device < 0 || device >= machine.devices) {
            throw new Failure("cuDeviceGet(" + device + ")", 101, "CUDA_ERROR_INVALID_DEVICE");
        }
        return new DeviceId(Machine.uuid(device), String.format(Locale.ROOT, "0000:%02x:00.0", 0x10 + device));
    }

    private FakeDeviceMemory.DeviceBuffer ownAt(long address) {
        for (FakeDeviceMemory.DeviceBuffer b : own) {
            if (Long.compareUnsigned(address - b.address(), b.byteSize()) < 0) {
                return b;
            }
        }
        return null;
    }

    @Override
    public Range allocation(int device, long address) throws Failure {
        FakeDeviceMemory.DeviceBuffer b = ownAt(address);
        if (b == null || b.device() != device) {
            throw new Failure(String.format(Locale.ROOT, "cuMemGetAddressRange(0x%x)", address), 1,
                    "CUDA_ERROR_INVALID_VALUE");
        }
        return new Range(b.address(), b.byteSize());
    }

    @Override
    public byte[] exportHandle(int device, long base) throws Failure {
        FakeDeviceMemory.DeviceBuffer b = ownAt(base);
        if (b == null || b.address() != base || b.device() != device) {
            violations.add(String.format(Locale.ROOT, "export of 0x%x, not an allocation base on cuda:%d", base, device));
            throw new Failure(String.format(Locale.ROOT, "cuIpcGetMemHandle(0x%x)", base), 1, "CUDA_ERROR_INVALID_VALUE");
        }
        byte[] h = new byte[HANDLE_BYTES];
        new SecureRandom().nextBytes(h);
        machine.exported.put(HexFormat.of().formatHex(h), new Exported(this, b));
        return h;
    }

    @Override
    public long open(int device, byte[] handle) throws Failure {
        String why = refuseOpen;
        if (why != null) {
            throw new Failure("cuIpcOpenMemHandle(cuda:" + device + ")", 205, why);
        }
        if (device < 0 || device >= machine.devices) {
            throw new Failure("cuIpcOpenMemHandle(cuda:" + device + ")", 101, "CUDA_ERROR_INVALID_DEVICE");
        }
        Exported e = machine.exported.get(HexFormat.of().formatHex(handle));
        if (e == null) {
            throw new Failure("cuIpcOpenMemHandle(cuda:" + device + ")", 1, "CUDA_ERROR_INVALID_VALUE");
        }
        if (e.owner() == this) {
            throw new Failure("cuIpcOpenMemHandle(cuda:" + device + ")", 201, "CUDA_ERROR_INVALID_CONTEXT");
        }
        for (Alias a : aliases.values()) {
            if (a.target() == e.buffer() && a.device() == device) { // as CUDA: one mapping per context
                violations.add("the same handle opened twice in one context");
                throw new Failure("cuIpcOpenMemHandle(cuda:" + device + ")", 208, "CUDA_ERROR_ALREADY_MAPPED");
            }
        }
        long base = machine.nextAlias.getAndAdd(1L << 36);
        aliases.put(base, new Alias(base, e.buffer().byteSize(), e.buffer(), device));
        opens.incrementAndGet();
        return base;
    }

    @Override
    public void close(int device, long mapped) throws Failure {
        Alias a = aliases.remove(mapped);
        if (a == null || a.device() != device) {
            violations.add(String.format(Locale.ROOT, "close of 0x%x on cuda:%d, not an open alias", mapped, device));
            throw new Failure("cuIpcCloseMemHandle", 1, "CUDA_ERROR_INVALID_VALUE");
        }
        closes.incrementAndGet();
    }

    /** The backing of {@code [address, address + bytes)}: an own allocation or a live alias; null when neither. */
    private MemorySegment resolve(long address, long bytes) {
        FakeDeviceMemory.DeviceBuffer b = ownAt(address);
        if (b != null) {
            return address - b.address() <= b.byteSize() - bytes
                    ? machine.memory.hostView(address).reinterpret(bytes) : null;
        }
        for (Alias a : aliases.values()) {
            long off = address - a.base();
            if (Long.compareUnsigned(off, a.size()) < 0) {
                return off <= a.size() - bytes ? machine.memory.hostView(a.target().address() + off).reinterpret(bytes)
                        : null;
            }
        }
        return null;
    }

    @Override
    public void copy(int device, long dst, long src, long bytes) throws Failure {
        MemorySegment d = resolve(dst, bytes);
        MemorySegment s = resolve(src, bytes);
        if (d == null || s == null) {
            violations.add(String.format(Locale.ROOT, "copy of %d B 0x%x -> 0x%x on cuda:%d: %s is neither own "
                    + "memory nor an open alias", bytes, src, dst, device, d == null ? "dst" : "src"));
            throw new Failure("cuMemcpyAsync", 1, "CUDA_ERROR_INVALID_VALUE");
        }
        Runnable r = duringCopy;
        if (r != null) {
            r.run();
        }
        MemorySegment.copy(s, 0, d, 0, bytes);
        copies.incrementAndGet();
    }

    @Override
    public void shutdown() {
        shutDown = true;
    }
}
