/**
 * Engine-level code shared by the engines ({@code engine.tcp}, {@code engine.rdma}), in one copy:
 * the per-batch task state and batch table of the asynchronous API ({@code TaskBatch},
 * {@code BatchTable}), the synchronous and asynchronous batch calls with their argument checks
 * and deadlines ({@code EngineCalls}), one descriptor fetch per segment name in flight
 * ({@code SegmentOpenings}), and the engine side of the handshake port ({@code HandshakeService}).
 * Module-private. Every class here is thread-safe; none owns a thread.
 */
package io.mooncake4j.engine.internal;
