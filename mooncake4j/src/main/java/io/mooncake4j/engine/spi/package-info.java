/**
 * The transport SPI: what the engine core ({@code io.mooncake4j.engine.core}) asks of a way of moving
 * bytes ({@code tcp}, {@code rdma}, {@code shm}, {@code cuda-ipc}), after Mooncake TENT's shape. Module-private.
 *
 * <p>Closed: a transport imports this package, {@code engine}'s public types, the handshake's
 * descriptor and wire types, {@code memory} and {@code io.mooncake4j.internal.*}, never the core.
 * What the core shares with transports lives here: the settings read once from the environment
 * ({@link io.mooncake4j.engine.spi.EngineSettings}), how a transport is found, declared and made
 * ({@link io.mooncake4j.engine.spi.TransportProvider} through {@code ServiceLoader},
 * {@link io.mooncake4j.engine.spi.TransportDeclaration}, {@link io.mooncake4j.engine.spi.TransportFactory}),
 * a core batch as a transport sees it
 * ({@link io.mooncake4j.engine.spi.BatchTasks}) and the way from an engine to its installed
 * transports for their monitoring getters ({@link io.mooncake4j.engine.spi.TransportHost}).
 *
 * <p>The core owns everything a transport must not repeat: initialisation, the local segment and
 * its {@link io.mooncake4j.engine.BufferRegistry}, the handshake server and client, the peer
 * segment descriptors and their cache, the batch table, argument checks, the local short-circuit,
 * and the choice of transport per request. A {@link io.mooncake4j.engine.spi.Transport} only:
 * <ol>
 *   <li>says what it can move ({@link io.mooncake4j.engine.spi.TransportCapabilities});</li>
 *   <li>is installed into a {@link io.mooncake4j.engine.spi.TransportContext} and uninstalled;</li>
 *   <li>registers local buffers (memory regions, keys, mappings) and contributes its fields to the
 *       local segment descriptor ({@link io.mooncake4j.engine.spi.DescriptorContribution});</li>
 *   <li>answers whether it can reach a given peer buffer
 *       ({@link io.mooncake4j.engine.spi.Transport#canTransfer}) from what the peer's descriptor
 *       advertises ({@link io.mooncake4j.engine.spi.RemoteSegment});</li>
 *   <li>moves slices ({@link io.mooncake4j.engine.spi.SliceGroup}) and reports each slice's end
 *       exactly once: done, or failed with a {@link io.mooncake4j.engine.spi.SliceFailure} that
 *       tells the core whether the next capable transport may retry it.</li>
 * </ol>
 *
 * <p>Descriptor compatibility: the fields Mooncake's C++ engine reads ({@code tcp_data_port},
 * {@code devices}, {@code rkey}/{@code lkey}, ...) are set through typed calls; anything else a
 * transport adds goes under its own extension key ({@code "mc4j_<transport>"}), which the C++
 * decoder ignores. A peer without a transport's extension is never offered that transport.
 *
 * <p>Threads: install/uninstall/register/unregister are called one at a time by the core (under
 * its registration lock); {@code canTransfer} and {@code submit} from any caller thread, many at
 * once; a transport completes slices from whichever thread it likes, and must not block the
 * submitting thread on the network for longer than its own bounded timeouts.
 *
 * <p>Order: the core tries installed transports by their declared preference ({@code cuda-ipc} 10,
 * {@code shm} 20, {@code rdma} 30, {@code tcp} 90); tcp's lanes end tasks on the core's batch
 * ({@link io.mooncake4j.engine.spi.BatchTasks}).
 */
package io.mooncake4j.engine.spi;
