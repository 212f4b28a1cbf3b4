package io.mooncake4j.engine.handshake;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Segment names split the way Mooncake's parseHostNameWithPort does. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class PeerAddressTest {

    @Test
    void splitsNamesLikeMooncake() {
        assertEquals(new PeerAddress("10.0.0.2", 15321), PeerAddress.parse("10.0.0.2:15321", 12001));
        assertEquals(new PeerAddress("host", 12001), PeerAddress.parse("host", 12001));
        assertEquals(new PeerAddress("host", 12001), PeerAddress.parse("host:notaport", 12001));
        assertEquals(new PeerAddress("host", 12001), PeerAddress.parse("host:70000", 12001));
        assertEquals(new PeerAddress("::1", 15000), PeerAddress.parse("[::1]:15000", 12001));
        assertEquals(new PeerAddress("::1", 12001), PeerAddress.parse("::1", 12001));
        assertEquals(new PeerAddress("fe80::1%eth0", 15001), PeerAddress.parse("fe80::1%eth0:15001", 12001));
        assertEquals(new PeerAddress("fe80::1%eth0", 12001), PeerAddress.parse("fe80::1%eth0", 12001));
    }

    @Test
    void formatsIpv6WithBrackets() {
        assertEquals("[::1]:15000", PeerAddress.format("::1", 15000));
        assertEquals("10.0.0.1:15000", PeerAddress.format("10.0.0.1", 15000));
    }
}
