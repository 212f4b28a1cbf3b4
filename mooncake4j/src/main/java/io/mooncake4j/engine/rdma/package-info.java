/**
 * The RDMA transport ({@code protocol = "rdma"}) and what it needs before the first verb:
 * {@link io.mooncake4j.engine.rdma.RdmaAvailability} (can RDMA run here, and if not why, with the
 * fix), {@link io.mooncake4j.engine.rdma.MemlockCheck} (bytes × devices against
 * {@code RLIMIT_MEMLOCK}) and {@link io.mooncake4j.engine.rdma.NicSelection} ({@code device_name}
 * filter, NUMA/PCI preferences from sysfs, the descriptor's {@code priority_matrix}).
 *
 * <p>The transport: {@link io.mooncake4j.engine.rdma.RdmaTransport}, installed by the engine core
 * (kinds {@code "rdma"}/{@code "auto"}; found through {@code RdmaTransportProvider};
 * {@code EngineBuilder.only("rdma")} is the core with rdma alone; its monitoring getters through {@code RdmaTransport.in(engine)}), over an {@link io.mooncake4j.engine.rdma.RdmaProvider} —
 * {@link io.mooncake4j.engine.rdma.VerbsRdmaProvider} in production, an emulated fabric in the
 * tests. Per device an {@code RdmaContext} (CQ, poller thread, endpoints by peer NIC path); per
 * peer NIC path an {@code RdmaEndpoint} ({@code MC_NUM_QP_PER_EP} RC QPs, queue of slices,
 * reusable work-request array); {@code Slice} (one work request), {@code RdmaBatch} (the state
 * of one slice group the core handed over) and {@code PeerSegment} (a peer descriptor flattened)
 * hold the data path's state in pooled objects and primitive arrays. Native calls go through the
 * module-private bindings in {@code io.mooncake4j.engine.rdma.verbs}. GPU memory is registered
 * for GPUDirect RDMA (dma-buf, else peer memory) through a
 * {@link io.mooncake4j.engine.rdma.GpuDirectSupport} ({@code GpuDirectSupport.cuda()} in
 * production, a fake in tests). See {@code docs/rdma.md}.
 *
 * <p>Small helpers the transport delegates to: {@code LocalRegistration}/{@code LocalRegistrations}
 * (registered ranges, pieces above {@code max_mr_size}, lock-free lookups),
 * {@code ParallelRegistration} ({@code ibv_reg_mr} on every device at once),
 * {@code AsyncEventMonitor} (device events → NIC selection).
 *
 * <p>Threads: per device a poller {@code mooncake-rdma-poller-N} and an event reader
 * {@code mooncake-rdma-events-N} (platform, engine lifetime); platform
 * {@code mooncake-rdma-connect-N} per active handshake and {@code mooncake-rdma-control-N} (at
 * most 8) for passive bring-ups, so that blocking verbs calls never pin a virtual thread's
 * carrier; short-lived {@code mooncake-rdma-register-N} while a large buffer is pinned on
 * several devices.
 *
 * <p>Ownership and thread-safety: the transport owns its contexts, endpoints, registrations and
 * threads and releases them in {@code uninstall()} (QPs, CQs, MRs, PDs, contexts in that order; a
 * device whose poller does not stop is left open rather than freed under it); it
 * is thread-safe. The helpers ({@code MemlockCheck}, {@code NicSelection}, {@code GidSelection},
 * {@code QpBringUp}, {@code ProtocolSelection}, settings records) are stateless or immutable
 * except the cached availability probe, computed once under class-initialisation locking.
 */
package io.mooncake4j.engine.rdma;
