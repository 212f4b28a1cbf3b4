package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.connector.bootstrap.BootstrapException;
import io.mooncake4j.connector.bootstrap.MooncakeBootstrapServer;

import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 20, unit = TimeUnit.SECONDS)
class SimProxyTest {

    @Test
    void shouldGiveThePrefillRequestVllmsProxyParams() {
        Map<String, Object> p = SimProxy.prefillParams("xfer-1");
        assertEquals(List.of("do_remote_decode", "do_remote_prefill", "transfer_id"), List.copyOf(p.keySet()));
        assertEquals(Boolean.TRUE, p.get("do_remote_decode"));
        assertEquals(Boolean.FALSE, p.get("do_remote_prefill"));
        assertEquals("xfer-1", p.get("transfer_id"));
    }

    @Test
    void shouldGiveTheDecodeRequestVllmsProxyParams() {
        Map<String, Object> d = SimProxy.decodeParams("xfer-1", "engine-p", "http://10.0.0.2:8998");
        assertEquals(List.of("do_remote_decode", "do_remote_prefill", "remote_bootstrap_addr", "remote_engine_id",
                "transfer_id"), List.copyOf(d.keySet()));
        assertEquals(Boolean.FALSE, d.get("do_remote_decode"));
        assertEquals(Boolean.TRUE, d.get("do_remote_prefill"));
        assertEquals("http://10.0.0.2:8998", d.get("remote_bootstrap_addr"));
        assertEquals("engine-p", d.get("remote_engine_id"));
        assertEquals("xfer-1", d.get("transfer_id"));
    }

    @Test
    void shouldMakeFreshXferUuidTransferIds() {
        String a = SimProxy.newTransferId();
        assertTrue(a.startsWith("xfer-"), a);
        assertEquals(a.substring(5), UUID.fromString(a.substring(5)).toString());
        assertNotEquals(a, SimProxy.newTransferId());
    }

    @Test
    void shouldFailToResolveAnEngineIdThatIsNotRegistered() {
        try (MooncakeBootstrapServer server = new MooncakeBootstrapServer("127.0.0.1", 0)) {
            server.start();
            String url = "http://127.0.0.1:" + server.port();
            BootstrapException e = assertThrows(BootstrapException.class, () -> SimProxy.resolveEngineId(url, 0));
            assertTrue(e.getMessage().contains("has no engine for dp rank 0"), e.getMessage());
        }
    }
}
