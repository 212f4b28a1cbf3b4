package io.mooncake4j.engine.shm;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;

/**
 * Whether two processes can reach each other's memory through {@code /proc}: the same kernel boot
 * ({@code /proc/sys/kernel/random/boot_id}, fresh at every boot, equal in every container of the
 * host) and the same PID namespace ({@code /proc/self/ns/pid}, so that a pid advertised by the peer
 * names the peer here). Two engines in different PID namespaces on one host are "different
 * machines" for {@code shm}, and get TCP. Immutable.
 *
 * @param bootId       the kernel's boot id
 * @param pidNamespace the link text of {@code /proc/self/ns/pid}, e.g. {@code pid:[4026531836]}
 */
public record MachineIdentity(String bootId, String pidNamespace) {

    public MachineIdentity {
        Objects.requireNonNull(bootId, "bootId");
        Objects.requireNonNull(pidNamespace, "pidNamespace");
    }

    private static final class Holder {
        static final MachineIdentity LOCAL = read(Path.of("/proc"));
    }

    /** This process's identity, or null when {@code /proc} does not tell it (not Linux, no procfs). */
    public static MachineIdentity local() {
        return Holder.LOCAL;
    }

    /** Reads the identity from a procfs mounted at {@code proc}; null when unreadable. */
    static MachineIdentity read(Path proc) {
        try {
            String boot = Files.readString(proc.resolve("sys/kernel/random/boot_id"), StandardCharsets.US_ASCII).strip();
            String ns = Files.readSymbolicLink(proc.resolve("self/ns/pid")).toString();
            return boot.isEmpty() || ns.isEmpty() ? null : new MachineIdentity(boot, ns);
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return null;
        }
    }

    /** {@code <bootId>/<pidNamespace>}: the form advertised in {@code mc4j_shm.machine}. */
    @Override
    public String toString() {
        return bootId + "/" + pidNamespace;
    }

    /** Parses {@link #toString()}'s form; null when malformed. */
    public static MachineIdentity parse(String s) {
        if (s == null) {
            return null;
        }
        int slash = s.indexOf('/');
        if (slash <= 0 || slash == s.length() - 1) {
            return null;
        }
        return new MachineIdentity(s.substring(0, slash), s.substring(slash + 1));
    }
}
