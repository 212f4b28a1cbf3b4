/**
 * Mooncake's TCP transport, both sides: {@link io.mooncake4j.engine.tcp.TcpTransport}, the
 * {@code tcp} transport of the engine core (alone, it is kind {@code "tcp"} of
 * {@link io.mooncake4j.engine.TransferEngines}), with its settings
 * ({@link io.mooncake4j.engine.tcp.TcpConfig}). Module-private; like every transport it imports
 * only the SPI ({@code engine.spi}), the engine's public types, the handshake's descriptor and
 * wire types and {@code memory}. Its monitoring getters (data port, rejected requests, staged GPU
 * bytes) are reached through {@code TcpTransport.in(engine)}.
 *
 * <h2>Request header (initiator → target), 24 bytes</h2>
 * <table>
 *   <caption>SessionHeader</caption>
 *   <tr><th>Offset</th><th>Size</th><th>Field</th><th>Encoding</th></tr>
 *   <tr><td>0</td><td>8</td><td>size</td><td>u64 little-endian, payload bytes (&gt; 0)</td></tr>
 *   <tr><td>8</td><td>8</td><td>addr</td><td>u64 little-endian, absolute address in the target process</td></tr>
 *   <tr><td>16</td><td>1</td><td>opcode</td><td>bits 0–6: 0 READ, 1 WRITE; bit 7 (0x80): v2 framing</td></tr>
 *   <tr><td>17</td><td>7</td><td>padding</td><td>this engine's tag when sent ({@code TcpWire}); ignored when
 *       received, except this engine's own tag</td></tr>
 * </table>
 *
 * <h2>Status frame (target → initiator, v2), 8 bytes</h2>
 * <table>
 *   <caption>Status frame</caption>
 *   <tr><th>Offset</th><th>Size</th><th>Field</th><th>Encoding</th></tr>
 *   <tr><td>0</td><td>4</td><td>code</td><td>u32 little-endian: 0 OK, 1 ADDR_REJECTED</td></tr>
 *   <tr><td>4</td><td>4</td><td>magic</td><td>u32 little-endian 0x4D435456 ("MCTV"); bytes {@code 56 54 43 4D}</td></tr>
 * </table>
 *
 * <h2>Exchanges</h2>
 * <table>
 *   <caption>Per request</caption>
 *   <tr><th>Mode</th><th>Initiator sends</th><th>Target answers</th></tr>
 *   <tr><td>v2 WRITE</td><td>header, body</td><td>status after the body is in memory</td></tr>
 *   <tr><td>v2 READ</td><td>header</td><td>status, then body</td></tr>
 *   <tr><td>v1 WRITE</td><td>header, body</td><td>nothing</td></tr>
 *   <tr><td>v1 READ</td><td>header</td><td>body</td></tr>
 *   <tr><td>rejected</td><td>header (, body)</td><td>v2: ADDR_REJECTED then close; v1: close</td></tr>
 * </table>
 * Several requests may follow each other on one connection; the target serves them in order,
 * so the initiator pipelines up to a window of requests per connection ({@code MOONCAKE4J_TCP_WINDOW},
 * 32) and stages requests queued together into one write. The target reads ahead (64 KiB) to
 * parse pipelined headers and small bodies from one read, and sends the status frames it owes
 * in one write before it would block. A C++ peer, which sends one request at a time, sees
 * exactly Mooncake's byte sequence.
 *
 * <h2>Ownership and threads</h2>
 * The transport owns a {@code TcpDataServer} (its connections are {@code DataSession}s; acceptor thread, pooled platform
 * threads for busy connections on non-blocking sockets, each waiting in the selector of its pooled
 * buffers, one selector thread where idle connections wait holding no thread and no buffer, a
 * virtual idle reaper closing connections idle past
 * {@code MOONCAKE4J_TCP_DATA_IDLE_TIMEOUT_SEC}) and, per resolved
 * peer data address (aliases share one), a {@code Peer} with lanes (a sender and a receiver platform
 * thread per connection), closed when unused for {@code MOONCAKE4J_TCP_PEER_IDLE_TIMEOUT_SEC} and
 * bounded by {@code MOONCAKE4J_TCP_MAX_PEERS}. Bodies over 16 KiB are sent straight from
 * registered memory: with gathering writes ({@code GatherWriter}: {@code sendmsg} through FFM on a
 * duplicate of the socket's descriptor, needs {@code --add-exports java.base/sun.nio.ch}) several
 * requests' headers or status frames and bodies go in one call with no copy; without them, the
 * first 16 KiB are copied behind the header and the rest written through cached direct
 * {@link java.nio.ByteBuffer} views of that memory. Received bodies of 32 KiB and more are read
 * straight into registered memory; smaller ones are copied through pooled 64 KiB buffers so that
 * many fit one system call. The steady state allocates nothing per descriptor in the lanes and
 * sessions. Whoever closes a lane's connection from another thread shuts it down first, which
 * ends a write blocked on the sender's duplicate descriptor. Unregistering
 * memory waits (bounded, {@code MOONCAKE4J_UNREGISTER_WAIT_MS}) for transfers using it and then
 * aborts them by closing their connections, so memory is never touched after
 * {@code unregisterMemory} returned. The handshake server, descriptors, batches and the local
 * short-circuit are the engine core's; lanes end tasks on the core's batch, through the SPI's
 * {@code BatchTasks} (a failure goes through the core's fallback like any other transport's). All public methods are thread-safe.
 *
 * <h2>GPU memory</h2>
 * Buffers registered at {@code cuda:N} (declared, or {@code *} resolved through the engine's
 * {@link io.mooncake4j.memory.DeviceMemory}) are never touched by the engine directly. Their bodies
 * cross the socket through pinned bounce buffers with pipelined asynchronous copies
 * ({@code Stager}: device-to-host of the next chunks overlaps the send of the current one,
 * host-to-device of a received chunk overlaps the receive of the next); transfers to the own
 * segment are one device copy (the core asks this transport for it: {@code copyLocal}). Lane threads own a stager each; data-port sessions and local copies
 * borrow from a bounded per-engine pool ({@code DeviceStaging}) and wait when it is exhausted. Every
 * staging call waits for its copies before it returns, so the unregistration guarantee holds for GPU
 * memory too. Settings: {@code MOONCAKE4J_TCP_STAGING_*} ({@code StagingConfig}); details in
 * {@code docs/gpu.md}.
 *
 * <h2>Differences from Mooncake's TCP transport</h2>
 * <ul>
 *   <li>The local side of a transfer must lie in memory registered with this engine.</li>
 *   <li>The data server rejects opcodes other than READ and WRITE (Mooncake serves them as READ).</li>
 *   <li>Transfers to the own segment are a memory copy, not a loopback connection.</li>
 *   <li>Each engine sends a random tag in the header padding (which Mooncake's servers ignore), and its
 *       data server refuses a request carrying its own tag ({@code TcpWire#STATUS_SELF}, a rejection to a
 *       Mooncake initiator, which never sends one): a peer whose data address leads back to this engine
 *       (a port-forward or NAT no name or descriptor reveals) is not written through.</li>
 *   <li>The initiator checks remote ranges against the cached descriptor (refreshing it once on a
 *       miss) before sending; the target still validates every request.</li>
 *   <li>GPU memory is staged through pinned bounce buffers with pipelined asynchronous copies
 *       (Mooncake copies each 64 KiB piece synchronously through pageable memory).</li>
 *   <li>Persistent pipelined lanes are always used (Mooncake: one connection per request unless
 *       {@code MC_TCP_ENABLE_CONNECTION_POOL}); {@code MC_TCP_PROTO} is read once, into {@code TcpConfig#forceV1}.</li>
 * </ul>
 */
package io.mooncake4j.engine.tcp;
