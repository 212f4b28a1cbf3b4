package io.mooncake4j.connector;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class KvTransferParamsTest {

    @Test
    void keysAreVllmsNames() {
        assertEquals("do_remote_prefill", KvTransferParams.DO_REMOTE_PREFILL);
        assertEquals("do_remote_decode", KvTransferParams.DO_REMOTE_DECODE);
        assertEquals("transfer_id", KvTransferParams.TRANSFER_ID);
        assertEquals("remote_engine_id", KvTransferParams.REMOTE_ENGINE_ID);
        assertEquals("remote_bootstrap_addr", KvTransferParams.REMOTE_BOOTSTRAP_ADDR);
        assertEquals("_p_side_truncated", KvTransferParams.P_SIDE_TRUNCATED);
    }

    @Test
    void proxyParamsFollowTheProxyContractAndKeyOrder() {
        KvTransferParams p = KvTransferParams.forRemoteDecode("xfer-1");
        assertEquals(List.of("do_remote_decode", "do_remote_prefill", "transfer_id"), List.copyOf(p.asMap().keySet()));
        assertTrue(p.doRemoteDecode());
        assertFalse(p.doRemotePrefill());
        KvTransferParams d = KvTransferParams.forRemotePrefill("xfer-1", "p-engine", "http://h:8998");
        assertEquals(List.of("do_remote_decode", "do_remote_prefill", "remote_bootstrap_addr", "remote_engine_id",
                "transfer_id"), List.copyOf(d.asMap().keySet()));
        assertTrue(d.doRemotePrefill());
        assertEquals("p-engine", d.remoteEngineId());
        assertEquals("http://h:8998", d.remoteBootstrapAddr());
        assertEquals("xfer-1", d.transferId());
    }

    @Test
    void wrapIsAViewThatWritesThrough() {
        Map<String, Object> m = new HashMap<>();
        KvTransferParams p = KvTransferParams.wrap(m);
        assertSame(m, p.asMap());
        assertTrue(p.isEmpty());
        p.setDoRemotePrefill(true);
        assertEquals(Boolean.TRUE, m.get("do_remote_prefill"));
        p.setDoRemoteDecode(false);
        assertEquals(Boolean.FALSE, m.get("do_remote_decode"));
        assertTrue(p.containsKey("do_remote_decode"));
        assertNull(p.transferId());
        assertFalse(p.hasTransferId());
        m.put("transfer_id", "");
        assertFalse(p.hasTransferId(), "an empty transfer id is falsy");
        m.put("transfer_id", 42L);
        assertEquals("42", p.transferId());
    }

    @Test
    void flagsUsePythonTruthiness() {
        for (Object falsy : new Object[] {null, false, 0L, 0, 0.0, "", List.of(), Map.of(), new Object[0]}) {
            assertFalse(KvTransferParams.isTruthy(falsy), String.valueOf(falsy));
        }
        for (Object truthy : new Object[] {true, 1L, -1, 0.5, "x", "False", List.of(1), Map.of("k", 1)}) {
            assertTrue(KvTransferParams.isTruthy(truthy), String.valueOf(truthy));
        }
        assertTrue(KvTransferParams.isNullOrEmpty(null));
        assertTrue(KvTransferParams.isNullOrEmpty(Map.of()));
        assertFalse(KvTransferParams.isNullOrEmpty(Map.of("k", false)));
    }
}
