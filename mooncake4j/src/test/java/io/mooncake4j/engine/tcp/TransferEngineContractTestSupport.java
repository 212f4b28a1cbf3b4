package io.mooncake4j.engine.tcp;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

/** Pattern helpers shared by the TCP tests. */
final class TransferEngineContractTestSupport {

    private TransferEngineContractTestSupport() {}

    static void fill(MemorySegment s, long seed) {
        Random r = new Random(seed);
        for (long i = 0; i + 8 <= s.byteSize(); i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
    }
}
