package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;

import io.mooncake4j.connector.MooncakeConnectorMetadata;
import io.mooncake4j.connector.PullReqMeta;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class MetadataCopyTest {

    @Test
    void shouldGiveEachTpRankItsOwnPullBookkeeping() {
        MooncakeConnectorMetadata m = new MooncakeConnectorMetadata();
        m.addNewReq("d1", new int[][] {{4, 5}}, Map.of("transfer_id", "x1", "remote_engine_id", "p",
                "remote_bootstrap_addr", "http://127.0.0.1:1"), true);
        m.addNewReq("p1", new int[][] {{7}}, Map.of("transfer_id", "x2"), false);
        m.setReqsNotProcessed(Set.of("x3"));
        m.reqsToRecv().get("p").get("d1").setPullTasksCount(2);

        MooncakeConnectorMetadata c = ModelRunner.copyOf(m);
        PullReqMeta orig = m.reqsToRecv().get("p").get("d1");
        PullReqMeta copy = c.reqsToRecv().get("p").get("d1");
        assertNotSame(orig, copy, "a worker's pull_tasks_count must not be another worker's");
        assertEquals(0, copy.pullTasksCount(), "fresh bookkeeping, as an unpickled copy has");
        assertEquals("x1", copy.transferId());
        assertEquals("http://127.0.0.1:1", copy.remoteBootstrapAddr());
        assertArrayEquals(new int[][] {{4, 5}}, copy.localBlockIds());
        assertEquals(m.reqsToSend(), c.reqsToSend());
        assertEquals(Set.of("x3"), c.reqsNotProcessed());
    }
}
