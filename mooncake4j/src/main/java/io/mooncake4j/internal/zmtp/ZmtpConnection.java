package io.mooncake4j.internal.zmtp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Objects;

/**
 * One ZMTP 3.x connection (NULL mechanism) over a non-blocking {@link SocketChannel}: our greeting
 * and READY are queued when it is made, reads are fed to a {@link ZmtpDecoder}, writes go through a
 * bounded out-queue flushed as far as the socket takes (partial writes are kept). PINGs are answered
 * with PONG. Driven by one thread, the owner of the selector the channel is registered with.
 */
public final class ZmtpConnection implements AutoCloseable {

    /** What the connection reports, on its thread. */
    public interface Listener {
        /** The peer's READY was accepted; throwing refuses the peer. */
        void onReady(ZmtpConnection c, String socketType, byte[] identity) throws ZmtpException;

        /**
         * A complete message from the peer (after its READY).
         *
         * @return true to go on; false to stop decoding after it: the rest of what was read is kept for the
         *         next {@link #read} (see {@link #hasPending()})
         */
        boolean onMessage(ZmtpConnection c, List<byte[]> frames) throws ZmtpException;
    }

    private static final int GATHER = 16;

    private final SocketChannel channel;
    private final ZmtpLimits limits;
    private final ZmtpDecoder decoder;
    private final ArrayDeque<ByteBuffer> out = new ArrayDeque<>();
    private final ByteBuffer[] gather = new ByteBuffer[GATHER];
    private long queuedBytes;
    private int queuedMessages;
    private long bytesRead;
    private ByteBuffer pending; // read, not yet decoded: a listener stopped the decoder
    private Object attachment;

    /**
     * @param channel      a connected (or connecting) non-blocking channel; this connection closes it
     * @param ourType      our socket type, announced in READY
     * @param ourIdentity  our {@code Identity} property, or null to send none
     * @param limits       what the peer may make us hold
     * @param listener     hears the peer's READY and messages
     */
    public ZmtpConnection(SocketChannel channel, String ourType, byte[] ourIdentity, ZmtpLimits limits,
            Listener listener) {
        this.channel = Objects.requireNonNull(channel, "channel");
        this.limits = Objects.requireNonNull(limits, "limits");
        Objects.requireNonNull(listener, "listener");
        this.decoder = new ZmtpDecoder(ourType, limits, new ZmtpDecoder.Handler() {
            @Override
            public void onReady(String socketType, byte[] identity) throws ZmtpException {
                listener.onReady(ZmtpConnection.this, socketType, identity);
            }

            @Override
            public boolean onMessage(List<byte[]> frames) throws ZmtpException {
                return listener.onMessage(ZmtpConnection.this, frames);
            }

            @Override
            public void onPing(byte[] context) {
                if (queuedMessages < limits.maxQueuedMessages()) { // a peer that pings and never reads gets no PONG
                    enqueue(Zmtp.commandFrame(Zmtp.pongBody(context)));
                }
            }
        });
        enqueue(ByteBuffer.wrap(Zmtp.greeting()));
        enqueue(Zmtp.commandFrame(Zmtp.readyBody(ourType, ourIdentity)));
    }

    /** {@return the channel} */
    public SocketChannel channel() {
        return channel;
    }

    /** {@return whether the peer's READY was read and accepted} */
    public boolean peerReady() {
        return decoder.peerReady();
    }

    /** {@return bytes read from the peer so far} */
    public long bytesRead() {
        return bytesRead;
    }

    /** {@return the owner's object (set with {@link #attach})} */
    public Object attachment() {
        return attachment;
    }

    /** Attaches the owner's object. */
    public void attach(Object o) {
        attachment = o;
    }

    /** {@return whether bytes read earlier wait to be decoded (a listener stopped the decoder)} */
    public boolean hasPending() {
        return pending != null;
    }

    /**
     * Decodes what a stopped decoder left, if anything; else reads once into {@code scratch} (cleared
     * first) and decodes what came. What a listener's stop leaves unread is copied aside for the next call.
     *
     * @return the bytes read from the channel, 0 when none were read, -1 at end of stream
     * @throws ZmtpException when the peer broke the protocol (close the connection)
     * @throws IOException   when the read failed
     */
    public int read(ByteBuffer scratch) throws IOException {
        if (pending != null) {
            decoder.feed(pending);
            if (!pending.hasRemaining()) {
                pending = null;
            }
            return 0;
        }
        scratch.clear();
        int n = channel.read(scratch);
        if (n <= 0) {
            return n;
        }
        bytesRead += n;
        scratch.flip();
        decoder.feed(scratch);
        if (scratch.hasRemaining()) {
            pending = ByteBuffer.allocate(scratch.remaining()).put(scratch).flip();
        }
        return n;
    }

    /**
     * Queues one message.
     *
     * @return false when the out-queue is full (the message was not queued)
     */
    public boolean send(List<byte[]> frames) {
        long len = 0;
        for (byte[] f : frames) {
            len += f.length;
        }
        if (queuedMessages >= limits.maxQueuedMessages() || queuedBytes + len > limits.maxQueuedBytes()) {
            return false;
        }
        enqueue(Zmtp.messageFrames(frames));
        return true;
    }

    /** As {@link #send(List)} for a one-frame message. */
    public boolean send(byte[] frame) {
        return send(List.of(frame));
    }

    private void enqueue(ByteBuffer b) {
        out.add(b);
        queuedBytes += b.remaining();
        queuedMessages++;
    }

    /** {@return whether queued bytes wait for the socket} */
    public boolean wantsWrite() {
        return !out.isEmpty();
    }

    /** {@return the interest ops this connection needs: OP_READ when {@code reading}, OP_WRITE while bytes wait} */
    public int interestOps(boolean reading) {
        return (reading ? SelectionKey.OP_READ : 0) | (out.isEmpty() ? 0 : SelectionKey.OP_WRITE);
    }

    /**
     * Writes queued bytes until the queue is empty or the socket takes no more.
     *
     * @return true when the queue is empty
     * @throws IOException when the write failed
     */
    public boolean flush() throws IOException {
        while (!out.isEmpty()) {
            int n = 0;
            for (ByteBuffer b : out) {
                gather[n++] = b;
                if (n == GATHER) {
                    break;
                }
            }
            long w = channel.write(gather, 0, n);
            java.util.Arrays.fill(gather, 0, n, null);
            ByteBuffer head;
            while ((head = out.peekFirst()) != null && !head.hasRemaining()) {
                out.pollFirst();
                queuedMessages = Math.max(0, queuedMessages - 1);
            }
            queuedBytes = Math.max(0, queuedBytes - w);
            if (w == 0 && !out.isEmpty()) {
                return false;
            }
        }
        queuedBytes = 0;
        queuedMessages = 0;
        return true;
    }

    /** Closes the channel (which also cancels its selection keys). Idempotent. */
    @Override
    public void close() {
        out.clear();
        try {
            channel.close();
        } catch (IOException e) {
            // nothing left to do: the channel is gone either way
        }
    }
}
