package io.mooncake4j.memory.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Locale;
import java.util.Optional;

/**
 * Exports GPU memory as a Linux dma-buf file descriptor, for GPUDirect RDMA registration with
 * {@code ibv_reg_dmabuf_mr}: {@code cuMemGetHandleForAddressRange(&fd, dptr, size,
 * CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)} and {@code cuDeviceGetAttribute(...,
 * CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev)}.
 *
 * <p>JCuda 12.6.0 binds neither function, so they are called through the FFM API on
 * {@code libcuda.so.1} (the driver library the runtime already uses in this process). The
 * library is looked up the first time {@link #unavailability()} or another method is called,
 * never at class initialisation of anything else; a missing library, a missing symbol or native
 * access switched off is recorded as the reason and {@link #unavailability()} says it. Everything
 * is behind {@link CudaAvailability}: without CUDA this class reports that cause.
 *
 * <p>The exported range must be host-page aligned (the driver refuses anything else);
 * {@link #exportRange} aligns it and says where the requested address lies within. The caller
 * closes the descriptor ({@link #closeFd}) once the NIC has registered it: the registration keeps
 * its own reference to the buffer. Thread-safe (control path; each call allocates a little).
 */
@SuppressWarnings("restricted") // deliberate FFM: libcuda.so.1 and libc close(2), handles linked here
public final class CudaDmaBuf {

    /** {@code CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED} (cuda.h, CUDA 11.7+). */
    static final int ATTRIBUTE_DMA_BUF_SUPPORTED = 124;
    /** {@code CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD} (cuda.h). */
    static final int RANGE_HANDLE_TYPE_DMA_BUF_FD = 1;

    /** The library the driver API lives in. */
    public static final String LIBRARY = "libcuda.so.1";

    private CudaDmaBuf() {}

    /**
     * A range exported as a dma-buf: the descriptor, and the offset of the requested address
     * within the (page-aligned) exported range, which {@code ibv_reg_dmabuf_mr} takes as its
     * {@code offset}.
     *
     * @param fd     the dma-buf file descriptor; close it with {@link CudaDmaBuf#closeFd}
     * @param offset bytes from the start of the exported range to the requested address
     * @param base   the page-aligned start of the exported range
     * @param size   the page-aligned size of the exported range
     */
    public record Export(int fd, long offset, long base, long size) {}

    /** Lazily linked handles; their failure is recorded, never thrown. */
    private static final class Lib {
        static final MethodHandle INIT;               // CUresult cuInit(unsigned int)
        static final MethodHandle DEVICE_GET;         // CUresult cuDeviceGet(CUdevice*, int)
        static final MethodHandle DEVICE_ATTRIBUTE;   // CUresult cuDeviceGetAttribute(int*, CUdevice_attribute, CUdevice)
        static final MethodHandle GET_HANDLE;         // CUresult cuMemGetHandleForAddressRange(void*, CUdeviceptr, size_t, type, unsigned long long)
        static final MethodHandle CLOSE;              // int close(int)
        static final String FAILURE;
        /** The host page size ({@code getpagesize()}, 4096 when unknown): dma-buf ranges are aligned to it. */
        static final long PAGE;

