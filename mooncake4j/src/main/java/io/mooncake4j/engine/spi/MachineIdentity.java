package io.mooncake4j.engine.spi;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Locale;

/**
 * This machine's identity as engines advertise it ({@code mc4j_machine} in the segment
 * descriptor): the host's {@code /etc/machine-id} and the kernel's boot id, so that two engines
 * agree exactly when they run on one host in one boot (a same-machine transport may then map the
 * peer's memory). Containers sharing a host kernel but not its {@code /etc} disagree, which is the
 * safe answer. Where neither file exists the identity is per JVM (never equal to another process's).
 */
public final class MachineIdentity {

    private static final String LOCAL = compute(Path.of("/etc/machine-id"),
            Path.of("/proc/sys/kernel/random/boot_id"));

    private MachineIdentity() {}

    /** This machine's identity (computed once per JVM). */
    public static String local() {
        return LOCAL;
    }

    /** The identity from these files (tests pass their own); a per-JVM random one when neither is readable. */
    static String compute(Path machineId, Path bootId) {
        String m = read(machineId);
        String b = read(bootId);
        if (m.isEmpty() && b.isEmpty()) {
            byte[] r = new byte[16];
            new java.security.SecureRandom().nextBytes(r);
            return "jvm-" + HexFormat.of().formatHex(r);
        }
        return (m.isEmpty() ? "none" : m) + "/" + (b.isEmpty() ? "none" : b);
    }

    private static String read(Path p) {
        try {
            return Files.readString(p, StandardCharsets.US_ASCII).strip().toLowerCase(Locale.ROOT);
        } catch (IOException | SecurityException e) {
            return "";
        }
    }
}
