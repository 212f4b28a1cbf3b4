/**
 * The test run's SLF4J provider: log events are kept in memory instead of printed, so a green
 * run is quiet and a test can assert on the errors it provokes.
 *
 * <ul>
 *   <li>{@link io.mooncake4j.testlog.CapturingServiceProvider} is selected by surefire through the
 *       {@code slf4j.provider} system property (see {@code pom.xml}); other runs of the test class
 *       path (JMH, {@code scripts/gpu-check.sh}) keep slf4j-simple.</li>
 *   <li>{@link io.mooncake4j.testlog.TestLogExtension}, registered for every test through JUnit's
 *       extension auto-detection, prints the WARN and ERROR events of a test only when that test
 *       fails (events outside any test: when its class fails), and counts the rest in one line at
 *       the end of the run.</li>
 *   <li>{@link io.mooncake4j.testlog.LogCapture} lets a test claim and assert the events it expects.</li>
 * </ul>
 *
 * <p>Threads: events arrive on any thread; the buffer is guarded by the {@link
 * io.mooncake4j.testlog.TestLog} monitor. {@code -Dmooncake4j.testlog.print=all} prints every event
 * as it happens (debugging).
 */
package io.mooncake4j.testlog;
