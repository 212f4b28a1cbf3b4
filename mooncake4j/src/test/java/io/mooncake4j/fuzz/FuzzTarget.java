package io.mooncake4j.fuzz;

import java.util.Random;

/**
 * One port of a real node under fuzzing, run by {@code FuzzMain} ({@code scripts/fuzz.sh}).
 *
 * <p>A target starts the node(s) it attacks in {@link #start()}, throws hostile or malformed input at
 * one port per {@link #runCase(Random)}, and after the last case proves with {@link #checkStillServing()}
 * that the node still serves a valid request whose bytes are verified. {@code FuzzMain} measures
 * thread count, heap and RSS before and after and prints one summary line for all targets.
 */
public interface FuzzTarget extends AutoCloseable {

    /** Short name of the port under attack, e.g. {@code side-channel}, {@code bootstrap-http}. */
    String port();

    /** Starts the node(s) this target attacks; called once before the first case. */
    void start() throws Exception;

    /**
     * Runs one fuzz case. Returning normally means the node behaved (answered with an error, closed
     * the connection, ignored the input); throwing {@link AssertionError} means the node misbehaved
     * (hung past a deadline, wrote outside registered memory, went deaf).
     */
    void runCase(Random random) throws Exception;

    /** After fuzzing: one valid request through the attacked port, with every byte verified. */
    void checkStillServing() throws Exception;

    @Override
    void close() throws Exception;
}
