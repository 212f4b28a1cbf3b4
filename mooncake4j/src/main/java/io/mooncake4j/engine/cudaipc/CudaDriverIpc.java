package io.mooncake4j.engine.cudaipc;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.mooncake4j.memory.cuda.CudaAvailability;
import io.mooncake4j.memory.cuda.CudaUnavailableException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * {@link IpcDriver} over the CUDA driver API, called through the FFM API on {@code libcuda.so.1}
 * (JCuda 12.6.0's runtime binding reaches {@code cudaIpc*} but hides the handle bytes in a private
 * field and has no allocation-range call; the driver API has both): {@code cuMemGetAddressRange},
 * {@code cuIpcGetMemHandle}, {@code cuIpcOpenMemHandle} (with
 * {@code CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}), {@code cuIpcCloseMemHandle}, {@code cuDeviceGetUuid},
 * {@code cuDeviceGetPCIBusId}, and copies as {@code cuMemcpyAsync} (unified addressing infers the
 * direction and crosses devices) on a stream of the local GPU, then {@code cuStreamSynchronize}.
 * Every call pushes the device's primary context (the one the CUDA runtime and
 * {@code cudaMalloc} use) onto the calling thread's context stack and pops it afterwards; the
 * context is retained once per device and released in {@link #shutdown}.
 *
 * <p>Nothing is linked before {@link #unavailability()} is asked, and only where
 * {@link CudaAvailability} found a GPU, so machines without one never load {@code libcuda.so.1}
 * through this class. <b>Not yet run on a GPU</b>: the symbol names and signatures follow
 * {@code cuda.h} (CUDA 12); {@code scripts/gpu-check.sh} is the check.
 *
 * <p>Thread-safe: streams come from a per-device pool (one per concurrent copy), contexts from a
 * map filled once per device.
 */
@SuppressWarnings("restricted") // deliberate FFM on libcuda.so.1
final class CudaDriverIpc implements IpcDriver {

    /** This JVM's token: random, so no other process has it. */
    private static final String PROCESS = UUID.randomUUID() + "/" + ProcessHandle.current().pid();
    /** {@code CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}. */
    private static final int LAZY_ENABLE_PEER_ACCESS = 1;
    /** {@code CU_STREAM_NON_BLOCKING}. */
    private static final int STREAM_NON_BLOCKING = 1;
    private static final MemoryLayout HANDLE = MemoryLayout.structLayout(
            MemoryLayout.sequenceLayout(HANDLE_BYTES, JAVA_BYTE).withName("reserved"));

    /** Lazily linked handles; a failure is recorded, never thrown. */
    private static final class Lib {
        static final MethodHandle INIT;            // (int flags) int
        static final MethodHandle DEVICE_GET;      // (int* dev, int ordinal) int
        static final MethodHandle CTX_RETAIN;      // (CUcontext* ctx, int dev) int
        static final MethodHandle CTX_RELEASE;     // (int dev) int
        static final MethodHandle CTX_PUSH;        // (CUcontext ctx) int
        static final MethodHandle CTX_POP;         // (CUcontext* ctx) int
        static final MethodHandle UUID_OF;         // (CUuuid* uuid, int dev) int
        static final MethodHandle PCI_BUS_ID;      // (char* id, int len, int dev) int
        static final MethodHandle ADDRESS_RANGE;   // (CUdeviceptr* base, size_t* size, CUdeviceptr p) int
        static final MethodHandle IPC_GET;         // (CUipcMemHandle* h, CUdeviceptr base) int
        static final MethodHandle IPC_OPEN;        // (CUdeviceptr* p, CUipcMemHandle h, unsigned flags) int
        static final MethodHandle IPC_CLOSE;       // (CUdeviceptr p) int
        static final MethodHandle STREAM_CREATE;   // (CUstream* s, unsigned flags) int
        static final MethodHandle STREAM_DESTROY;  // (CUstream s) int
        static final MethodHandle STREAM_SYNC;     // (CUstream s) int
        static final MethodHandle MEMCPY_ASYNC;    // (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) int
        static final MethodHandle ERROR_NAME;      // (int rc, const char** name) int
        static final String FAILURE;

        static {
            MethodHandle[] h = new MethodHandle[17];
            String failure = null;
            Module self = CudaDriverIpc.class.getModule();
            if (!self.isNativeAccessEnabled()) {
                failure = "native access is not enabled for " + (self.isNamed()
                        ? "module " + self.getName() + " (add --enable-native-access=" + self.getName() + ")"
                        : "the class path (add --enable-native-access=ALL-UNNAMED)");
            } else {
                try {
                    Linker linker = Linker.nativeLinker();
                    SymbolLookup cuda = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
                    List<String> missing = new ArrayList<>();
                    h[0] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, JAVA_INT), "cuInit");
                    h[1] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), "cuDeviceGet");
                    h[2] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT),
                            "cuDevicePrimaryCtxRetain");
                    h[3] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, JAVA_INT),
                            "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
                    h[4] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS),
                            "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
                    h[16] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS),
                            "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
                    h[5] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT),
                            "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
                    h[6] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT),
                            "cuDeviceGetPCIBusId");
                    h[7] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG),
                            "cuMemGetAddressRange_v2");
                    h[8] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG),
                            "cuIpcGetMemHandle");
                    h[9] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, HANDLE, JAVA_INT),
                            "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle");
                    h[10] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, JAVA_LONG), "cuIpcCloseMemHandle");
                    h[11] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), "cuStreamCreate");
                    h[12] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS),
                            "cuStreamDestroy_v2", "cuStreamDestroy");
                    h[13] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, ADDRESS), "cuStreamSynchronize");
                    h[14] = link(linker, cuda, missing,
                            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS), "cuMemcpyAsync");
                    h[15] = link(linker, cuda, missing, FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS), "cuGetErrorName");
                    if (!missing.isEmpty()) {
                        failure = "libcuda.so.1 lacks " + missing + " (driver too old for CUDA 12; upgrade it)";
                    }
                } catch (IllegalArgumentException e) {
                    failure = "libcuda.so.1 could not be loaded: " + e.getMessage();
                } catch (IllegalCallerException e) {
                    failure = "native access denied: " + e.getMessage();
                }
            }
            INIT = h[0];
            DEVICE_GET = h[1];
            CTX_RETAIN = h[2];
            CTX_RELEASE = h[3];
            CTX_PUSH = h[4];
            CTX_POP = h[16];
            UUID_OF = h[5];
            PCI_BUS_ID = h[6];
            ADDRESS_RANGE = h[7];
            IPC_GET = h[8];
            IPC_OPEN = h[9];
            IPC_CLOSE = h[10];
            STREAM_CREATE = h[11];
            STREAM_DESTROY = h[12];
            STREAM_SYNC = h[13];
            MEMCPY_ASYNC = h[14];
            ERROR_NAME = h[15];
            if (failure == null) {
                try {
                    int rc = (int) INIT.invokeExact(0);
                    if (rc != 0) {
                        failure = "cuInit(0) failed: " + rc;
                    }
                } catch (Throwable t) {
                    failure = "cuInit(0) failed: " + t;
                }
            }
            FAILURE = failure;
        }

        private static MethodHandle link(Linker linker, SymbolLookup lib, List<String> missing, FunctionDescriptor fd,
                String... names) {
            for (String n : names) {
                var s = lib.find(n);
                if (s.isPresent()) {
                    return linker.downcallHandle(s.get(), fd);
                }
            }
            missing.add(names[0]);
            return null;
        }
    }

    private final Map<Integer, Long> contexts = new ConcurrentHashMap<>();
    private final Map<Integer, ConcurrentLinkedQueue<Long>> streams = new ConcurrentHashMap<>();

    @Override
    public String unavailability() {
        CudaUnavailableException c = CudaAvailability.unavailabilityCause();
        if (c != null) {
            return c.getMessage();
        }
        return Lib.FAILURE;
    }

    @Override
    public String processToken() {
        return PROCESS;
    }

    /**
     * Pushes {@code device}'s primary context (retained once) onto this thread's context stack;
     * {@link #leave} pops it, so the caller's own current context (a runtime user's
     * {@code cudaSetDevice}) is what it was before.
     */
    private void enter(int device) throws Failure {
        try {
            Long ctx = contexts.get(device);
            if (ctx == null) {
                synchronized (contexts) {
                    ctx = contexts.get(device);
                    if (ctx == null) {
                        try (Arena a = Arena.ofConfined()) {
                            MemorySegment dev = a.allocate(JAVA_INT);
                            check("cuDeviceGet(" + device + ")", (int) Lib.DEVICE_GET.invokeExact(dev, device));
                            MemorySegment out = a.allocate(ADDRESS);
                            check("cuDevicePrimaryCtxRetain(" + device + ")",
                                    (int) Lib.CTX_RETAIN.invokeExact(out, dev.get(JAVA_INT, 0)));
                            ctx = out.get(ADDRESS, 0).address();
                            contexts.put(device, ctx);
                        }
                    }
                }
            }
            check("cuCtxPushCurrent(cuda:" + device + ")", (int) Lib.CTX_PUSH.invokeExact(MemorySegment.ofAddress(ctx)));
        } catch (Failure f) {
            throw f;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** Pops what {@link #enter} pushed. */
    private static void leave() {
        try (Arena a = Arena.ofConfined()) {
            int rc = (int) Lib.CTX_POP.invokeExact(a.allocate(ADDRESS));
            if (rc != 0) {
                org.slf4j.LoggerFactory.getLogger(CudaDriverIpc.class).warn("cuCtxPopCurrent failed: {}", errorName(rc));
            }
        } catch (Throwable t) {
            org.slf4j.LoggerFactory.getLogger(CudaDriverIpc.class).warn("cuCtxPopCurrent failed", t);
        }
    }

    @Override
    public DeviceId device(int device) throws Failure {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment dev = a.allocate(JAVA_INT);
            check("cuDeviceGet(" + device + ")", (int) Lib.DEVICE_GET.invokeExact(dev, device));
            int d = dev.get(JAVA_INT, 0);
            MemorySegment uuid = a.allocate(16);
            check("cuDeviceGetUuid(" + device + ")", (int) Lib.UUID_OF.invokeExact(uuid, d));
            MemorySegment pci = a.allocate(64);
            int rc = (int) Lib.PCI_BUS_ID.invokeExact(pci, 64, d);
            return new DeviceId(uuidText(uuid.toArray(JAVA_BYTE)), rc == 0 ? pci.getString(0) : "");
        } catch (Failure f) {
            throw f;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** {@code GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}, as {@code nvidia-smi -L} prints it. */
    static String uuidText(byte[] b) {
        String h = HexFormat.of().formatHex(b);
        return "GPU-" + h.substring(0, 8) + "-" + h.substring(8, 12) + "-" + h.substring(12, 16) + "-"
                + h.substring(16, 20) + "-" + h.substring(20, 32);
    }

    @Override
    public Range allocation(int device, long address) throws Failure {
        return inContext(device, a -> {
            MemorySegment base = a.allocate(JAVA_LONG);
            MemorySegment size = a.allocate(JAVA_LONG);
            check(String.format(Locale.ROOT, "cuMemGetAddressRange(0x%x)", address),
                    (int) Lib.ADDRESS_RANGE.invokeExact(base, size, address));
            return new Range(base.get(JAVA_LONG, 0), size.get(JAVA_LONG, 0));
        });
    }

    @Override
    public byte[] exportHandle(int device, long base) throws Failure {
        return inContext(device, a -> {
            MemorySegment h = a.allocate(HANDLE);
            check(String.format(Locale.ROOT, "cuIpcGetMemHandle(0x%x)", base), (int) Lib.IPC_GET.invokeExact(h, base));
            return h.toArray(JAVA_BYTE);
        });
    }

    @Override
    public long open(int device, byte[] handle) throws Failure {
        if (handle.length != HANDLE_BYTES) {
            throw new Failure("cuIpcOpenMemHandle", -1, "a handle of " + handle.length + " bytes");
        }
        return inContext(device, a -> {
            MemorySegment h = a.allocate(HANDLE);
            h.copyFrom(MemorySegment.ofArray(handle));
            MemorySegment out = a.allocate(JAVA_LONG);
            check("cuIpcOpenMemHandle(cuda:" + device + ")",
                    (int) Lib.IPC_OPEN.invokeExact(out, h, LAZY_ENABLE_PEER_ACCESS));
            return out.get(JAVA_LONG, 0);
        });
    }

    @Override
    public void close(int device, long mapped) throws Failure {
        inContext(device, a -> {
            check(String.format(Locale.ROOT, "cuIpcCloseMemHandle(0x%x)", mapped), (int) Lib.IPC_CLOSE.invokeExact(mapped));
            return null;
        });
    }

    /** A driver call made with {@code device}'s primary context current, with a confined arena for its arguments. */
    @FunctionalInterface
    private interface DriverCall<T> {
        T run(Arena arena) throws Throwable;
    }

    /**
     * Runs {@code call} with {@code device}'s context current (the caller's restored after); a
     * throwable other than a Failure becomes one.
     */
    private <T> T inContext(int device, DriverCall<T> call) throws Failure {
        enter(device);
        try (Arena a = Arena.ofConfined()) {
            return call.run(a);
        } catch (Failure f) {
            throw f;
        } catch (Throwable t) {
            throw unexpected(t);
        } finally {
            leave();
        }
    }

    @Override
    public void copy(int device, long dst, long src, long bytes) throws Failure {
        enter(device);
        try {
            ConcurrentLinkedQueue<Long> pool = streams.computeIfAbsent(device, d -> new ConcurrentLinkedQueue<>());
            Long stream = pool.poll();
            try {
                if (stream == null) {
                    try (Arena a = Arena.ofConfined()) {
                        MemorySegment out = a.allocate(ADDRESS);
                        check("cuStreamCreate(cuda:" + device + ")", (int) Lib.STREAM_CREATE.invokeExact(out, STREAM_NON_BLOCKING));
                        stream = out.get(ADDRESS, 0).address();
                    }
                }
                MemorySegment s = MemorySegment.ofAddress(stream);
                check(String.format(Locale.ROOT, "cuMemcpyAsync(0x%x <- 0x%x, %d B)", dst, src, bytes),
                        (int) Lib.MEMCPY_ASYNC.invokeExact(dst, src, bytes, s));
                check("cuStreamSynchronize", (int) Lib.STREAM_SYNC.invokeExact(s));
                pool.add(stream);
                stream = null;
            } catch (Failure f) {
                throw f;
            } catch (Throwable t) {
                throw unexpected(t);
            } finally {
                if (stream != null) { // a failed copy: the stream may be in an error state, drop it
                    destroy(stream);
                }
            }
        } finally {
            leave();
        }
    }

    private static void destroy(long stream) {
        try {
            int rc = (int) Lib.STREAM_DESTROY.invokeExact(MemorySegment.ofAddress(stream));
            if (rc != 0) {
                org.slf4j.LoggerFactory.getLogger(CudaDriverIpc.class).debug("cuStreamDestroy: {}", rc);
            }
        } catch (Throwable t) {
            org.slf4j.LoggerFactory.getLogger(CudaDriverIpc.class).debug("cuStreamDestroy", t);
        }
    }

    @Override
    public void shutdown() {
        if (contexts.isEmpty()) {
            return; // nothing was ever linked or made
        }
        for (Map.Entry<Integer, ConcurrentLinkedQueue<Long>> e : streams.entrySet()) {
            try {
                enter(e.getKey());
            } catch (Failure f) {
                continue;
            }
            for (Long s; (s = e.getValue().poll()) != null;) {
                destroy(s);
            }
            leave();
        }
        synchronized (contexts) {
            for (Integer d : List.copyOf(contexts.keySet())) {
                try {
                    int rc = (int) Lib.CTX_RELEASE.invokeExact((int) d);
                    if (rc != 0) {
                        org.slf4j.LoggerFactory.getLogger(CudaDriverIpc.class).debug("cuDevicePrimaryCtxRelease: {}", rc);
                    }
                } catch (Throwable t) {
                    org.slf4j.LoggerFactory.getLogger(CudaDriverIpc.class).debug("cuDevicePrimaryCtxRelease", t);
                }
            }
            contexts.clear();
        }
    }

    private static void check(String call, int rc) throws Failure {
        if (rc != 0) {
            throw new Failure(call, rc, errorName(rc));
        }
    }

    private static String errorName(int rc) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            if ((int) Lib.ERROR_NAME.invokeExact(rc, out) == 0) {
                MemorySegment p = out.get(ADDRESS, 0);
                if (!p.equals(MemorySegment.NULL)) {
                    return p.reinterpret(256).getString(0);
                }
            }
        } catch (Throwable t) {
            // fall through to the number alone
        }
        return "CUresult";
    }

    private static Failure unexpected(Throwable t) {
        if (t instanceof Error e) {
            throw e;
        }
        return new Failure("a CUDA driver call", -1, t.toString());
    }
}