        static {
            MethodHandle init = null;
            MethodHandle get = null;
            MethodHandle attr = null;
            MethodHandle handle = null;
            MethodHandle close = null;
            String failure = null;
            long page = 4096;
            Linker linker = Linker.nativeLinker();
            if (!CudaDmaBuf.class.getModule().isNativeAccessEnabled()) {
                Module m = CudaDmaBuf.class.getModule();
                failure = "native access is not enabled for " + (m.isNamed()
                        ? "module " + m.getName() + " (add --enable-native-access=" + m.getName() + ")"
                        : "the class path (add --enable-native-access=ALL-UNNAMED)");
            } else {
                try {
                    SymbolLookup cuda = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
                    init = link(linker, cuda, "cuInit", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
                    get = link(linker, cuda, "cuDeviceGet", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
                    attr = link(linker, cuda, "cuDeviceGetAttribute",
                            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
                    handle = link(linker, cuda, "cuMemGetHandleForAddressRange",
                            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_LONG));
                    close = linker.defaultLookup().find("close")
                            .map(s -> linker.downcallHandle(s, FunctionDescriptor.of(JAVA_INT, JAVA_INT)))
                            .orElse(null);
                    MethodHandle pageSize = linker.defaultLookup().find("getpagesize")
                            .map(s -> linker.downcallHandle(s, FunctionDescriptor.of(JAVA_INT)))
                            .orElse(null);
                    if (pageSize != null) {
                        page = pageSizeOr4k(pageSize);
                    }
                    if (init == null || get == null || attr == null) {
                        failure = LIBRARY + " lacks cuInit/cuDeviceGet/cuDeviceGetAttribute";
                    } else if (handle == null) {
                        failure = LIBRARY + " has no cuMemGetHandleForAddressRange (driver older than CUDA 11.7;"
                                + " upgrade the NVIDIA driver for dma-buf export)";
                    } else if (close == null) {
                        failure = "libc close(2) not found";
                    }
                } catch (IllegalArgumentException e) { // library not found or not loadable
                    failure = LIBRARY + " could not be loaded: " + e.getMessage();
                } catch (IllegalCallerException e) { // --illegal-native-access=deny
                    failure = "native access denied: " + e.getMessage();
                }
            }
            INIT = init;
            DEVICE_GET = get;
            DEVICE_ATTRIBUTE = attr;
            GET_HANDLE = handle;
            CLOSE = close;
            PAGE = page;
            String initFailure = null;
            if (failure == null) {
                try {
                    int rc = (int) INIT.invokeExact(0);
                    if (rc != 0) {
                        initFailure = "cuInit(0) failed: " + describe(rc);
                    }
                } catch (Throwable t) {
                    initFailure = "cuInit(0) failed: " + t;
                }
            }
            FAILURE = failure != null ? failure : initFailure;
        }

        private static long pageSizeOr4k(MethodHandle getpagesize) {
            try {
                int p = (int) getpagesize.invokeExact();
                return p > 0 && Integer.bitCount(p) == 1 ? p : 4096;
            } catch (Throwable t) {
                return 4096;
            }
        }

        private static MethodHandle link(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
            return lib.find(name).map(s -> linker.downcallHandle(s, fd)).orElse(null);
        }
    }

    /**
     * Why a dma-buf cannot be exported in this process (CUDA unavailable, {@code libcuda.so.1}
     * missing or too old, native access off); empty when {@link #exportRange} may be tried.
     *
     * @return why not, or empty when {@link #exportRange} may be tried
     */
    public static Optional<String> unavailability() {
        CudaUnavailableException c = CudaAvailability.unavailabilityCause();
        if (c != null) {
            return Optional.of(c.getMessage());
        }
        return Optional.ofNullable(Lib.FAILURE);
    }

    /**
     * Whether GPU {@code device} can export dma-bufs ({@code CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED});
     * empty when it can, otherwise why not. Checks the device exists first.
     *
     * @param device the GPU index
     * @return empty when it can, otherwise why not
     */
    public static Optional<String> deviceUnsupported(int device) {
        Optional<String> u = unavailability();
        if (u.isPresent()) {
            return u;
        }
        CudaAvailability.checkDevice(device);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(JAVA_INT);
            int rc = (int) Lib.DEVICE_GET.invokeExact(dev, device);
            if (rc != 0) {
                return Optional.of("cuDeviceGet(" + device + ") failed: " + describe(rc));
            }
            MemorySegment value = arena.allocate(JAVA_INT);
            rc = (int) Lib.DEVICE_ATTRIBUTE.invokeExact(value, ATTRIBUTE_DMA_BUF_SUPPORTED, dev.get(JAVA_INT, 0));
            if (rc != 0) {
                return Optional.of("cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) failed: "
                        + describe(rc));
            }
            return value.get(JAVA_INT, 0) != 0 ? Optional.empty()
                    : Optional.of(String.format(Locale.ROOT, "GPU %d does not support dma-buf export"
                            + " (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0: needs Linux >= 5.12 and an open-kernel"
                            + " or recent NVIDIA driver)", device));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Exports {@code [address, address + length)} of GPU {@code device} as a dma-buf: the range is
     * widened to host pages; the result says where {@code address} lies within it. Makes the
     * device's primary context current on the calling thread first. Throws {@link CudaException}
     * with the driver's error, or {@link CudaUnavailableException}.
     *
     * @param device  the GPU index
     * @param address the first byte
     * @param length  the number of bytes
     * @return the descriptor and where {@code address} lies in the exported range
     */
    public static Export exportRange(int device, long address, long length) {
        Optional<String> u = unavailability();
        if (u.isPresent()) {
            throw new CudaException("dma-buf export unavailable: " + u.get(), -1);
        }
        if (address == 0 || length <= 0) {
            throw new IllegalArgumentException("dma-buf export of an empty or null range");
        }
        long base = alignDown(address, Lib.PAGE);
        long size = alignUp(address - base + length, Lib.PAGE);
        int rc = JCudaBinding.setDevice(device);
        if (rc != CudaError.SUCCESS) {
            throw CudaException.failed("cudaSetDevice(" + device + ")", rc, "");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment fd = arena.allocate(JAVA_INT);
            fd.set(JAVA_INT, 0, -1);
            rc = (int) Lib.GET_HANDLE.invokeExact(fd, base, size, RANGE_HANDLE_TYPE_DMA_BUF_FD, 0L);
            if (rc != 0) {
                throw new CudaException(String.format(Locale.ROOT, "cuMemGetHandleForAddressRange(0x%x, %d bytes,"
                        + " DMA_BUF_FD) on GPU %d failed: %s", base, size, device, describe(rc)), rc);
            }
            return new Export(fd.get(JAVA_INT, 0), address - base, base, size);
        } catch (CudaException e) {
            throw e;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Closes a descriptor from {@link #exportRange}; returns 0, or -1 when {@code close(2)} failed.
     *
     * @param fd the file descriptor
     * @return 0, or -1 when {@code close(2)} failed
     */
    public static int closeFd(int fd) {
        if (fd < 0 || Lib.CLOSE == null) {
            return -1;
        }
        try {
            return (int) Lib.CLOSE.invokeExact(fd);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long alignDown(long v, long page) {
        return v & -page;
    }

    static long alignUp(long v, long page) {
        return (v + page - 1) & -page;
    }

    /** A {@code CUresult} in words. */
    static String describe(int rc) {
        String name = switch (rc) {
            case 1 -> "CUDA_ERROR_INVALID_VALUE";
            case 2 -> "CUDA_ERROR_OUT_OF_MEMORY";
            case 3 -> "CUDA_ERROR_NOT_INITIALIZED";
            case 100 -> "CUDA_ERROR_NO_DEVICE";
            case 101 -> "CUDA_ERROR_INVALID_DEVICE";
            case 201 -> "CUDA_ERROR_INVALID_CONTEXT";
            case 801 -> "CUDA_ERROR_NOT_SUPPORTED";
            default -> "CUresult";
        };
        return String.format(Locale.ROOT, "%s (%d)", name, rc);
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException re) {
            throw re;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException("driver call failed: " + t, t);
    }
}
