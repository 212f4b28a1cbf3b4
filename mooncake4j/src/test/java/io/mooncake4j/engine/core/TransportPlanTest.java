package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngineException;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.TransportDeclaration;
import java.util.ArrayList;
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
        assertEquals(List.of("tcp"), resolve("tcp", ALL, Map.of()).all());
        assertEquals(List.of("tcp"), resolve(" TCP ", ALL, Map.of()).required());
        TransportPlan rdma = resolve("rdma", ALL, Map.of());
        assertEquals(List.of("rdma"), rdma.required());
        assertEquals(List.of("rdma", "tcp"), rdma.all(), "tcp beside rdma for what rdma cannot reach");
        assertEquals(List.of("shm", "tcp"), resolve("shm", ALL, Map.of()).all());
        for (String auto : new String[] {"auto", "", null}) {
            TransportPlan p = resolve(auto, ALL, Map.of());
            assertEquals(List.of(), p.required());
            assertEquals(List.of("shm", "rdma", "tcp"), p.all());
        }
    }

    @Test
    void cudaIpcComesFirstAndMcTransportsNamesIt() {
        Set<String> withIpc = Set.of("cuda-ipc", "shm", "rdma", "tcp");
        assertEquals(List.of("cuda-ipc", "shm", "rdma", "tcp"), resolve("auto", withIpc, Map.of()).all());
        assertEquals(List.of("cuda-ipc", "tcp"),
                resolve("auto", withIpc, Map.of("MC_TRANSPORTS", "tcp,cuda-ipc")).all());
        assertEquals(List.of("shm", "tcp"), resolve("shm", withIpc, Map.of()).all(),
                "only auto installs cuda-ipc");
    }

    @Test
    void anEngineOfferingFewerTransportsRefusesTheOthersByName() {
        TransferEngineException e = assertThrows(TransferEngineException.class,
                () -> resolve("rdma", Set.of("tcp"), Map.of()));
        assertTrue(e.getMessage().contains("TransferEngines.create(\"rdma\")"), e.getMessage());
        assertEquals(List.of("tcp"), resolve("auto", Set.of("tcp"), Map.of()).all());
    }

    @Test
    void mcTransportsRestricts() {
        assertEquals(List.of("shm", "tcp"), resolve("auto", ALL, Map.of("MC_TRANSPORTS", "tcp, shm")).all());
        assertEquals(List.of("rdma"), resolve("rdma", ALL, Map.of("MC_TRANSPORTS", "rdma")).all());
        assertTrue(assertThrows(TransferEngineException.class,
                () -> resolve("rdma", ALL, Map.of("MC_TRANSPORTS", "tcp"))).getMessage()
                .contains("excludes"));
        assertTrue(assertThrows(TransferEngineException.class,
                () -> resolve("auto", ALL, Map.of("MC_TRANSPORTS", "ib"))).getMessage()
                .contains("unknown transport 'ib'"));
        assertEquals(List.of("shm", "rdma", "tcp"), resolve("auto", ALL, Map.of("MC_TRANSPORTS", " ")).all(),
                "blank: no restriction");
        assertTrue(assertThrows(TransferEngineException.class,
                () -> resolve("auto", Set.of("tcp"), Map.of("MC_TRANSPORTS", "shm"))).getMessage()
                .contains("no transport left"));
    }

    @Test
    void anUnknownProtocolIsRefused() {
        assertTrue(assertThrows(TransferEngineException.class, () -> resolve("nvlink", ALL, Map.of()))
                .getMessage().contains("unsupported protocol 'nvlink'"));
    }

    @Test
    void theProvidedTransportsAreFoundInTheirDeclaredOrder() {
        assertEquals(List.of("cuda-ipc", "shm", "rdma", "tcp"), TransportLoader.names());
        assertTrue(assertThrows(TransferEngineException.class, () -> resolve("cuda-ipc", ALL, Map.of()))
                .getMessage().contains("use \"shm\", \"rdma\", \"tcp\" or \"auto\""), "cuda-ipc is not requestable");
    }

    @Test
    void aNewTransportTakesItsPlaceByItsDeclarationAlone() {
        TransportDeclaration fault = new TransportDeclaration("fault", Set.of(MemoryKind.HOST), 50, true, false);
        List<TransportDeclaration> offered = new ArrayList<>(declarations(ALL));
        offered.add(fault);
        TransportPlan auto = TransportPlan.resolve("auto", offered, TransportLoader.declarations(), Map.of());
        assertEquals(List.of("shm", "rdma", "fault", "tcp"), auto.all(), "between rdma (30) and tcp (90)");
        TransportPlan asked = TransportPlan.resolve("fault", offered, TransportLoader.declarations(), Map.of());
        assertEquals(List.of("fault"), asked.required());
        assertEquals(List.of("fault", "tcp"), asked.all(), "tcp is a companion by its declaration");
        assertEquals(List.of("fault"), TransportPlan.resolve("auto", offered, TransportLoader.declarations(),
                Map.of("MC_TRANSPORTS", "fault")).all());
    }

    @Test
    void badDeclarationsAreRefused() {
        assertThrows(IllegalArgumentException.class,
                () -> new TransportDeclaration("auto", Set.of(MemoryKind.HOST), 1, true, false));
        assertThrows(IllegalArgumentException.class,
                () -> new TransportDeclaration("My Transport", Set.of(MemoryKind.HOST), 1, true, false));
        assertThrows(IllegalArgumentException.class, () -> new TransportDeclaration("x", Set.of(), 1, true, false));
    }

    /** The provided declarations named in {@code names}. */
    private static List<TransportDeclaration> declarations(Set<String> names) {
        return TransportLoader.declarations().stream().filter(d -> names.contains(d.name())).toList();
    }

    /** Resolves against the provided transports named in {@code offered}. */
    private static TransportPlan resolve(String protocol, Set<String> offered, Map<String, String> env) {
        return TransportPlan.resolve(protocol, declarations(offered), TransportLoader.declarations(), env);
    }
}
