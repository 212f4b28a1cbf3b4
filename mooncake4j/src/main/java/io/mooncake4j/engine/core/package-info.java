/**
 * The engine core: {@link io.mooncake4j.engine.core.CoreEngine}, the one
 * {@link io.mooncake4j.engine.TransferEngine} implementation, and the engine-level code it is made
 * of, in one copy for every transport. Module-private.
 * <ul>
 *   <li>Making one: {@code EngineBuilder} (settings plus the transports offered; its static methods
 *       are the engines in use: every provided transport, one alone, explicit factories) and
 *       {@code TransportLoader}, which finds the transports' {@code spi.TransportProvider}s with
 *       {@code ServiceLoader} and orders them by their declarations.</li>
 *   <li>The asynchronous and synchronous batch calls: {@code TaskBatch} (per-batch task state in
 *       primitive arrays; transports see it as {@code spi.BatchTasks}), {@code BatchTable} (ids and
 *       Mooncake's free rule), {@code EngineCalls} (argument checks, deadlines, abort).</li>
 *   <li>Peers: {@code PeerTable}, {@code CorePeer} (descriptor cache, unreachable transports),
 *       {@code SegmentOpenings} (one descriptor fetch per name), {@code MetadataDirectory} (HTTP
 *       metadata mode: the own descriptor published there, peers' read from there).</li>
 *   <li>The local descriptor from the transports' contributions ({@code Descriptors}) and the
 *       engine side of the handshake port ({@code HandshakeService}).</li>
 *   <li>Which transports {@code protocol} and {@code MC_TRANSPORTS} install ({@code TransportPlan})
 *       and per-slice selection with fallback plus the local short-circuit ({@code Router},
 *       {@code Slices}).</li>
 * </ul>
 *
 * <p>The core imports the SPI and names no transport: which transports exist, their order and
 * which one {@code initialize}'s protocol asks for come from their declarations
 * ({@code spi.TransportDeclaration}); no transport imports this package. The core's own tests
 * drive it through a fault-injecting transport ({@code FaultTransport} in the test tree), which
 * registers as itself ({@code FaultTransportProvider}).
 *
 * <p>Threads: the core owns the handshake server's threads only; everything here is called from
 * the embedder's threads and the transports' completion threads and is thread-safe. Registration
 * and lifecycle calls serialise on the core's lock; transfers do not.
 */
package io.mooncake4j.engine.core;
