package io.mooncake4j.connector.worker;

import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;
import zmq.Msg;
import zmq.msg.MsgAllocator;

/**
 * The message allocator of every side-channel socket: JeroMQ's own, guarded against a JeroMQ 0.6.0
 * bug found by fuzzing. A ZMTP long-frame header carries an unsigned 64-bit size; JeroMQ reads it as
 * a signed {@code long}, so a size of 2^63 or more is negative, passes both of {@code Decoder.sizeReady}'s
 * checks ({@code ZMQ_MAXMSGSIZE} and {@code Integer.MAX_VALUE}) and reaches the allocator cast to
 * {@code int}: any value. Negative, JeroMQ's allocator throws {@link NegativeArraySizeException} on the
 * I/O thread, which leaves that connection's decoder broken and the ROUTER deaf to it; positive, it
 * allocates up to 2 GiB whatever the maximum message size (a frame-size bomb past the limit). Since
 * JeroMQ rejects every honest size above the maximum before allocating, a size outside
 * {@code 0..max} here can only come from that bug, and it becomes an empty frame instead: the peer's
 * message is then malformed and gets an ERROR answer (P) or fails the pull (D). Counted. Thread-safe
 * (called on JeroMQ's I/O threads).
 */
final class GuardedMsgAllocator implements MsgAllocator {

    private final MsgAllocator delegate;
    private final LongAdder negativeSizes = new LongAdder();
    private final Runnable onNegative;
    private final long max;

    GuardedMsgAllocator(MsgAllocator delegate, long maxMessageBytes, Runnable onNegative) {
        this.max = maxMessageBytes;
        this.delegate = delegate != null ? delegate : zmq.ZMQ.DEFAULT_MSG_ALLOCATOR;
        this.onNegative = Objects.requireNonNull(onNegative, "onNegative");
    }

    @Override
    public Msg allocate(int size) {
        if (size < 0 || size > max) {
            negativeSizes.increment();
            onNegative.run();
            return delegate.allocate(0);
        }
        return delegate.allocate(size);
    }

    long negativeSizes() {
        return negativeSizes.sum();
    }
}
