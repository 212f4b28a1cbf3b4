package io.mooncake4j.internal.sys;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;

/**
 * The process's effective Linux capabilities, read from the {@code CapEff:} line of
 * {@code /proc/self/status} (a 64-bit hex mask, {@code capabilities(7)}). Only the bits the
 * project acts on are named. Not Linux, or no readable status file: every capability reads as
 * absent (the conservative answer: checks that a capability would waive stay on).
 */
public final class Capabilities {

    /** {@code CAP_IPC_LOCK}: lock memory without {@code RLIMIT_MEMLOCK} applying (mlock, RDMA pinning). */
    public static final int CAP_IPC_LOCK = 14;

    private static final Path PROC_SELF_STATUS = Path.of("/proc/self/status");

    private Capabilities() {}

    /** Whether this process has {@code CAP_IPC_LOCK} in its effective set (read on each call). */
    public static boolean hasIpcLock() {
        return has(effective(PROC_SELF_STATUS), CAP_IPC_LOCK);
    }

    /** Whether {@code mask} has capability bit {@code cap}; false for an unknown mask. */
    public static boolean has(OptionalLong mask, int cap) {
        if (cap < 0 || cap > 63) {
            throw new IllegalArgumentException("capability number out of range: " + cap);
        }
        return mask.isPresent() && (mask.getAsLong() & (1L << cap)) != 0;
    }

    /** The {@code CapEff} mask of a {@code /proc/<pid>/status} file; empty when missing or unreadable. */
    public static OptionalLong effective(Path statusFile) {
        try {
            return parseEffective(Files.readString(statusFile));
        } catch (IOException | RuntimeException e) {
            return OptionalLong.empty();
        }
    }

    /** The {@code CapEff} mask in the text of a status file; empty when the line is absent or malformed. */
    public static OptionalLong parseEffective(String status) {
        for (String line : status.split("\n")) {
            if (line.startsWith("CapEff:")) {
                String hex = line.substring("CapEff:".length()).strip();
                if (hex.isEmpty() || hex.length() > 16) {
                    return OptionalLong.empty();
                }
                try {
                    return OptionalLong.of(Long.parseUnsignedLong(hex, 16));
                } catch (NumberFormatException e) {
                    return OptionalLong.empty();
                }
            }
        }
        return OptionalLong.empty();
    }
}
