package io.mooncake4j.engine.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.engine.spi.EngineSettings;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import io.mooncake4j.engine.spi.TransportProvider;
import java.io.IOException;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Transports are found as providers and ordered by their declarations: a new transport (the fault
 * transport) registered by a services file alone gets its place, and an engine installs it.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class TransportLoaderTest {

    private static final String SERVICES = "META-INF/services/" + TransportProvider.class.getName();

    @Test
    void theBuiltInTransportsAreProvidersInTheirDeclaredOrder() {
        List<TransportDeclaration> ds = TransportLoader.declarations();
        assertEquals(List.of("cuda-ipc", "shm", "rdma", "tcp"), ds.stream().map(TransportDeclaration::name).toList());
        for (int i = 1; i < ds.size(); i++) {
            assertTrue(ds.get(i - 1).preference() < ds.get(i).preference(), ds.toString());
        }
        assertEquals(List.of("tcp"), ds.stream().filter(TransportDeclaration::companion)
                .map(TransportDeclaration::name).toList());
        EngineSettings s = CoreFixture.settings(30_000);
        for (TransportFactory f : TransportLoader.all(s)) {
            assertTrue(f.declaration().covers(f.create().get().capabilities()), f.name());
        }
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TransportLoader.load("nvlink", s))
                .getMessage().contains("provided: [cuda-ipc, shm, rdma, tcp]"));
    }

    @Test
    void aServicesFileAloneGivesTheFaultTransportItsPlace(@TempDir Path dir) throws IOException {
        try (URLClassLoader loader = loaderWith(dir, FaultTransportProvider.class.getName())) {
            List<TransportProvider> ps = TransportLoader.providers(loader);
            assertEquals(List.of("cuda-ipc", "shm", "rdma", "fault", "tcp"),
                    ps.stream().map(p -> p.declaration().name()).toList());
            TransportFactory fault = ps.get(3).factory(CoreFixture.settings(30_000));
            TransportFactory tcp = ps.get(4).factory(CoreFixture.settings(30_000));
            try (CoreEngine e = EngineBuilder.of(CoreFixture.settings(30_000), tcp, fault)) {
                assertEquals(0, e.initialize("127.0.0.1", TransferEngine.P2P_HANDSHAKE, "fault", ""), e.lastError());
                assertEquals(List.of("fault", "tcp"), e.transportNames(),
                        "asked for by name, with the companion beside it, in the declared order");
            }
        }
    }

    @Test
    void twoProvidersOfOneNameAreRefused(@TempDir Path dir) throws IOException {
        try (URLClassLoader loader = loaderWith(dir, Impostor.class.getName())) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> TransportLoader.providers(loader));
            assertTrue(e.getMessage().contains("'tcp' is provided twice"), e.getMessage());
        }
    }

    /** Declares the name tcp already has. */
    public static final class Impostor implements TransportProvider {
        @Override
        public TransportDeclaration declaration() {
            return new TransportDeclaration("tcp", Set.of(MemoryKind.HOST), 1, true, false);
        }

        @Override
        public TransportFactory factory(EngineSettings settings) {
            throw new UnsupportedOperationException("never made");
        }
    }

    private static URLClassLoader loaderWith(Path dir, String provider) throws IOException {
        Path file = dir.resolve(SERVICES);
        Files.createDirectories(file.getParent());
        Files.writeString(file, provider + "\n");
        return new URLClassLoader(new java.net.URL[] {dir.toUri().toURL()}, TransportLoaderTest.class.getClassLoader());
    }

    @Test
    void anEngineRefusesTheSameNameOfferedTwice() {
        TransportFactory a = new FaultTransport("twin", 1).factory();
        TransportFactory b = new FaultTransport("twin", 2).factory();
        assertThrows(IllegalArgumentException.class, () -> EngineBuilder.of(CoreFixture.settings(30_000), a, b));
    }
}
