package io.mooncake4j.engine.core;

import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.SliceGroup;

/**
 * The core's {@link SliceGroup}: tasks of one {@link TaskBatch} bound for one peer over one
 * transport, either a contiguous run ({@code idx == null}) or listed. A failure goes to the batch
 * ({@link TaskBatch#fail(int, int, SliceFailure, String)}): a retryable one moves on to the next
 * capable transport, anything else ends the task.
 */
final class Slices implements SliceGroup {

    private static final int WRITE = io.mooncake4j.engine.TransferRequest.Opcode.WRITE.wire();

    private final TaskBatch batch;
    private final int transport;
    private final int from;
    private final int count;
    private final int[] idx;

    Slices(TaskBatch batch, int transport, int from, int count, int[] idx) {
        this.batch = batch;
        this.transport = transport;
        this.from = from;
        this.count = count;
        this.idx = idx;
    }

    @Override
    public int size() {
        return count;
    }

    @Override
    public int task(int i) {
        return idx == null ? from + i : idx[i];
    }

    @Override
    public boolean contiguous() {
        return idx == null;
    }

    @Override
    public boolean isWrite(int i) {
        return batch.opcode[task(i)] == WRITE;
    }

    @Override
    public long local(int i) {
        return batch.local[task(i)];
    }

    @Override
    public long remote(int i) {
        return batch.remote[task(i)];
    }

    @Override
    public long length(int i) {
        return batch.length[task(i)];
    }

    @Override
    public LocalBuffer localBuffer(int i) {
        return batch.localBuf[task(i)];
    }

    @Override
    public void complete(int i) {
        batch.finish(task(i), TaskBatch.COMPLETED);
    }

    @Override
    public void fail(int i, SliceFailure failure, String why) {
        batch.fail(task(i), transport, failure, why);
    }

    @Override
    public boolean aborted() {
        return batch.aborted;
    }

    @Override
    public TaskBatch batch() {
        return batch;
    }
}
