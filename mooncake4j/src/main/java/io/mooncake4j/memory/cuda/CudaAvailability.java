package io.mooncake4j.memory.cuda;

import io.mooncake4j.memory.MemoryLocation;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether this process can use CUDA, and if not, why and how to fix it.
 *
 * <p>The probe runs once, on the first call of any method here (or of any class in this package
 * that needs CUDA): find JCuda on the class path, put its JNI library into a mooncake4j-owned
 * folder and load it ({@link JCudaNatives}), then ask the CUDA runtime for the driver and the
 * devices. Nothing outside this package triggers it, and nothing in it throws from a class
 * initialiser: a host without JCuda or without a driver runs everything else, and only asking
 * for GPU memory or a {@code cuda:N} location fails, with {@link CudaUnavailableException}.
 * The outcome is logged once (INFO). Thread-safe.
 */
public final class CudaAvailability {

    /** Why CUDA is unavailable. */
    public enum Reason {
        /** {@code org.jcuda:jcuda} is not on the class path. */
        JCUDA_MISSING,
        /** JCuda's JNI library is absent for this platform or could not be loaded. */
        NATIVE_LIBRARY_FAILED,
        /** No NVIDIA driver, or one too old for JCuda's CUDA 12 runtime ({@code cudaErrorInsufficientDriver}). */
        INSUFFICIENT_DRIVER,
        /** A driver but no visible CUDA device ({@code cudaErrorNoDevice}). */
        NO_DEVICE,
        /** Another CUDA error while probing. */
        CUDA_ERROR
    }

    /** The probe's outcome. {@code cause} is null exactly when CUDA is available. */
    record Probe(CudaUnavailableException cause, int deviceCount, int driverVersion, int runtimeVersion,
                 Path nativeDirectory) {

        static Probe unavailable(Reason reason, String why, String fix, int code, Throwable t, Path dir) {
            String msg = String.format(Locale.ROOT, "CUDA is unavailable: %s. Fix: %s", why, fix);
            return new Probe(new CudaUnavailableException(reason, msg, code, t), 0, 0, 0, dir);
        }
    }

    private static final Logger LOG = LoggerFactory.getLogger(CudaAvailability.class);

    static final String JCUDA_COORDINATES =
            "org.jcuda:jcuda:12.6.0 and org.jcuda:jcuda-natives:12.6.0:linux-x86_64";

    private CudaAvailability() {}

    private static final class Holder {
        static final Probe PROBE = probeAndLog();
    }

    private static Probe probeAndLog() {
        ClassLoader loader = Objects.requireNonNullElse(CudaAvailability.class.getClassLoader(),
                ClassLoader.getSystemClassLoader());
        Probe p = probe(loader, true);
        if (p.cause() == null) {
            LOG.info("CUDA available: {} device(s), driver {}, runtime {}, JCuda natives in {}",
                    p.deviceCount(), version(p.driverVersion()), version(p.runtimeVersion()), p.nativeDirectory());
        } else {
            LOG.info("{}", p.cause().getMessage());
        }
        return p;
    }

