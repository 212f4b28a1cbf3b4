package io.mooncake4j.internal.zmtp;

/**
 * What one ZMTP connection may be made to hold. Immutable.
 *
 * @param maxFrameBytes      largest message frame accepted (declared size, checked on the header)
 * @param maxMessageBytes    largest sum of a message's frame sizes
 * @param maxFramesPerMessage most frames in one message
 * @param maxCommandBytes    largest command frame (READY with its properties, PING, ERROR, ...)
 * @param maxQueuedMessages  most messages waiting in the out-queue
 * @param maxQueuedBytes     most bytes waiting in the out-queue
 */
public record ZmtpLimits(long maxFrameBytes, long maxMessageBytes, int maxFramesPerMessage, int maxCommandBytes,
        int maxQueuedMessages, long maxQueuedBytes) {

    /** Largest command frame by default: READY with a 255-byte identity and a few more properties fits. */
    public static final int DEFAULT_MAX_COMMAND_BYTES = 8192;
    /** Frames per message by default (the side channel's messages have one). */
    public static final int DEFAULT_MAX_FRAMES = 64;
    /** Out-queue messages by default (ZMQ's default send high-water mark). */
    public static final int DEFAULT_MAX_QUEUED_MESSAGES = 1000;

    /**
     * Checks the bounds.
     *
     * @throws IllegalArgumentException when one is not positive
     */
    public ZmtpLimits {
        if (maxFrameBytes <= 0 || maxMessageBytes <= 0 || maxFramesPerMessage <= 0 || maxCommandBytes < 64
                || maxQueuedMessages <= 0 || maxQueuedBytes <= 0) {
            throw new IllegalArgumentException("ZMTP limits must be positive (commands at least 64 bytes): " + this);
        }
    }

    /**
     * The defaults around a frame limit: messages of at most {@code maxFrameBytes} in all, 64 frames,
     * 8 KiB commands, 1000 queued messages of at most 64 MiB in all.
     *
     * @param maxFrameBytes the largest frame (and message) accepted
     * @return the limits
     */
    public static ZmtpLimits of(long maxFrameBytes) {
        return new ZmtpLimits(maxFrameBytes, maxFrameBytes, DEFAULT_MAX_FRAMES, DEFAULT_MAX_COMMAND_BYTES,
                DEFAULT_MAX_QUEUED_MESSAGES, 64L << 20);
    }
}
