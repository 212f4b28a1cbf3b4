package io.mooncake4j.testlog;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.Locale;
import org.slf4j.event.Level;

/**
 * One recorded log event.
 *
 * @param seq     order of arrival in this JVM
 * @param level   the event's level
 * @param thread  the logging thread's name
 * @param logger  the logger's name
 * @param message the formatted message
 * @param thrown  the attached throwable, or null
 */
public record LogEvent(long seq, Level level, String thread, String logger, String message, Throwable thrown) {

    /** The event as slf4j-simple would print it, stack trace included. */
    public String render() {
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "[%s] %s %s - %s", thread, level, logger,
                message));
        if (thrown != null) {
            StringWriter w = new StringWriter();
            thrown.printStackTrace(new PrintWriter(w));
            sb.append(System.lineSeparator()).append(w.toString().stripTrailing());
        }
        return sb.toString();
    }

    /** The message and, when present, the throwable's chain of messages. */
    public String fullText() {
        StringBuilder sb = new StringBuilder(message);
        for (Throwable t = thrown; t != null; t = t.getCause()) {
            sb.append(" | ").append(t);
            if (t.getCause() == t) {
                break;
            }
        }
        return sb.toString();
    }
}
