package io.mooncake4j.connector.worker.plan;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class DescriptorBufferTest {

    @Test
    void growsKeepsOrderAndReusesArraysAfterClear() {
        DescriptorBuffer b = new DescriptorBuffer(1);
        for (int i = 0; i < 100; i++) {
            b.add(i, 1000 + i, 10 + i);
        }
        assertEquals(100, b.size());
        assertEquals(99, b.src(99));
        assertEquals(1099, b.dst(99));
        assertEquals(109, b.len(99));
        assertEquals(100 * 10 + 99 * 100 / 2, b.totalBytes());
        long[] backing = b.srcArray();
        b.clear();
        assertEquals(0, b.size());
        b.add(5, 6, 7);
        assertSame(backing, b.srcArray());
        assertArrayEquals(new long[] {5}, b.copySrc());
        assertArrayEquals(new long[] {6}, b.copyDst());
        assertArrayEquals(new long[] {7}, b.copyLen());
        assertThrows(IndexOutOfBoundsException.class, () -> b.src(1));
    }

    @Test
    void truncateRollsBackLengthsAndTotal() {
        DescriptorBuffer b = new DescriptorBuffer();
        b.add(1, 2, 3);
        b.add(4, 5, 6);
        b.truncate(1);
        assertEquals(1, b.size());
        assertEquals(3, b.totalBytes());
        assertThrows(IndexOutOfBoundsException.class, () -> b.truncate(2));
    }
}
