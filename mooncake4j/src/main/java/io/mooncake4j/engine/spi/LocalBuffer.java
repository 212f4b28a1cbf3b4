package io.mooncake4j.engine.spi;

import java.util.Objects;

/**
 * One buffer registered with the core, as a transport sees it.
 *
 * @param address  base virtual address in this process
 * @param length   bytes
 * @param location registration location ({@code "*"}, {@code "cpu:0"}, {@code "cuda:1"}, ...)
 * @param kind     the memory kind of {@code location}
 */
public record LocalBuffer(long address, long length, String location, MemoryKind kind) {

    public LocalBuffer {
        Objects.requireNonNull(location, "location");
        Objects.requireNonNull(kind, "kind");
    }

    public static LocalBuffer of(long address, long length, String location) {
        return new LocalBuffer(address, length, location, MemoryKind.ofLocation(location));
    }

    /** Whether {@code [addr, addr+len)} lies inside this buffer (unsigned, no overflow). */
    public boolean contains(long addr, long len) {
        return len >= 0 && Long.compareUnsigned(addr, address) >= 0 && Long.compareUnsigned(len, length) <= 0
                && Long.compareUnsigned(addr - address, length - len) <= 0;
    }
}
