package io.mooncake4j.connector;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.MooncakeConnectorMetadata.ReqToSend;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The scheduler → worker message and its parts (spec §3.2, §3.4). */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class MooncakeConnectorMetadataTest {

    private static final Map<String, Object> D_PARAMS =
            KvTransferParams.forRemotePrefill("t-1", "eng-p", "http://p:8998").asMap();

    @Test
    void addNewReqFilesPullsUnderRemoteEngineAndRequest() {
        MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
        int[][] blocks = {{1, 2}, {7}};
        m.addNewReq("d-1", blocks, D_PARAMS, true);
        blocks[1][0] = 100;
        PullReqMeta pull = m.reqsToRecv().get("eng-p").get("d-1");
        assertEquals(new PullReqMeta("d-1", "t-1", new int[][] {{1, 2}, {7}}, "eng-p", "http://p:8998"), pull);
        assertEquals("d-1", pull.dReqId());
        assertTrue(m.reqsToSend().isEmpty());
    }

    @Test
    void addNewReqWithoutRemoteLoadFilesASend() {
        MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
        m.addNewReq("p-1", new int[0][], KvTransferParams.forRemoteDecode("t-9").asMap(), false);
        m.addNewReq("p-1", new int[][] {{3}}, KvTransferParams.forRemoteDecode("t-9").asMap(), false);
        assertEquals(Map.of("p-1", new ReqToSend("t-9", new int[][] {{3}})), m.reqsToSend(), "later entry wins");
        assertTrue(m.reqsToRecv().isEmpty());
    }

    @Test
    void missingKeysAreReportedWithTheKeyName() {
        MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
        ConnectorException e = assertThrows(ConnectorException.class,
                () -> m.addNewReq("p-1", new int[0][], Map.of("do_remote_decode", true), false));
        assertTrue(e.getMessage().contains("'transfer_id'"), e.getMessage());
        e = assertThrows(ConnectorException.class,
                () -> m.addNewReq("d-1", new int[0][], Map.of("transfer_id", "t"), true));
        assertTrue(e.getMessage().contains("'remote_engine_id'"), e.getMessage());
        assertTrue(m.isEmpty());
    }

    @Test
    void viewsAreUnmodifiableAndNotProcessedIsCopied() {
        MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
        java.util.Set<String> ids = new java.util.LinkedHashSet<>(Set.of("a"));
        m.setReqsNotProcessed(ids);
        ids.add("b");
        assertEquals(Set.of("a"), m.reqsNotProcessed());
        assertThrows(UnsupportedOperationException.class, () -> m.reqsNotProcessed().add("c"));
        assertThrows(UnsupportedOperationException.class, () -> m.reqsToSend().clear());
    }

    @Test
    void pullReqMetaBookkeepingIsMutableAndPartOfEquality() {
        PullReqMeta a = new PullReqMeta("d", "t", new int[][] {{1}}, "e", "u");
        PullReqMeta b = new PullReqMeta("d", "t", new int[][] {{1}}, "e", "u");
        assertEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode());
        a.setPullTasksCount(2);
        assertEquals(1, a.decrementPullTasksCount());
        assertNotEquals(a, b);
        a.decrementPullTasksCount();
        assertEquals(a, b);
        a.setFailed(true);
        assertNotEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode(), "hash ignores bookkeeping");
    }

    @Test
    void reqToSendComparesBlockIdsByValue() {
        int[][] ids = {{1, 2}};
        ReqToSend r = new ReqToSend("t", ids);
        ids[0][0] = 5;
        assertArrayEquals(new int[][] {{1, 2}}, r.localBlockIds());
        assertEquals(new ReqToSend("t", new int[][] {{1, 2}}), r);
        assertNotEquals(new ReqToSend("t", new int[][] {{1}, {2}}), r);
        assertEquals("(t, [[1, 2]])", r.toString());
    }

    @Test
    void blockIdsHelpers() {
        assertTrue(BlockIds.anyBlocks(new int[][] {{}, {3}}));
        assertEquals(false, BlockIds.anyBlocks(new int[][] {{}, {}}));
        assertEquals(3, BlockIds.totalBlocks(new int[][] {{1, 2}, {3}}));
        assertEquals(0, BlockIds.copyOf(new int[0][]).length);
    }
}
