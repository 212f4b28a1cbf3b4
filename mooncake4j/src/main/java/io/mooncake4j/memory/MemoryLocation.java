package io.mooncake4j.memory;

import java.util.Locale;
import java.util.regex.Pattern;

/** Mooncake memory location strings: {@code cpu:N}, {@code cuda:N}, {@code *}. */
public final class MemoryLocation {

    /** Let the engine detect where the memory lives. */
    public static final String WILDCARD = "*";

    private static final Pattern CPU = Pattern.compile("cpu:\\d{1,4}");
    private static final Pattern CUDA = Pattern.compile("cuda:\\d{1,4}");

    private MemoryLocation() {}

    /**
     * {@return {@code cpu:<numaNode>}}
     *
     * @param numaNode the NUMA node
     */
    public static String cpu(int numaNode) {
        if (numaNode < 0) {
            throw new IllegalArgumentException("NUMA node must be >= 0, got " + numaNode);
        }
        return "cpu:" + numaNode;
    }

    /**
     * {@return {@code cuda:<gpu>}}
     *
     * @param gpu the GPU index
     */
    public static String cuda(int gpu) {
        if (gpu < 0) {
            throw new IllegalArgumentException("GPU index must be >= 0, got " + gpu);
        }
        return "cuda:" + gpu;
    }

    /**
     * {@return whether {@code location} names GPU memory ({@code cuda:N})}
     *
     * @param location a location string
     */
    public static boolean isCuda(String location) {
        return location != null && CUDA.matcher(location).matches();
    }

    /**
     * {@return whether {@code location} names host memory ({@code cpu:N})}
     *
     * @param location a location string
     */
    public static boolean isCpu(String location) {
        return location != null && CPU.matcher(location).matches();
    }

    /**
     * {@return the device or NUMA index of a {@code cpu:N}/{@code cuda:N} location, or -1 for {@code *}}
     *
     * @param location a location string
     */
    public static int index(String location) {
        validate(location);
        if (WILDCARD.equals(location)) {
            return -1;
        }
        return Integer.parseInt(location.substring(location.indexOf(':') + 1));
    }

    /**
     * Throws {@link IllegalArgumentException} unless the string is a location this project understands.
     *
     * @param location a location string
     * @return {@code location}, when valid
     */
    public static String validate(String location) {
        if (WILDCARD.equals(location) || isCpu(location) || isCuda(location)) {
            return location;
        }
        throw new IllegalArgumentException(String.format(Locale.ROOT,
                "invalid memory location '%s': expected cpu:<numa>, cuda:<gpu> or *", location));
    }
}
