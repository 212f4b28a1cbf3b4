package io.mooncake4j.internal.sys;

import java.util.Locale;

/** Byte counts for people. */
public final class Bytes {
    private Bytes() {}

    /** {@code 512 B}, {@code 64.0 KiB}, {@code 1.50 GiB}. */
    public static String human(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = bytes;
        int u = -1;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
    }
}
