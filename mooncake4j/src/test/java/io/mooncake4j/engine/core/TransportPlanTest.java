package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngineException;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code protocol} with Mooncake's meaning, {@code MC_TRANSPORTS} restricting the set. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TransportPlanTest {

    private static final Set<String> ALL = Set.of("shm", "rdma", "tcp");

    @Test
    void protocolsMapToTransportsInTheOrderOfPreference() {
        assertEquals(List.of("tcp"), TransportPlan.resolve("tcp", ALL, Map.of()).all());
        assertEquals(List.of("tcp"), TransportPlan.resolve(" TCP ", ALL, Map.of()).required());
        TransportPlan rdma = TransportPlan.resolve("rdma", ALL, Map.of());
        assertEquals(List.of("rdma"), rdma.required());
        assertEquals(List.of("rdma", "tcp"), rdma.all(), "tcp beside rdma for what rdma cannot reach");
        assertEquals(List.of("shm", "tcp"), TransportPlan.resolve("shm", ALL, Map.of()).all());
        for (String auto : new String[] {"auto", "", null}) {
            TransportPlan p = TransportPlan.resolve(auto, ALL, Map.of());
            assertEquals(List.of(), p.required());
            assertEquals(List.of("shm", "rdma", "tcp"), p.all());
        }
    }

    @Test
    void cudaIpcComesFirstAndMcTransportsNamesIt() {
        Set<String> withIpc = Set.of("cuda-ipc", "shm", "rdma", "tcp");
        assertEquals(List.of("cuda-ipc", "shm", "rdma", "tcp"), TransportPlan.resolve("auto", withIpc, Map.of()).all());
        assertEquals(List.of("cuda-ipc", "tcp"),
                TransportPlan.resolve("auto", withIpc, Map.of("MC_TRANSPORTS", "tcp,cuda-ipc")).all());
        assertEquals(List.of("shm", "tcp"), TransportPlan.resolve("shm", withIpc, Map.of()).all(),
                "only auto installs cuda-ipc");
    }

    @Test
    void anEngineOfferingFewerTransportsRefusesTheOthersByName() {
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> TransportPlan.resolve("rdma", Set.of("tcp"), Map.of()));
        assertTrue(e.getMessage().contains("TransferEngines.create(\"rdma\")"), e.getMessage());
        assertEquals(List.of("tcp"), TransportPlan.resolve("auto", Set.of("tcp"), Map.of()).all());
    }

    @Test
    void mcTransportsRestricts() {
        assertEquals(List.of("shm", "tcp"), TransportPlan.resolve("auto", ALL, Map.of("MC_TRANSPORTS", "tcp, shm")).all());
        assertEquals(List.of("rdma"), TransportPlan.resolve("rdma", ALL, Map.of("MC_TRANSPORTS", "rdma")).all());
        assertTrue(assertThrows(TransferEngineException.class,
                () -> TransportPlan.resolve("rdma", ALL, Map.of("MC_TRANSPORTS", "tcp"))).getMessage()
                .contains("excludes"));
        assertTrue(assertThrows(TransferEngineException.class,
                () -> TransportPlan.resolve("auto", ALL, Map.of("MC_TRANSPORTS", "ib"))).getMessage()
                .contains("unknown transport 'ib'"));
        assertEquals(List.of("shm", "rdma", "tcp"), TransportPlan.resolve("auto", ALL, Map.of("MC_TRANSPORTS", " ")).all(),
                "blank: no restriction");
        assertTrue(assertThrows(TransferEngineException.class,
                () -> TransportPlan.resolve("auto", Set.of("tcp"), Map.of("MC_TRANSPORTS", "shm"))).getMessage()
                .contains("no transport left"));
    }

    @Test
    void anUnknownProtocolIsRefused() {
        assertTrue(assertThrows(TransferEngineException.class, () -> TransportPlan.resolve("nvlink", ALL, Map.of()))
                .getMessage().contains("unsupported protocol 'nvlink'"));
    }
}
