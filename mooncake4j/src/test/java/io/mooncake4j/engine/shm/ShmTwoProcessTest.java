package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.spi.FixedPeer;
import io.mooncake4j.engine.spi.RecordedSlices;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.internal.sys.SharedMemory;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link ShmTransport} against a real second process (a child JVM running {@link ShmChild}). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShmTwoProcessTest {

    private static Process child;
    private static BufferedReader out;
    private static Writer in;
    private static SegmentDescriptor desc;

    @BeforeAll
    static void startChild() throws Exception {
        assumeTrue(SharedMemory.available(), () -> "no memfd here: " + SharedMemory.unavailableReason());
        assumeTrue(MachineIdentity.local() != null, "no /proc machine identity");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        child = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xshare:auto", "-cp",
                System.getProperty("java.class.path"), ShmChild.class.getName())
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        in = new OutputStreamWriter(child.getOutputStream(), StandardCharsets.UTF_8);
        String line;
        while ((line = out.readLine()) != null && !line.startsWith("DESC ")) {
            // skip anything else the child prints
        }
        assertNotNull(line, "child exited before describing its buffers");
        desc = SegmentDescriptor.parse(line.substring(5));
    }

    @AfterAll
    static void stopChild() throws Exception {
        if (child != null) {
            try {
                in.write("quit\n");
                in.flush();
            } catch (java.io.IOException ignored) { // already gone
            }
            if (!child.waitFor(20, TimeUnit.SECONDS)) {
                child.destroyForcibly();
            }
            assertEquals(0, child.waitFor(), "child exit status");
        }
    }

    private static String ask(String cmd) throws Exception {
        in.write(cmd + "\n");
        in.flush();
        return out.readLine();
    }

    @Test
    void childAdvertisesItsPidMachineAndMemfdButNoMemfdForPrivateMemory() {
        ShmAdvert.Peer p = ShmAdvert.peerOf(desc);
        assertNotNull(p);
        assertEquals(child.pid(), p.pid());
        assertEquals(MachineIdentity.local(), p.machine());
        assertTrue(ShmAdvert.bufferOf(desc.buffers().get(0)).mappable());
        assertFalse(ShmAdvert.bufferOf(desc.buffers().get(1)).mappable());
    }

    @Test
    void readsAndWritesTheChildsMemfdBufferThroughOneMapping() throws Exception {
        SegmentDescriptor.Buffer remote = desc.buffers().get(0);
        ShmTransport t = new ShmTransport();
        t.install(null);
        FixedPeer peer = FixedPeer.sameMachine(7, desc);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment local = a.allocate(remote.length(), 4096);
            LocalBuffer lb = LocalBuffer.of(local.address(), local.byteSize(), "cpu:0");
            assertTrue(t.canTransfer(peer, lb, remote));
            // read the child's pattern in 16 slices of 64 KiB
            RecordedSlices read = RecordedSlices.host();
            for (int i = 0; i < 16; i++) {
                read.add(false, local.address() + i * 65536L, remote.addr() + i * 65536L, 65536);
            }
            t.submit(peer, read);
            assertTrue(read.allDone(), read.outcome::toString);
            assertEquals(-1, ShmFixtures.firstMismatch(local, 1));
            // write a new pattern and let the child check every byte
            ShmFixtures.fill(local, 3);
            t.submit(peer, RecordedSlices.host().add(true, local.address(), remote.addr(), remote.length()));
            assertEquals("OK", ask("check shared 3"));
            assertEquals(1, t.mappedBuffers(7)); // mapped once for all slices
            t.forget(peer);
            assertEquals(0, t.mappedBuffers(7));
        } finally {
            t.uninstall();
        }
    }

    @Test
    void reachesTheChildsPrivateMemoryWithProcessVm() throws Exception {
        SegmentDescriptor.Buffer remote = desc.buffers().get(1);
        ShmTransport t = new ShmTransport();
        t.install(null);
        FixedPeer peer = FixedPeer.sameMachine(8, desc);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment local = a.allocate(remote.length(), 4096);
            assertTrue(t.canTransfer(peer, LocalBuffer.of(local.address(), local.byteSize(), "cpu:0"), remote));
            RecordedSlices read = RecordedSlices.host().add(false, local.address(), remote.addr(), remote.length());
            t.submit(peer, read);
            assertTrue(read.allDone(), read.outcome::toString);
            assertEquals(-1, ShmFixtures.firstMismatch(local, 2));
            ShmFixtures.fill(local, 4);
            RecordedSlices write = RecordedSlices.host().add(true, local.address(), remote.addr(), remote.length());
            t.submit(peer, write);
            assertTrue(write.allDone(), write.outcome::toString);
            assertEquals("OK", ask("check private 4"));
            assertEquals(0, t.mappedBuffers(8));
        } finally {
            t.uninstall();
        }
    }

    @Test
    void aTransportOnAnotherMachineIdentityDeclinesAndFailsSlicesAsUnreachable() throws Exception {
        ShmTransport t = new ShmTransport(new MachineIdentity("other-boot", MachineIdentity.local().pidNamespace()));
        t.install(null);
        FixedPeer peer = FixedPeer.sameMachine(9, desc);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment local = a.allocate(4096);
            SegmentDescriptor.Buffer remote = desc.buffers().get(0);
            assertFalse(t.canTransfer(peer, LocalBuffer.of(local.address(), 4096, "cpu:0"), remote));
            RecordedSlices s = RecordedSlices.host().add(true, local.address(), remote.addr(), 4096);
            t.submit(peer, s);
            assertEquals(SliceFailure.UNREACHABLE, s.failures.get(0));
        } finally {
            t.uninstall();
        }
    }
}
