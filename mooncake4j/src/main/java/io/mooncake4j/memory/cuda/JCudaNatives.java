package io.mooncake4j.memory.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.net.URL;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.Locale;
import java.util.Set;

/**
 * Puts JCuda's runtime JNI library into a folder mooncake4j owns, then lets JCuda load it.
 *
 * <p>How JCuda 12.6 loads ({@code jcuda.LibUtils.loadLibrary}): first
 * {@code System.loadLibrary("JCudaRuntime-12.6.0-linux-x86_64")} from {@code java.library.path};
 * failing that it copies the class-path resource {@code /lib/libJCudaRuntime-12.6.0-linux-x86_64.so}
 * to {@code <java.io.tmpdir>/<file name>} — reading the system property at that moment, reusing a
 * file already there without checking its content — and {@code System.load}s it.
 *
 * <p>So this class writes the library itself into {@link #directory} (created owner-only,
 * rewritten when its bytes differ from the jar's), points {@code java.io.tmpdir} at that folder
 * for the duration of JCuda's class initialisation only, and restores it. JCuda then finds its
 * file already in place and writes nothing into the shared temporary folder. The JDK's own
 * temporary-file APIs read the start-up value of {@code java.io.tmpdir}, so the short swap does
 * not move them. Not thread-safe on its own: {@link CudaAvailability} calls it once.
 */
final class JCudaNatives {

    /** System property naming the folder; default {@code <java.io.tmpdir>/mooncake4j-<user>/jcuda-<version>-<platform>}. */
    static final String DIRECTORY_PROPERTY = "mooncake4j.cuda.nativeDir";

    static final String RUNTIME_CLASS = "jcuda.runtime.JCuda";

    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");

    private JCudaNatives() {}

    /** File name of the runtime JNI library for this platform, as JCuda names it. */
    static String libraryFileName(ClassLoader loader) throws ReflectiveOperationException {
        Class<?> version = Class.forName("jcuda.JCudaVersion", true, loader);
        Class<?> libUtils = Class.forName("jcuda.LibUtils", true, loader);
        String base = "JCudaRuntime-" + version.getMethod("get").invoke(null);
        String platformName = (String) libUtils.getMethod("createPlatformLibraryName", String.class).invoke(null, base);
        return (String) libUtils.getMethod("createLibraryFileName", String.class).invoke(null, platformName);
    }

    /** The folder the library goes into. */
    static Path directory(String libraryFileName) {
        String configured = System.getProperty(DIRECTORY_PROPERTY);
        if (configured != null && !configured.isBlank()) {
            return Path.of(configured).toAbsolutePath();
        }
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
        String stem = libraryFileName.replaceFirst("^lib", "").replaceFirst("\\.[A-Za-z]+$", "")
                .replaceFirst("^JCudaRuntime-", "jcuda-");
        return Path.of(System.getProperty("java.io.tmpdir"), "mooncake4j-" + user, stem).toAbsolutePath();
    }

    /** The library bytes from the class path; null when the natives jar for this platform is absent. */
    static byte[] libraryBytes(ClassLoader loader, String libraryFileName) throws IOException {
        URL url = loader.getResource("lib/" + libraryFileName);
        if (url == null) {
            return null;
        }
        try (InputStream in = url.openStream()) {
            return in.readAllBytes();
        }
    }

    /**
     * Writes {@code bytes} to {@code dir/fileName} unless an identical file is there; returns the
     * file. The folder is created owner-only; an existing folder writable by group or others is
     * refused.
     */
    static Path extract(Path dir, String fileName, byte[] bytes) throws IOException {
        boolean posix = FileSystems.getDefault().supportedFileAttributeViews().contains("posix");
        if (posix) {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
            Set<PosixFilePermission> perms = Files.getPosixFilePermissions(dir, LinkOption.NOFOLLOW_LINKS);
            if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
                throw new IOException(String.format(Locale.ROOT,
                        "folder %s is writable by other users (%s); remove it or set -D%s to a private folder",
                        dir, PosixFilePermissions.toString(perms), DIRECTORY_PROPERTY));
            }
        } else {
            Files.createDirectories(dir);
        }
        if (Files.isSymbolicLink(dir)) {
            throw new IOException("folder " + dir + " is a symbolic link; set -D" + DIRECTORY_PROPERTY
                    + " to a private folder");
        }
        Path target = dir.resolve(fileName);
        if (Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS) && Files.size(target) == bytes.length
                && Arrays.equals(Files.readAllBytes(target), bytes)) {
            return target;
        }
        Path tmp = Files.createTempFile(dir, fileName, ".part");
        try {
            Files.write(tmp, bytes);
            try {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
        return target;
    }

    /**
     * Initialises {@code jcuda.runtime.JCuda} (which loads its JNI library) with
     * {@code java.io.tmpdir} pointing at {@code dir}. Throws what JCuda throws
     * ({@link UnsatisfiedLinkError} when the library cannot be loaded).
     */
    static void initialiseJCuda(ClassLoader loader, Path dir) throws ClassNotFoundException {
        synchronized (JCudaNatives.class) {
            String previous = System.getProperty("java.io.tmpdir");
            System.setProperty("java.io.tmpdir", dir.toString());
            try {
                Class.forName(RUNTIME_CLASS, true, loader);
            } finally {
                System.setProperty("java.io.tmpdir", previous);
            }
        }
    }

    /**
     * The most useful line of a loading failure: JCuda's {@link UnsatisfiedLinkError} message
     * nests the stack traces of both its attempts; the dynamic linker's own complaint
     * ({@code cannot open shared object file}, {@code undefined symbol}) is the line worth showing.
     */
    static String detail(Throwable t) {
        Throwable root = t;
        if (root instanceof InvocationTargetException ite && ite.getCause() != null) {
            root = ite.getCause();
        }
        String msg = String.valueOf(root.getMessage());
        String best = null;
        for (String line : msg.split("\n")) {
            String l = line.strip();
            if (l.contains("cannot open shared object") || l.contains("undefined symbol")
                    || l.contains("failed to map segment") || l.contains("wrong ELF class")) {
                best = l;
            }
        }
        if (best == null) {
            int nl = msg.indexOf('\n');
            best = nl >= 0 ? msg.substring(0, nl) : msg;
        }
        return root.getClass().getSimpleName() + ": " + best;
    }
}
