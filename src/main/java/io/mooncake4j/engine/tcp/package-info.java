/**
 * Mooncake's TCP transport, both sides, and the engine that ties it to the P2P handshake:
 * {@link io.mooncake4j.engine.tcp.TcpTransferEngine} (kind {@code "tcp"} of
 * {@link io.mooncake4j.engine.TransferEngines}). Internal to the module apart from the engine,
 * which embedders obtain through the factory.
 *
 * <h2>Request header (initiator → target), 24 bytes</h2>
 * <table>
 *   <caption>SessionHeader</caption>
 *   <tr><th>Offset</th><th>Size</th><th>Field</th><th>Encoding</th></tr>
 *   <tr><td>0</td><td>8</td><td>size</td><td>u64 little-endian, payload bytes (&gt; 0)</td></tr>
 *   <tr><td>8</td><td>8</td><td>addr</td><td>u64 little-endian, absolute address in the target process</td></tr>
 *   <tr><td>16</td><td>1</td><td>opcode</td><td>bits 0–6: 0 READ, 1 WRITE; bit 7 (0x80): v2 framing</td></tr>
 *   <tr><td>17</td><td>7</td><td>padding</td><td>zero when sent, ignored when received</td></tr>
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
 * so the initiator pipelines up to a window of requests per connection.
 *
 * <h2>Ownership and threads</h2>
 * The engine owns a handshake server, a {@code TcpDataServer} (acceptor thread + one virtual
 * thread per connection) and, per opened peer, a {@code Peer} with lanes (a sender and a
 * receiver platform thread per connection). Data moves between sockets and registered memory
 * through cached direct {@link java.nio.ByteBuffer} views, without copies or per-descriptor
 * allocation. All public methods of the engine are thread-safe.
 */
package io.mooncake4j.engine.tcp;
