package io.mooncake4j.engine.spi;

/** The kinds of memory a buffer can live in, from its registration location. */
public enum MemoryKind {
    /** Host DRAM ({@code "*"}, {@code "cpu"}, {@code "cpu:N"}). */
    HOST,
    /** GPU memory ({@code "cuda:N"}). */
    CUDA;

    /** The kind of a registration location ({@code cuda:N} is CUDA, everything else host). */
    public static MemoryKind ofLocation(String location) {
        return location != null && location.regionMatches(true, 0, "cuda", 0, 4) ? CUDA : HOST; // no allocation
    }
}
