package io.mooncake4j.engine.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.rdma.verbs.QpCapabilities;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class RdmaSettingsTest {

    @Test
    void defaultsShouldBeMooncakes() {
        RdmaSettings s = RdmaSettings.from(Map.of());
        assertEquals(RdmaSettings.defaults(), s);
        assertEquals(65536, s.sliceSize());
        assertEquals(16384, s.fragmentLimit());
        assertEquals(9, s.retryCnt());
        assertEquals(2, s.numQpPerEp());
        assertEquals(4096, s.mtuBytes());
        assertTrue(s.autoGid());
        assertTrue(s.relaxedOrdering());
        assertEquals(QpCapabilities.mooncakeDefaults(), s.qpCapabilities());
    }

    @Test
    void environmentShouldOverrideWithinRange() {
        RdmaSettings s = RdmaSettings.from(Map.of("MC_SLICE_SIZE", "131072", "MC_FRAGMENT_RATIO", "4",
                "MC_GID_INDEX", "3", "MC_MTU", "1024", "MC_IB_TC", "106", "MC_IB_SL", "3",
                "MC_IB_PCI_RELAXED_ORDERING", "0", "MC_NUM_QP_PER_EP", "4"));
        assertEquals(131072, s.sliceSize());
        assertEquals(32768, s.fragmentLimit());
        assertEquals(3, s.gidIndex());
        assertEquals(1024, s.mtuBytes());
        assertEquals(106, s.trafficClass());
        assertEquals(3, s.serviceLevel());
        assertFalse(s.relaxedOrdering());
        assertEquals(4, s.numQpPerEp());
    }

    @Test
    void ncclGidIndexShouldBeTheFallback() {
        assertEquals(5, RdmaSettings.from(Map.of("NCCL_IB_GID_INDEX", "5")).gidIndex());
        assertEquals(2, RdmaSettings.from(Map.of("NCCL_IB_GID_INDEX", "5", "MC_GID_INDEX", "2")).gidIndex());
    }

    @Test
    void invalidValuesShouldBeIgnoredLikeMooncakeDoes() {
        RdmaSettings s = RdmaSettings.from(Map.of("MC_MTU", "1500", "MC_RETRY_CNT", "500", "MC_IB_SL", "x",
                "MC_MAX_MR_SIZE", "-1"));
        assertEquals(4096, s.mtuBytes());
        assertEquals(9, s.retryCnt());
        assertEquals(0, s.serviceLevel());
        assertEquals(1L << 40, s.maxMrSize());
    }

    @Test
    void aSliceAboveOneGibIsIgnoredSoThatSliceLengthsFitAnIntAndMaxMsgSz() {
        assertEquals(65536, RdmaSettings.from(Map.of("MC_SLICE_SIZE", String.valueOf(Integer.MAX_VALUE))).sliceSize());
        assertEquals(1 << 30, RdmaSettings.from(Map.of("MC_SLICE_SIZE", String.valueOf(1 << 30))).sliceSize());
    }
}
