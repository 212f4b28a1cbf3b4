package io.mooncake4j.memory;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.Optional;

/**
 * One backing allocation that KV-cache tensors are views onto: the unit of memory registration.
 *
 * <p>Mirrors a torch {@code UntypedStorage} as vLLM's connector sees it: {@link #address()} is
 * {@code storage.data_ptr()}, {@link #byteSize()} is {@code storage.nbytes()}. The
 * {@link #location()} string uses Mooncake's names: {@code cpu:<numa>}, {@code cuda:<gpu>} or
 * {@code *} (let the engine detect it).
 *
 * <p>Implementations are immutable as far as these three values go; whether the memory is still
 * alive is the owner's business (see {@link HostMemoryAllocator}).
 */
public interface MemoryStorage {

    /** {@return absolute virtual address of the first byte} Never 0. */
    long address();

    /** {@return size in bytes} Always positive. */
    long byteSize();

    /** {@return Mooncake location string: {@code cpu:N}, {@code cuda:N} or {@code *}} */
    String location();

    /** {@return the memory as a segment when it is host memory this process can read; empty otherwise} */
    default Optional<MemorySegment> hostSegment() {
        return Optional.empty();
    }

    /**
     * {@return whether {@code [addr, addr+len)} lies inside this storage}
     *
     * @param addr the first byte
     * @param len  the number of bytes
     */
    default boolean contains(long addr, long len) {
        return len >= 0 && addr >= address() && len <= byteSize()
                && addr - address() <= byteSize() - len;
    }

    /** {@return true for {@code cuda:N} locations} */
    default boolean isDevice() {
        return MemoryLocation.isCuda(location());
    }

    /**
     * Describes memory owned by someone else (a GPU allocation, a buffer from another library).
     * Nothing is allocated or freed.
     *
     * @param address  the first byte
     * @param byteSize the size in bytes
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     * @return a storage over that memory
     */
    static MemoryStorage of(long address, long byteSize, String location) {
        return new ForeignStorage(address, byteSize, location);
    }

    /**
     * A storage that only describes memory; see {@link MemoryStorage#of}.
     *
     * @param address  the first byte
     * @param byteSize the size in bytes
     * @param location a memory location ({@code cpu:N}, {@code cuda:N} or {@code *})
     */
    record ForeignStorage(long address, long byteSize, String location) implements MemoryStorage {
        /**
         * Checks the address, size and location.
         *
         * @throws IllegalArgumentException when the address is 0, the size not positive or the location unknown
         */
        public ForeignStorage {
            if (address == 0) {
                throw new IllegalArgumentException("storage address must not be 0");
            }
            if (byteSize <= 0) {
                throw new IllegalArgumentException("storage byteSize must be positive, got " + byteSize);
            }
            MemoryLocation.validate(Objects.requireNonNull(location, "location"));
        }
    }
}
