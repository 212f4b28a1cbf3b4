package io.mooncake4j.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The probe on this host and on simulated hosts. Where no NVIDIA driver is installed (the
 * build machines) the probe must load JCuda, then report {@code cudaErrorInsufficientDriver}.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CudaAvailabilityTest {

    /** True when nothing on this host looks like an NVIDIA driver (no device node, no libcuda.so.1). */
    static boolean noNvidiaDriver() {
        if (Files.exists(Path.of("/dev/nvidiactl"))) {
            return false;
        }
        String ld = System.getenv().getOrDefault("LD_LIBRARY_PATH", "");
        return Stream.concat(Stream.of(ld.split(":")), Stream.of("/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                        "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/local/cuda/compat", "/usr/local/nvidia/lib64"))
                .filter(s -> !s.isBlank())
                .noneMatch(d -> Files.exists(Path.of(d, "libcuda.so.1")));
    }

    @Test
    void reportsInsufficientDriverWithTheFixWhereNoDriverIsInstalled() {
        assumeTrue(noNvidiaDriver(), "an NVIDIA driver is installed here");
        assertFalse(CudaAvailability.isAvailable());
        CudaUnavailableException cause = CudaAvailability.unavailabilityCause();
        assertNotNull(cause);
        assertEquals(CudaAvailability.Reason.INSUFFICIENT_DRIVER, cause.reason(), cause.getMessage());
        assertEquals(CudaError.INSUFFICIENT_DRIVER, cause.errorCode());
        assertTrue(cause.getMessage().contains("cudaErrorInsufficientDriver (35)"), cause.getMessage());
        assertTrue(cause.getMessage().contains("nvidia-smi"), cause.getMessage());
        assertEquals(0, CudaAvailability.deviceCount());
        assertEquals(0, CudaAvailability.driverVersion());
        int runtime = CudaAvailability.runtimeVersion();
        assertTrue(runtime >= 12000 && runtime < 13000, "JCuda's CUDA 12 runtime loaded and answered, got " + runtime);
        assertEquals(cause.getMessage(), CudaAvailability.summary());
    }

    @Test
    void unpacksJCudaNativesIntoAProjectOwnedFolderAndRestoresTmpdir() throws Exception {
        String tmpdir = System.getProperty("java.io.tmpdir");
        CudaAvailability.isAvailable();
        assertEquals(tmpdir, System.getProperty("java.io.tmpdir"));
        assumeTrue(CudaAvailability.reason() != CudaAvailability.Reason.JCUDA_MISSING, "JCuda not on the class path");
        Path dir = CudaAvailability.nativeLibraryDirectory();
        assertNotNull(dir);
        assertTrue(dir.startsWith(Path.of(tmpdir).toAbsolutePath()), dir.toString());
        assertTrue(dir.getParent().getFileName().toString().startsWith("mooncake4j-"), dir.toString());
        String lib = JCudaNatives.libraryFileName(CudaAvailability.class.getClassLoader());
        assertTrue(Files.isRegularFile(dir.resolve(lib)), "native library unpacked into " + dir);
        assertFalse(Files.exists(Path.of(tmpdir, lib)), "JCuda must not write into java.io.tmpdir itself");
        assertEquals("rwx------", java.nio.file.attribute.PosixFilePermissions.toString(
                Files.getPosixFilePermissions(dir)));
    }

    @Test
    void reportsJCudaMissingWhenTheClassPathLacksIt() throws Exception {
        try (URLClassLoader empty = new URLClassLoader(new URL[0], ClassLoader.getPlatformClassLoader())) {
            CudaAvailability.Probe p = CudaAvailability.probe(empty, false);
            assertNotNull(p.cause());
            assertEquals(CudaAvailability.Reason.JCUDA_MISSING, p.cause().reason());
            assertTrue(p.cause().getMessage().contains("org.jcuda:jcuda:12.6.0"), p.cause().getMessage());
        }
    }

    @Test
    void reportsMissingNativesWhenOnlyTheJCudaJarIsPresent() throws Exception {
        Class<?> pointer;
        try {
            pointer = Class.forName("jcuda.Pointer");
        } catch (ClassNotFoundException e) {
            assumeTrue(false, "JCuda not on the class path");
            return;
        }
        URL jar = pointer.getProtectionDomain().getCodeSource().getLocation();
        try (URLClassLoader jcudaOnly = new URLClassLoader(new URL[] {jar}, ClassLoader.getPlatformClassLoader())) {
            CudaAvailability.Probe p = CudaAvailability.probe(jcudaOnly, false);
            assertNotNull(p.cause());
            assertEquals(CudaAvailability.Reason.NATIVE_LIBRARY_FAILED, p.cause().reason());
            assertTrue(p.cause().getMessage().contains("jcuda-natives"), p.cause().getMessage());
        }
    }

    @Test
    void classifiesDeviceCountErrors() {
        assertEquals(CudaAvailability.Reason.INSUFFICIENT_DRIVER,
                CudaAvailability.fromDeviceCountError(35, 0, null).cause().reason());
        assertTrue(CudaAvailability.fromDeviceCountError(35, 11080, null).cause().getMessage()
                .contains("CUDA 11.8) is older"));
        assertEquals(CudaAvailability.Reason.INSUFFICIENT_DRIVER,
                CudaAvailability.fromDeviceCountError(34, 0, null).cause().reason());
        assertEquals(CudaAvailability.Reason.INSUFFICIENT_DRIVER,
                CudaAvailability.fromDeviceCountError(803, 13000, null).cause().reason());
        CudaUnavailableException noDevice = CudaAvailability.fromDeviceCountError(100, 13000, null).cause();
        assertEquals(CudaAvailability.Reason.NO_DEVICE, noDevice.reason());
        assertTrue(noDevice.getMessage().contains("CUDA_VISIBLE_DEVICES"), noDevice.getMessage());
        assertEquals(CudaAvailability.Reason.CUDA_ERROR,
                CudaAvailability.fromDeviceCountError(999, 13000, null).cause().reason());
    }

    @Test
    void namesCudaErrorsWithoutJCuda() {
        assertEquals("cudaErrorInsufficientDriver", CudaError.name(35));
        assertEquals("cudaErrorNoDevice (100)", CudaError.describe(100));
        assertEquals("cudaError 12345", CudaError.name(12345));
        assertEquals("13.0", CudaAvailability.version(13000));
        assertEquals("12.6", CudaAvailability.version(12060));
    }

    @Test
    void hostLocationsPassTheLocationCheckEverywhere() {
        CudaAvailability.checkLocation("cpu:0");
        CudaAvailability.checkLocation("*");
        assertThrows(IllegalArgumentException.class, () -> CudaAvailability.checkLocation("gpu:0"));
    }
}
