/**
 * A ZMTP 3.x implementation (RFC 23/ZMTP and 37/ZMTP, NULL mechanism only) for the connector's side
 * channel: the 64-byte greeting, the {@code READY}/{@code ERROR}/{@code PING}/{@code PONG}
 * commands, short and long frames ({@link io.mooncake4j.internal.zmtp.Zmtp}), an incremental
 * decoder that accepts its input split at any byte ({@link io.mooncake4j.internal.zmtp.ZmtpDecoder}),
 * and a non-blocking connection over a {@link java.nio.channels.SocketChannel} with partial reads
 * and writes ({@link io.mooncake4j.internal.zmtp.ZmtpConnection}). Module-private.
 *
 * <p><b>Threads.</b> A decoder and a connection are driven by one thread, the loop that owns the
 * connection's selector (P's {@code mooncake-p-listener-0}, D's {@code mooncake-d-io-0}); nothing
 * here is thread-safe or starts a thread.
 *
 * <p><b>Bounds.</b> Everything a peer can make a connection hold is bounded by
 * {@link io.mooncake4j.internal.zmtp.ZmtpLimits}: a frame's declared size is checked on its header,
 * before anything is allocated (sizes with the top bit set are rejected), and a frame's buffer grows
 * with the bytes that actually arrive, never to the declared size up front; frames per message,
 * bytes per message, command sizes and the {@code Identity} property are bounded; the out-queue is
 * bounded in messages and bytes. A violation is a {@link io.mooncake4j.internal.zmtp.ZmtpException}
 * whose message says what was wrong; the owner closes the connection.
 */
package io.mooncake4j.internal.zmtp;
