/**
 * Mooncake's P2P handshake (the RPC port, {@code SocketHandShakePlugin}): frame codec
 * ({@link io.mooncake4j.engine.handshake.HandshakeFrame}), segment descriptor codec
 * ({@link io.mooncake4j.engine.handshake.SegmentDescriptor}), Connection body codec
 * ({@link io.mooncake4j.engine.handshake.HandShakeDesc}, used by the RDMA transport), server, client, port binding and
 * the {@code MC_*} control-plane settings ({@link io.mooncake4j.engine.handshake.HandshakeConfig}).
 * Internal to the module; embedders reach it through the engine.
 *
 * <h2>Frame (both directions)</h2>
 * <table>
 *   <caption>Handshake frame</caption>
 *   <tr><th>Offset</th><th>Size</th><th>Field</th><th>Encoding</th></tr>
 *   <tr><td>0</td><td>8</td><td>length</td><td>u64 little-endian: type byte + payload (legacy: payload only);
 *       1..{@code MC_HANDSHAKE_MAX_LENGTH}</td></tr>
 *   <tr><td>8</td><td>1</td><td>type</td><td>0 Connection, 1 Metadata, 2 Notify, 3 Probe; absent in legacy
 *       frames (first byte 0x04..0x7F, normally an opening brace)</td></tr>
 *   <tr><td>9</td><td>length−1</td><td>payload</td><td>UTF-8 JSON, sorted keys, compact, trailing LF</td></tr>
 * </table>
 *
 * <p>Worked bytes: Probe request {@code 04 00 00 00 00 00 00 00 03 7B 7D 0A}; Probe reply
 * {@code 16 00 00 00 00 00 00 00 03} + {@code {"status":"success"}\n}.
 *
 * <h2>Connection lifecycle</h2>
 * One request per TCP connection. Server: read one frame (5 s per read), reply with the same type
 * byte, half-close, wait for the client's EOF, close, all within a total deadline (10 s) after which
 * the connection is closed; at most 256 connections are open, a new one closes the oldest; malformed
 * input closes without reply and logs one line. Client: connect (5 s), write, read one frame (60 s
 * per read), close, all within a total deadline (30 s). Deadlines are enforced by
 * {@link io.mooncake4j.engine.handshake.SocketDeadlines} (one virtual thread per JVM closes the socket).
 *
 * <p>Thread-safety: codecs and records are immutable; {@link io.mooncake4j.engine.handshake.HandshakeServer}
 * and {@link io.mooncake4j.engine.handshake.HandshakeClient} are thread-safe. The server owns its
 * listener, acceptor thread and per-connection virtual threads and releases them in {@code close()}.
 */
package io.mooncake4j.engine.handshake;
