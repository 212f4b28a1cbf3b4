package io.mooncake4j.memory;

import java.lang.foreign.MemorySegment;

/**
 * Pins and unpins host allocations for a device (for example {@code cudaHostRegister}), so a
 * {@link HostMemoryAllocator} can hand out page-locked memory with the same lifetime rules as
 * plain host memory.
 */
public interface HostMemoryPinner {

    /**
     * Pins a fresh allocation. Throwing refuses it: the allocator frees the memory and rethrows.
     *
     * @param segment the memory segment
     */
    void pin(MemorySegment segment);

    /**
     * Unpins an allocation about to be freed. The memory is freed whether or not this throws;
     * the exception then propagates from {@code close()}.
     *
     * @param segment the memory segment
     */
    void unpin(MemorySegment segment);

    /** Pins nothing: plain pageable host memory. */
    HostMemoryPinner NONE = new HostMemoryPinner() {
        @Override
        public void pin(MemorySegment segment) {}

        @Override
        public void unpin(MemorySegment segment) {}
    };
}
