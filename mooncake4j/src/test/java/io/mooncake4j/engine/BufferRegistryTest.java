package io.mooncake4j.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class BufferRegistryTest {

    @Test
    void followsMooncakeRegistrationRules() {
        BufferRegistry r = new BufferRegistry();
        assertEquals(ErrorCodes.INVALID_ARGUMENT, r.register(0x1000, 0, "*"));
        assertEquals(0, r.register(0x1000, 0x1000, "*"));
        assertEquals(ErrorCodes.ADDRESS_OVERLAPPED, r.register(0x1000, 0x1000, "*"), "exact duplicate");
        assertEquals(ErrorCodes.ADDRESS_OVERLAPPED, r.register(0x1800, 0x1000, "*"));
        assertEquals(0, r.register(0x2000, 0x1000, "*"), "adjacent is fine");
        assertEquals(ErrorCodes.ADDRESS_OVERLAPPED,
                r.registerBatch(new long[] {0x10000, 0x10800}, new long[] {0x1000, 0x1000}, new String[] {"*", "*"}));
        assertEquals(2, r.size(), "a failed batch registers nothing");
        assertEquals(ErrorCodes.ADDRESS_NOT_REGISTERED, r.unregister(0x1800));
        assertEquals(0, r.unregister(0x1000));
        assertEquals(1, r.size());
    }

    @Test
    void findRequiresTheWholeRangeInsideOneBuffer() {
        BufferRegistry r = new BufferRegistry();
        r.register(0x1000, 0x1000, "*");
        r.register(0x2000, 0x1000, "*");
        assertNotNull(r.find(0x1000, 0x1000));
        assertNotNull(r.find(0x2800, 0x800));
        assertNull(r.find(0x1800, 0x1000), "spans two buffers");
        assertNull(r.find(0x2800, Long.MAX_VALUE), "overflowing length");
        assertNull(r.find(0x0800, 0x10));
        assertNull(r.find(-16, 8));
    }
}
