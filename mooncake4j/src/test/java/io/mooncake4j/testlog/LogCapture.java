package io.mooncake4j.testlog;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.function.Predicate;
import org.slf4j.event.Level;

/**
 * Claims the log events of a block of a test so that it can assert on them:
 *
 * <pre>{@code
 * try (LogCapture logs = LogCapture.start()) {
 *     provokeTheError();
 *     logs.awaitLogged(Level.ERROR, "peer closed", Duration.ofSeconds(10));
 * }
 * }</pre>
 *
 * <p>While open it receives every event at or above {@link TestLog#threshold()} from every thread
 * (optionally only of loggers whose name starts with a prefix). Thread-safe.
 */
public final class LogCapture implements AutoCloseable {

    private final String loggerPrefix;
    private final List<LogEvent> events = new ArrayList<>();
    private boolean closed;

    private LogCapture(String loggerPrefix) {
        this.loggerPrefix = loggerPrefix;
    }

    /** Captures the events of every logger. */
    public static LogCapture start() {
        return start("");
    }

    /** Captures the events of the loggers whose name starts with {@code loggerPrefix} (a class or package name). */
    public static LogCapture start(String loggerPrefix) {
        Objects.requireNonNull(loggerPrefix, "loggerPrefix");
        if (!TestLog.isInstalled()) {
            org.slf4j.LoggerFactory.getILoggerFactory(); // initialises SLF4J if nothing has logged yet
        }
        if (!TestLog.isInstalled()) {
            throw new IllegalStateException("LogCapture needs the test SLF4J provider: run with -Dslf4j.provider="
                    + CapturingServiceProvider.class.getName() + " (surefire sets it, see pom.xml)");
        }
        LogCapture c = new LogCapture(loggerPrefix);
        TestLog.captures.add(c);
        return c;
    }

    /** Captures the events of {@code type}'s logger (and nested classes'). */
    public static LogCapture start(Class<?> type) {
        return start(type.getName());
    }

    synchronized boolean offer(LogEvent e) {
        if (closed || !e.logger().startsWith(loggerPrefix)) {
            return false;
        }
        events.add(e);
        notifyAll();
        return true;
    }

    /** Every event captured so far. */
    public synchronized List<LogEvent> events() {
        return List.copyOf(events);
    }

    /** The events at exactly {@code level}. */
    public synchronized List<LogEvent> events(Level level) {
        return events.stream().filter(e -> e.level() == level).toList();
    }

    /** The events at {@code level} whose message or throwable chain contains {@code text}. */
    public synchronized List<LogEvent> matching(Level level, String text) {
        return events.stream().filter(matcher(level, text)).toList();
    }

    private static Predicate<LogEvent> matcher(Level level, String text) {
        return e -> e.level() == level && e.fullText().contains(text);
    }

    /** The first event at {@code level} containing {@code text}, which must already have been logged. */
    public LogEvent assertLogged(Level level, String text) {
        return awaitLogged(level, text, Duration.ZERO);
    }

    /** Waits up to {@code timeout} for an event at {@code level} containing {@code text} (background threads). */
    public synchronized LogEvent awaitLogged(Level level, String text, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        Predicate<LogEvent> m = matcher(level, text);
        while (true) {
            for (LogEvent e : events) {
                if (m.test(e)) {
                    return e;
                }
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new AssertionError(String.format(Locale.ROOT,
                        "no %s event containing '%s' was logged%s; captured: %s", level, text,
                        timeout.isZero() ? "" : " within " + timeout, describe()));
            }
            try {
                wait(Math.max(1, left / 1_000_000), 0);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for a log event", ie);
            }
        }
    }

    /** Fails if any event at {@code level} or above was captured. */
    public synchronized void assertNone(Level level) {
        List<LogEvent> bad = events.stream().filter(e -> e.level().toInt() >= level.toInt()).toList();
        if (!bad.isEmpty()) {
            throw new AssertionError("expected no event at " + level + " or above, got: "
                    + bad.stream().map(LogEvent::render).toList());
        }
    }

    private String describe() {
        if (events.isEmpty()) {
            return "nothing";
        }
        return events.stream().map(e -> e.level() + " " + e.logger() + " - " + e.fullText()).toList().toString();
    }

    /** Stops capturing; the events captured stay readable. */
    @Override
    public void close() {
        TestLog.captures.remove(this);
        synchronized (this) {
            closed = true;
        }
    }
}
