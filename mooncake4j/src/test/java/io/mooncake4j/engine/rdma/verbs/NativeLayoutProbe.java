package io.mooncake4j.engine.rdma.verbs;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Builds and runs {@code native/verbs_layout.c} with the system's C compiler ({@code cc}, else
 * {@code gcc}) into {@code target/native/}. Empty when there is no compiler or no
 * {@code <infiniband/verbs.h>}; a compiler that is present but fails is an error.
 */
final class NativeLayoutProbe {

    static final Path SOURCE = Path.of("native", "verbs_layout.c");
    static final Path HEADER = Path.of("/usr/include/infiniband/verbs.h");
    static final String GOLDEN_X86_64 = "/golden/verbs-layout-x86_64.txt";

    private NativeLayoutProbe() {}

    /** Why the live probe cannot run here, or empty when it can. */
    static Optional<String> whyNotLive() {
        if (!Files.isRegularFile(SOURCE)) {
            return Optional.of("probe source " + SOURCE.toAbsolutePath() + " not found");
        }
        if (!Files.isRegularFile(HEADER)) {
            return Optional.of(HEADER + " not found (install libibverbs-dev)");
        }
        if (compiler().isEmpty()) {
            return Optional.of("no C compiler (cc or gcc) on PATH");
        }
        return Optional.empty();
    }

    static Optional<String> compiler() {
        for (String name : List.of("cc", "gcc")) {
            for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
                if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, name))) {
                    return Optional.of(Path.of(dir, name).toString());
                }
            }
        }
        return Optional.empty();
    }

    /** Compiles (warnings are errors) and runs the probe; returns its output lines. */
    static List<String> runLive() throws IOException, InterruptedException {
        Path outDir = Path.of("target", "native");
        Files.createDirectories(outDir);
        Path exe = outDir.resolve("verbs_layout");
        run(List.of(compiler().orElseThrow(), "-std=c11", "-O0", "-Wall", "-Wextra", "-Werror",
                "-o", exe.toString(), SOURCE.toString()));
        return lines(run(List.of(exe.toString())));
    }

    /** Compiles {@code native/<name>.c} into {@code target/native/lib<name>.so} (warnings are errors). */
    static Path buildSharedLibrary(String name) throws IOException, InterruptedException {
        Path outDir = Path.of("target", "native");
        Files.createDirectories(outDir);
        Path lib = outDir.resolve("lib" + name + ".so").toAbsolutePath();
        run(List.of(compiler().orElseThrow(), "-std=c11", "-O0", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                "-o", lib.toString(), Path.of("native", name + ".c").toString()));
        return lib;
    }

    /** The committed x86-64 probe output. */
    static List<String> golden() throws IOException {
        try (InputStream in = NativeLayoutProbe.class.getResourceAsStream(GOLDEN_X86_64)) {
            if (in == null) {
                throw new IOException("golden file " + GOLDEN_X86_64 + " missing from test resources");
            }
            return lines(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
    }

    static boolean isX86_64() {
        String arch = System.getProperty("os.arch");
        return "amd64".equals(arch) || "x86_64".equals(arch);
    }

    /** Lines without comments and blanks. */
    static List<String> facts(List<String> lines) {
        List<String> out = new ArrayList<>();
        for (String l : lines) {
            if (!l.isBlank() && !l.startsWith("#")) {
                out.add(l.strip());
            }
        }
        return out;
    }

    private static List<String> lines(String text) {
        return List.of(text.split("\n"));
    }

    private static String run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] out;
        try (InputStream in = p.getInputStream()) {
            out = in.readAllBytes();
        }
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException("timed out: " + command);
        }
        String text = new String(out, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            throw new IOException(String.format(Locale.ROOT, "%s exited with %d:%n%s", command, p.exitValue(), text));
        }
        return text;
    }
}
