package io.mooncake4j.connector.bootstrap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.mooncake4j.MooncakeConfigException;
import io.mooncake4j.connector.bootstrap.BootstrapAddresses.HostPort;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class BootstrapAddressesTest {

    @Test
    void onlyTpRankZeroPpRankZeroLaunches() {
        assertTrue(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.empty(), 0, 0, false, 0, 0));
        assertFalse(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.empty(), 1, 0, false, 0, 0));
        assertFalse(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.empty(), 0, 1, false, 0, 0));
    }

    @Test
    void dataParallelRuleDependsOnLoadBalancingMode() {
        // internal LB: one server for all DP engines -> data_parallel_index 0 only
        assertFalse(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.empty(), 0, 0, false, 0, 1));
        // hybrid/external LB: one per instance -> local DP rank 0
        assertTrue(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.empty(), 0, 0, true, 0, 3));
        assertFalse(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.empty(), 0, 0, true, 1, 0));
    }

    @Test
    void externalServerSuppressesTheLocalOneAndIsWhereWorkersRegister() {
        assertFalse(BootstrapAddresses.shouldLaunchBootstrapServer(Optional.of("10.0.0.9:9000"), 0, 0, false, 0, 0));
        assertEquals(new HostPort("10.0.0.9", 9000), BootstrapAddresses.getMooncakeBootstrapAddr(
                Optional.of("10.0.0.9:9000"), true, 2, "m", "d", 8998));
        assertEquals(new HostPort("::1", 9000), BootstrapAddresses.splitHostPort("[::1]:9000"));
        for (String bad : new String[] {":9000", "h:0", "h:70000", "h", "h:x", "[::1]9000"}) {
            MooncakeConfigException e = assertThrows(MooncakeConfigException.class,
                    () -> BootstrapAddresses.splitHostPort(bad), bad);
            assertTrue(e.getMessage().contains("bootstrap_server_address must specify a host and port"));
        }
    }

    @Test
    void registrationHostFollowsVllmPrecedence() {
        assertEquals(new HostPort("127.0.0.1", 8998),
                BootstrapAddresses.getMooncakeBootstrapAddr(Optional.empty(), true, 2, "master", "dpmaster", 8998));
        assertEquals(new HostPort("master", 8998),
                BootstrapAddresses.getMooncakeBootstrapAddr(Optional.empty(), false, 2, "master", "dpmaster", 8998));
        assertEquals(new HostPort("dpmaster", 9100),
                BootstrapAddresses.getMooncakeBootstrapAddr(Optional.empty(), false, 1, "master", "dpmaster", 9100));
    }

    @Test
    void urlsBracketIpv6Hosts() {
        assertEquals("http://10.0.0.2:8998", BootstrapAddresses.httpUrl("10.0.0.2", 8998));
        assertEquals("tcp://[fe80::1]:5000", BootstrapAddresses.tcpAddress("fe80::1", 5000));
    }
}
