package io.mooncake4j.testlog;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Registered for every test (JUnit extension auto-detection, {@code junit-platform.properties}): the
 * log events of a test are printed only when it fails; events outside tests (class set-up and
 * tear-down, background threads between tests) only when something in their class failed.
 */
public final class TestLogExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback,
        AfterEachCallback {

    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(TestLogExtension.class);

    private static final class ClassState {
        final List<LogEvent> outsideTests = new ArrayList<>();
        boolean failed;
    }

    private static ClassState state(ExtensionContext classContext) {
        return classContext.getStore(NS).getOrComputeIfAbsent(ClassState.class, k -> new ClassState(),
                ClassState.class);
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        state(context).outsideTests.addAll(TestLog.drain());
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        context.getParent().ifPresent(p -> state(p).outsideTests.addAll(TestLog.drain()));
    }

    @Override
    public void afterEach(ExtensionContext context) {
        List<LogEvent> events = TestLog.drain();
        if (context.getExecutionException().isPresent()) {
            context.getParent().ifPresent(p -> state(p).failed = true);
            TestLog.print(context.getRequiredTestClass().getSimpleName() + "." + context.getDisplayName(), events,
                    System.err);
        } else {
            TestLog.suppress(events);
        }
    }

    @Override
    public void afterAll(ExtensionContext context) {
        ClassState s = state(context);
        s.outsideTests.addAll(TestLog.drain());
        if (s.failed || context.getExecutionException().isPresent()) {
            TestLog.print(context.getDisplayName() + " (outside its tests)", s.outsideTests, System.err);
        } else {
            TestLog.suppress(s.outsideTests);
        }
        s.outsideTests.clear();
    }
}
