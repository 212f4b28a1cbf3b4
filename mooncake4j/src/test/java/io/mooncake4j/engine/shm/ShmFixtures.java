package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.ExtensionDescriptors;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.Transport;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/** Test doubles for driving {@link ShmTransport} without the engine core. */
final class ShmFixtures {

    private ShmFixtures() {}

    /** The TCP-shaped descriptor of {@code buffers} with {@code t}'s extensions, through JSON and back. */
    static SegmentDescriptor describe(String name, List<LocalBuffer> buffers, Transport t) throws Exception {
        List<long[]> bufs = new ArrayList<>();
        for (LocalBuffer b : buffers) {
            bufs.add(new long[] {b.address(), b.length()});
        }
        return SegmentDescriptor.parse(ExtensionDescriptors.describe(name, 1, bufs, t).toJson());
    }

    /** Deterministic bytes: what {@code fill} writes and {@code firstMismatch} checks. */
    static void fill(MemorySegment s, long seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, pattern(seed, i));
        }
    }

    /** The first offset whose byte differs from the pattern, or -1. */
    static long firstMismatch(MemorySegment s, long seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != pattern(seed, i)) {
                return i;
            }
        }
        return -1;
    }

    static byte pattern(long seed, long i) {
        return (byte) (seed * 31 + i * 7 + (i >>> 9));
    }
}
