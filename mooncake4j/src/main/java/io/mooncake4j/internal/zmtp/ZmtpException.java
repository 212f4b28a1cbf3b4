package io.mooncake4j.internal.zmtp;

import java.io.IOException;

/** A peer broke ZMTP (or a bound of {@link ZmtpLimits}); the message says how. The connection is to be closed. */
public final class ZmtpException extends IOException {

    private static final long serialVersionUID = 1L;

    /**
     * @param message what the peer did wrong
     */
    public ZmtpException(String message) {
        super(message);
    }
}
