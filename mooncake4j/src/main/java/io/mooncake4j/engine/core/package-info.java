/**
 * The engine core: {@link io.mooncake4j.engine.core.CoreEngine}, the one
 * {@link io.mooncake4j.engine.TransferEngine} implementation (presets {@code TcpTransferEngine},
 * {@code RdmaTransferEngine}, {@code ShmDirectEngine} fix the transports it offers), and the
 * engine-level code it is made of, in one copy for every transport: the per-batch task state and
 * batch table of the asynchronous API ({@code TaskBatch}, {@code BatchTable}), the synchronous and
 * asynchronous batch calls with their argument checks and deadlines ({@code EngineCalls}), the peer
 * segments and their descriptor cache ({@code PeerTable}, {@code CorePeer}, {@code SegmentOpenings}),
 * the local descriptor built from the transports' contributions ({@code Descriptors}), the engine
 * side of the handshake port ({@code HandshakeService}), which transports {@code protocol} and
 * {@code MC_TRANSPORTS} install ({@code TransportPlan}) and per-slice selection with fallback plus
 * the local short-circuit ({@code Router}, {@code Slices}). Module-private.
 *
 * <p>Threads: the core owns the handshake server's threads only; everything here is called from
 * the embedder's threads and the transports' completion threads and is thread-safe. Registration
 * and lifecycle calls serialise on the core's lock; transfers do not.
 */
package io.mooncake4j.engine.core;