    /**
     * Runs the probe against {@code loader}. With {@code load} false it stops before loading
     * anything native (tests use this with class loaders that hide JCuda or its natives).
     */
    static Probe probe(ClassLoader loader, boolean load) {
        try {
            Class.forName(JCudaNatives.RUNTIME_CLASS, false, loader);
        } catch (ClassNotFoundException | LinkageError e) {
            return Probe.unavailable(Reason.JCUDA_MISSING,
                    "JCuda is not on the class path (class " + JCudaNatives.RUNTIME_CLASS + " not found)",
                    "put " + JCUDA_COORDINATES + " on the class path ('mvn package' copies both into "
                            + "target/lib, which bin/mooncake4j adds)", -1, e, null);
        }
        String fileName;
        try {
            fileName = JCudaNatives.libraryFileName(loader);
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            return Probe.unavailable(Reason.NATIVE_LIBRARY_FAILED,
                    "JCuda cannot name its native library for this platform (os.name=" + System.getProperty("os.name")
                            + ", os.arch=" + System.getProperty("os.arch") + "): " + JCudaNatives.detail(e),
                    "use Linux on x86_64, the platform of " + JCUDA_COORDINATES, -1, e, null);
        }
        Path dir = JCudaNatives.directory(fileName);
        byte[] bytes;
        try {
            bytes = JCudaNatives.libraryBytes(loader, fileName);
        } catch (IOException e) {
            return Probe.unavailable(Reason.NATIVE_LIBRARY_FAILED,
                    "cannot read JCuda's native library lib/" + fileName + " from the class path: " + e,
                    "check that the jcuda-natives jar is intact (re-copy it)", -1, e, dir);
        }
        if (bytes == null) {
            return Probe.unavailable(Reason.NATIVE_LIBRARY_FAILED,
                    "JCuda's native library lib/" + fileName + " is not on the class path",
                    "add org.jcuda:jcuda-natives:12.6.0 with classifier linux-x86_64 next to the jcuda jar",
                    -1, null, dir);
        }
        if (!load) {
            return new Probe(null, 0, 0, 0, dir);
        }
        try {
            JCudaNatives.extract(dir, fileName, bytes);
            JCudaNatives.initialiseJCuda(loader, dir);
        } catch (IOException e) {
            return Probe.unavailable(Reason.NATIVE_LIBRARY_FAILED,
                    "cannot write JCuda's native library into " + dir + ": " + e.getMessage(),
                    "make that folder writable, or set -D" + JCudaNatives.DIRECTORY_PROPERTY + "=<private folder>",
                    -1, e, dir);
        } catch (ClassNotFoundException | LinkageError e) {
            return Probe.unavailable(Reason.NATIVE_LIBRARY_FAILED,
                    "JCuda's native library " + fileName + " failed to load from " + dir + ": " + JCudaNatives.detail(e),
                    "check that the folder is not on a noexec mount (or set -D" + JCudaNatives.DIRECTORY_PROPERTY
                            + "=<folder>) and that glibc/libstdc++ are present",
                    -1, e, dir);
        }
        try {
            // touching the binding resolves every handle; a JCuda without one of them fails here
            int[] out = new int[1];
            int driver = JCudaBinding.driverVersion(out) == CudaError.SUCCESS ? out[0] : 0;
            int runtime = JCudaBinding.runtimeVersion(out) == CudaError.SUCCESS ? out[0] : 0;
            out[0] = 0;
            int rc = JCudaBinding.getDeviceCount(out);
            if (rc != CudaError.SUCCESS || out[0] <= 0) {
                Probe failed = fromDeviceCountError(rc != CudaError.SUCCESS ? rc : CudaError.NO_DEVICE, driver, dir);
                return new Probe(failed.cause(), 0, driver, runtime, dir);
            }
            return new Probe(null, out[0], driver, runtime, dir);
        } catch (LinkageError | RuntimeException e) {
            return Probe.unavailable(Reason.NATIVE_LIBRARY_FAILED,
                    "JCuda loaded but its runtime API could not be bound: " + JCudaNatives.detail(e),
                    "use exactly " + JCUDA_COORDINATES, -1, e, dir);
        }
    }

    /** Classifies a failed {@code cudaGetDeviceCount}. */
    static Probe fromDeviceCountError(int rc, int driverVersion, Path dir) {
        String call = "cudaGetDeviceCount returned " + CudaError.describe(rc);
        String driverFix = "install an NVIDIA driver for CUDA 12 or newer (R525+; any CUDA 13 driver works) "
                + "and check that nvidia-smi lists the GPU; in a container, start it with the NVIDIA container "
                + "toolkit (docker run --gpus all) so that libcuda.so.1 and /dev/nvidia* are mapped in";
        return switch (rc) {
            case CudaError.INSUFFICIENT_DRIVER -> Probe.unavailable(Reason.INSUFFICIENT_DRIVER,
                    call + (driverVersion == 0 ? ": no NVIDIA driver (libcuda.so.1) could be loaded"
                            : ": the driver (CUDA " + version(driverVersion) + ") is older than JCuda's CUDA 12 runtime"),
                    driverFix, rc, null, dir);
            case CudaError.STUB_LIBRARY -> Probe.unavailable(Reason.INSUFFICIENT_DRIVER,
                    call + ": the libcuda.so.1 found is the toolkit's stub, not a driver",
                    "remove the CUDA toolkit's stubs folder from LD_LIBRARY_PATH; " + driverFix, rc, null, dir);
            case CudaError.SYSTEM_DRIVER_MISMATCH, CudaError.COMPAT_NOT_SUPPORTED_ON_DEVICE,
                 CudaError.CALL_REQUIRES_NEWER_DRIVER -> Probe.unavailable(Reason.INSUFFICIENT_DRIVER,
                    call + ": the user-space driver does not match the kernel module",
                    "reinstall one NVIDIA driver version (or drop the cuda-compat package from LD_LIBRARY_PATH); "
                            + driverFix, rc, null, dir);
            case CudaError.NO_DEVICE -> Probe.unavailable(Reason.NO_DEVICE,
                    call + ": the driver sees no CUDA device (CUDA_VISIBLE_DEVICES="
                            + Objects.requireNonNullElse(System.getenv("CUDA_VISIBLE_DEVICES"), "<unset>") + ")",
                    "check nvidia-smi and CUDA_VISIBLE_DEVICES", rc, null, dir);
            default -> Probe.unavailable(Reason.CUDA_ERROR, call,
                    "check nvidia-smi and the kernel log (dmesg | grep -i nvrm)", rc, null, dir);
        };
    }

