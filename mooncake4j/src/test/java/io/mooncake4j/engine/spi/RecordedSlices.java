package io.mooncake4j.engine.spi;

import java.util.ArrayList;
import java.util.List;

/**
 * A {@link SliceGroup} for testing one transport on its own, without a core batch behind it: the
 * slices are given one by one, and how each ended is recorded ({@link #outcome}: null = pending,
 * {@code ""} = done, else the failure and its reason; {@link #failures}: the failure kind).
 */
public final class RecordedSlices implements SliceGroup {

    /** Per slice: write ? 1 : 0, local address, remote address, length. */
    public final List<long[]> slices = new ArrayList<>();
    public final List<String> outcome = new ArrayList<>();
    public final List<SliceFailure> failures = new ArrayList<>();
    /** What {@link #aborted()} answers (a test sets it to see a transport stop). */
    public volatile boolean aborted;
    private final String location;

    private RecordedSlices(String location) {
        this.location = location;
    }

    /** Slices whose local buffers are host memory ({@code cpu:0}). */
    public static RecordedSlices host() {
        return new RecordedSlices("cpu:0");
    }

    /** Slices whose local buffers are GPU memory ({@code cuda:0}). */
    public static RecordedSlices device() {
        return new RecordedSlices("cuda:0");
    }

    /** Appends a slice. */
    public synchronized RecordedSlices add(boolean write, long local, long remote, long length) {
        slices.add(new long[] {write ? 1 : 0, local, remote, length});
        outcome.add(null);
        failures.add(null);
        return this;
    }

    /** Whether every slice completed. */
    public synchronized boolean allDone() {
        return outcome.stream().allMatch(""::equals);
    }

    @Override
    public synchronized int size() {
        return slices.size();
    }

    @Override
    public synchronized boolean isWrite(int i) {
        return slices.get(i)[0] == 1;
    }

    @Override
    public synchronized long local(int i) {
        return slices.get(i)[1];
    }

    @Override
    public synchronized long remote(int i) {
        return slices.get(i)[2];
    }

    @Override
    public synchronized long length(int i) {
        return slices.get(i)[3];
    }

    @Override
    public LocalBuffer localBuffer(int i) {
        return LocalBuffer.of(local(i), length(i), location);
    }

    @Override
    public synchronized void complete(int i) {
        if (outcome.get(i) == null) {
            outcome.set(i, "");
        }
    }

    @Override
    public synchronized void fail(int i, SliceFailure failure, String why) {
        if (outcome.get(i) == null) {
            outcome.set(i, failure + ": " + why);
            failures.set(i, failure);
        }
    }

    @Override
    public boolean aborted() {
        return aborted;
    }

    /** No core batch behind these slices: a transport under test ends them through complete/fail only. */
    @Override
    public BatchTasks batch() {
        return null;
    }

    @Override
    public int task(int i) {
        return i;
    }

    @Override
    public boolean contiguous() {
        return true;
    }
}
