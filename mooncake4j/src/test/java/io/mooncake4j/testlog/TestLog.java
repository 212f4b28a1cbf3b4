package io.mooncake4j.testlog;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.event.Level;

/**
 * The in-memory log of the test JVM. Every recorded event is offered to the open {@link LogCapture}s
 * and kept in a bounded buffer until {@link TestLogExtension} decides, at the end of a test, whether
 * to print it (the test failed) or to count it (the test passed).
 */
public final class TestLog {

    /** Events kept between two test boundaries; beyond it the oldest are dropped (and counted). */
    static final int MAX_BUFFERED = 20_000;

    private static final Level THRESHOLD = parseLevel(System.getProperty("mooncake4j.testlog.level", "warn"));
    private static final boolean PRINT_ALL = "all".equalsIgnoreCase(System.getProperty("mooncake4j.testlog.print"));
    private static final String SUMMARY_FILE = System.getProperty("mooncake4j.testlog.summary");

    private static final Object LOCK = new Object();
    // guarded by LOCK
    private static final Deque<LogEvent> buffer = new ArrayDeque<>();
    private static long seq;
    private static long dropped;
    private static final Map<Level, Long> suppressed = new EnumMap<>(Level.class);
    private static final Map<Level, Long> claimed = new EnumMap<>(Level.class);
    private static final Map<Level, Long> printed = new EnumMap<>(Level.class);
    private static final java.util.Set<Long> claimedSeqs = new java.util.HashSet<>();
    private static boolean installed;

    static final List<LogCapture> captures = new CopyOnWriteArrayList<>();

    private TestLog() {}

    /** The lowest level recorded (property {@code mooncake4j.testlog.level}, default WARN). */
    public static Level threshold() {
        return THRESHOLD;
    }

    /** Whether this JVM logs through {@link CapturingServiceProvider} (else a {@link LogCapture} sees nothing). */
    public static boolean isInstalled() {
        synchronized (LOCK) {
            return installed;
        }
    }

    static void installed() {
        synchronized (LOCK) {
            if (installed) {
                return;
            }
            installed = true;
        }
        if (SUMMARY_FILE != null) {
            Runtime.getRuntime().addShutdownHook(new Thread(TestLog::writeSummary, "mooncake4j-test-log-summary"));
        }
    }

    static void record(Level level, String thread, String logger, String message, Throwable thrown) {
        LogEvent e;
        synchronized (LOCK) {
            e = new LogEvent(++seq, level, thread, logger, message, thrown);
        }
        boolean isClaimed = false;
        for (LogCapture c : captures) {
            isClaimed |= c.offer(e);
        }
        if (PRINT_ALL) {
            System.err.println(e.render());
            return;
        }
        synchronized (LOCK) {
            if (isClaimed) {
                claimedSeqs.add(e.seq());
            }
            buffer.addLast(e);
            if (buffer.size() > MAX_BUFFERED) {
                LogEvent old = buffer.removeFirst();
                if (claimedSeqs.remove(old.seq())) {
                    claimed.merge(old.level(), 1L, Long::sum);
                } else {
                    dropped++;
                }
            }
        }
    }

    /** Takes every event recorded since the last call. */
    static List<LogEvent> drain() {
        synchronized (LOCK) {
            List<LogEvent> out = new ArrayList<>(buffer);
            buffer.clear();
            return out;
        }
    }

    /** Prints {@code events} under a header naming {@code where} (a failed test or class) and counts them. */
    static void print(String where, List<LogEvent> events, PrintStream to) {
        if (events.isEmpty()) {
            return;
        }
        to.println(render(where, events));
        synchronized (LOCK) {
            for (LogEvent e : events) {
                printed.merge(e.level(), 1L, Long::sum);
            }
        }
    }

    /** The text {@link #print} prints: a header, each event (expected ones marked), a footer. */
    static String render(String where, List<LogEvent> events) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "---- %d log event(s) of %s, which failed ----%n", events.size(), where));
        synchronized (LOCK) {
            for (LogEvent e : events) {
                if (claimedSeqs.remove(e.seq())) {
                    sb.append("(expected, claimed by a LogCapture) ");
                }
                sb.append(e.render()).append(System.lineSeparator());
            }
        }
        sb.append("---- end of log events of ").append(where).append(" ----");
        return sb.toString();
    }

    /** Counts {@code events} as not printed (their test passed): claimed ones, and the rest. */
    static void suppress(List<LogEvent> events) {
        synchronized (LOCK) {
            for (LogEvent e : events) {
                (claimedSeqs.remove(e.seq()) ? claimed : suppressed).merge(e.level(), 1L, Long::sum);
            }
        }
    }

    /** One line: what was printed, claimed and left unprinted so far. */
    public static String summary() {
        synchronized (LOCK) {
            return String.format(Locale.ROOT,
                    "test log: printed (failed tests) %s; expected (claimed by LogCapture) %s; not printed (passing tests, "
                            + "unclaimed) %s; "
                            + "dropped over the buffer bound %d",
                    counts(printed), counts(claimed), counts(suppressed), dropped);
        }
    }

    private static String counts(Map<Level, Long> m) {
        return String.format(Locale.ROOT, "%d ERROR, %d WARN", m.getOrDefault(Level.ERROR, 0L),
                m.getOrDefault(Level.WARN, 0L));
    }

    private static void writeSummary() {
        suppress(drain());
        try {
            Path p = Path.of(SUMMARY_FILE);
            Files.createDirectories(p.toAbsolutePath().getParent());
            Files.writeString(p, summary() + System.lineSeparator(), StandardCharsets.UTF_8,
                    java.nio.file.StandardOpenOption.CREATE,
                    java.nio.file.StandardOpenOption.TRUNCATE_EXISTING);
        } catch (IOException | RuntimeException e) {
            System.err.println("mooncake4j test log: cannot write " + SUMMARY_FILE + ": " + e);
        }
    }

    private static Level parseLevel(String s) {
        try {
            return Level.valueOf(s.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            return Level.WARN;
        }
    }
}