    static Probe probe() {
        return Holder.PROBE;
    }

    /** {@return whether CUDA can be used: JCuda loaded, a driver and at least one device} */
    public static boolean isAvailable() {
        return probe().cause() == null;
    }

    /** {@return why CUDA is unavailable (message with the fix), or null when it is available} */
    public static CudaUnavailableException unavailabilityCause() {
        return probe().cause();
    }

    /** {@return the reason CUDA is unavailable, or null when it is available} */
    public static Reason reason() {
        CudaUnavailableException c = probe().cause();
        return c == null ? null : c.reason();
    }

    /** Throws {@link CudaUnavailableException} (a fresh one, caused by the probe's) unless CUDA is available. */
    public static void ensureAvailable() {
        CudaUnavailableException c = probe().cause();
        if (c != null) {
            throw new CudaUnavailableException(c.reason(), c.getMessage(), c.errorCode(), c);
        }
    }

    /**
     * Checks that memory at {@code location} can be used here: {@code cpu:N} and {@code *} always
     * pass; {@code cuda:N} needs CUDA and a device N. Throws {@link CudaUnavailableException} or
     * {@link CudaException} with the fix; {@link IllegalArgumentException} for a malformed location.
     *
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     */
    public static void checkLocation(String location) {
        MemoryLocation.validate(location);
        if (!MemoryLocation.isCuda(location)) {
            return;
        }
        CudaUnavailableException c = probe().cause();
        if (c != null) {
            throw new CudaUnavailableException(c.reason(),
                    "memory location '" + location + "' needs a GPU, but " + c.getMessage(), c.errorCode(), c);
        }
        checkDevice(MemoryLocation.index(location));
    }

    static void checkDevice(int device) {
        ensureAvailable();
        int count = probe().deviceCount();
        if (device < 0 || device >= count) {
            throw new CudaException(String.format(Locale.ROOT,
                    "GPU %d does not exist: CUDA sees %d device(s) (cuda:0..cuda:%d; CUDA_VISIBLE_DEVICES=%s)",
                    device, count, count - 1,
                    Objects.requireNonNullElse(System.getenv("CUDA_VISIBLE_DEVICES"), "<unset>")),
                    CudaError.INVALID_DEVICE);
        }
    }

    /** {@return number of visible CUDA devices; 0 when unavailable} */
    public static int deviceCount() {
        return probe().deviceCount();
    }

    /** {@return the driver's CUDA version as {@code 1000*major + 10*minor} (13000 for 13.0); 0 when unknown} */
    public static int driverVersion() {
        return probe().driverVersion();
    }

    /**
     * The version of the CUDA runtime linked into JCuda's JNI library ({@code 12000}: JCuda
     * 12.6.0's library reports CUDA 12.0); 0 when not loaded.
     *
     * @return the CUDA runtime version JCuda's library reports, 0 when not loaded
     */
    public static int runtimeVersion() {
        return probe().runtimeVersion();
    }

    /** {@return where JCuda's native library is (or would be) unpacked; null when JCuda is missing} */
    public static Path nativeLibraryDirectory() {
        return probe().nativeDirectory();
    }

    /**
     * {@return the name of GPU {@code device} as CUDA reports it ({@code "NVIDIA H200"})}
     *
     * @param device the GPU index
     */
    public static String deviceName(int device) {
        checkDevice(device);
        return JCudaBinding.deviceName(device);
    }

    /** {@return one line for logs and {@code --version}-style output} */
    public static String summary() {
        Probe p = probe();
        if (p.cause() != null) {
            return p.cause().getMessage();
        }
        return String.format(Locale.ROOT, "CUDA available: %d device(s), driver %s, runtime %s",
                p.deviceCount(), version(p.driverVersion()), version(p.runtimeVersion()));
    }

    static String version(int v) {
        return v <= 0 ? "none" : (v / 1000) + "." + (v % 1000) / 10;
    }
}
