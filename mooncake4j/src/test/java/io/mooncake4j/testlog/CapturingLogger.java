package io.mooncake4j.testlog;

import org.slf4j.Marker;
import org.slf4j.event.Level;
import org.slf4j.helpers.LegacyAbstractLogger;
import org.slf4j.helpers.MessageFormatter;

/** A logger that hands WARN and ERROR events (or what {@link TestLog#threshold()} allows) to {@link TestLog}. */
final class CapturingLogger extends LegacyAbstractLogger {

    private static final long serialVersionUID = 1L;

    CapturingLogger(String name) {
        this.name = name;
    }

    private static boolean on(Level level) {
        return level.toInt() >= TestLog.threshold().toInt();
    }

    @Override
    public boolean isTraceEnabled() {
        return on(Level.TRACE);
    }

    @Override
    public boolean isDebugEnabled() {
        return on(Level.DEBUG);
    }

    @Override
    public boolean isInfoEnabled() {
        return on(Level.INFO);
    }

    @Override
    public boolean isWarnEnabled() {
        return on(Level.WARN);
    }

    @Override
    public boolean isErrorEnabled() {
        return on(Level.ERROR);
    }

    @Override
    protected String getFullyQualifiedCallerName() {
        return null;
    }

    @Override
    protected void handleNormalizedLoggingCall(Level level, Marker marker, String messagePattern, Object[] arguments,
                                               Throwable throwable) {
        if (!on(level)) {
            return;
        }
        String message = MessageFormatter.basicArrayFormat(messagePattern, arguments);
        TestLog.record(level, Thread.currentThread().getName(), name, message, throwable);
    }
}
