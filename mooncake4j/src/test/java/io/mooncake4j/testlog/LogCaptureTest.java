package io.mooncake4j.testlog;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class LogCaptureTest {

    private static final Logger LOG = LoggerFactory.getLogger(LogCaptureTest.class);

    @Test
    void theTestProviderIsInstalled() {
        assertTrue(TestLog.isInstalled(), "surefire selects io.mooncake4j.testlog.CapturingServiceProvider");
        assertEquals(CapturingLogger.class, LOG.getClass());
        assertTrue(LOG.isWarnEnabled());
        assertTrue(!LOG.isDebugEnabled(), "DEBUG is below the default threshold");
    }

    @Test
    void capturesFormattedEventsWithTheirThrowable() {
        try (LogCapture logs = LogCapture.start(LogCaptureTest.class)) {
            LOG.error("peer {} closed after {} bytes", "10.0.0.1:1", 42, new IllegalStateException("boom"));
            LOG.warn("slow");
            LOG.info("below the threshold");
            LogEvent e = logs.assertLogged(Level.ERROR, "peer 10.0.0.1:1 closed after 42 bytes");
            assertEquals("boom", e.thrown().getMessage());
            assertTrue(logs.assertLogged(Level.ERROR, "boom").render().contains("IllegalStateException: boom"));
            assertEquals(1, logs.events(Level.WARN).size());
            assertEquals(2, logs.events().size(), "INFO is not recorded");
            assertThrows(AssertionError.class, () -> logs.assertNone(Level.WARN));
        }
    }

    @Test
    void awaitsAnEventFromAnotherThreadAndFailsWithWhatItSaw() throws Exception {
        try (LogCapture logs = LogCapture.start(LogCaptureTest.class)) {
            Thread t = new Thread(() -> LOG.warn("from the background"), "mooncake-test-logger-0");
            t.start();
            LogEvent e = logs.awaitLogged(Level.WARN, "background", Duration.ofSeconds(10));
            assertEquals("mooncake-test-logger-0", e.thread());
            t.join();
            AssertionError miss = assertThrows(AssertionError.class, () -> logs.assertLogged(Level.ERROR, "nope"));
            assertTrue(miss.getMessage().contains("from the background"), miss.getMessage());
        }
    }

    @Test
    void otherLoggersAndClosedCapturesSeeNothing() {
        Logger other = LoggerFactory.getLogger("io.mooncake4j.somewhere.Else");
        LogCapture logs = LogCapture.start(LogCaptureTest.class);
        other.error("not mine");
        logs.close();
        LOG.error("after close");
        assertEquals(List.of(), logs.events());
        logs.assertNone(Level.WARN);
    }

    @Test
    void aFailedTestPrintsItsEventsMarkingTheExpectedOnes() {
        LogEvent plain = new LogEvent(-1, Level.WARN, "t", "a.B", "unexpected", null);
        String s = TestLog.render("X.y()", List.of(plain));
        assertTrue(s.contains("1 log event(s) of X.y(), which failed"), s);
        assertTrue(s.contains("[t] WARN a.B - unexpected"), s);
    }
}
