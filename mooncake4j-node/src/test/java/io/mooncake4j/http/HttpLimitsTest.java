package io.mooncake4j.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The front door's limits from flags and the environment, and the per-address shares of slots. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class HttpLimitsTest {

    @Test
    void flagsWinOverTheEnvironmentWhichWinsOverTheDefaults() {
        Map<String, String> flags = Map.of("http-header-timeout", "2.5", "http-body-slots", "32");
        Map<String, String> env = Map.of(HttpLimits.ENV_HEADER_TIMEOUT, "7", HttpLimits.ENV_MIN_BODY_RATE, "99",
                HttpLimits.ENV_IN_FLIGHT_PER_CLIENT, "5");
        HttpLimits l = HttpLimits.from(flags::get, env);
        assertEquals(Duration.ofMillis(2500), l.headerTimeout());
        assertEquals(99, l.minBodyRate());
        assertEquals(32, l.bodySlots());
        assertEquals(8, l.bodySlotsPerClient(), "a smaller total keeps a quarter per client");
        assertEquals(5, l.inFlightPerClient());
        assertEquals(5, l.inFlightShare(4096));
        assertEquals(HttpLimits.defaults().idleTimeout(), l.idleTimeout());
        assertEquals(HttpLimits.defaults(), HttpLimits.from(n -> null, Map.of()));
        assertEquals(2048, HttpLimits.defaults().inFlightShare(4096), "by default half the total per network");
        assertEquals(4096, HttpLimits.defaults().withInFlightPerClient(0).inFlightShare(4096), "0: the total");
        assertEquals(1, HttpLimits.defaults().inFlightShare(1));
    }

    @Test
    void aBadValueIsRefusedNamingItsFlagOrVariable() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> HttpLimits.from(Map.of("http-min-body-rate", "fast")::get, Map.of()));
        assertTrue(e.getMessage().contains("--http-min-body-rate"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> HttpLimits.from(n -> null, Map.of(HttpLimits.ENV_HEADER_TIMEOUT, "-1")));
        assertTrue(e.getMessage().contains(HttpLimits.ENV_HEADER_TIMEOUT), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> HttpLimits.from(Map.of("http-body-slots", "4", "http-body-slots-per-client", "9")::get, Map.of()));
        assertTrue(e.getMessage().contains("share"), e.getMessage());
    }

    @Test
    void oneAddressHoldsAtMostItsShareAndTheOthersStillGetSlots() throws Exception {
        FairSlots slots = new FairSlots(4, 2);
        InetAddress a = InetAddress.getByName("127.0.0.2");
        InetAddress b = InetAddress.getByName("127.0.0.3");
        FairSlots.Slot a1 = slots.tryAcquire(a);
        FairSlots.Slot a2 = slots.tryAcquire(a);
        assertNull(slots.tryAcquire(a), "a third slot for one address");
        assertNull(slots.acquire(a, Duration.ofMillis(1)), "a third slot for one address, waiting");
        FairSlots.Slot b1 = slots.tryAcquire(b);
        FairSlots.Slot b2 = slots.tryAcquire(b);
        assertEquals(4, slots.inUse());
        a1.close();
        a1.close(); // once
        assertEquals(3, slots.inUse());
        assertEquals(1, slots.heldBy(a));
        try (FairSlots.Slot again = slots.acquire(a, Duration.ofSeconds(10))) {
            assertEquals(2, slots.heldBy(a));
        }
        a2.close();
        b1.close();
        b2.close();
        assertEquals(0, slots.inUse());
    }
}
