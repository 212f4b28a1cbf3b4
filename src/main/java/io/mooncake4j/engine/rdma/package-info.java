/**
 * The RDMA transport ({@code protocol = "rdma"}) and what it needs before the first verb:
 * {@link io.mooncake4j.engine.rdma.RdmaAvailability} (can RDMA run here, and if not why, with the
 * fix), {@link io.mooncake4j.engine.rdma.MemlockCheck} (bytes × devices against
 * {@code RLIMIT_MEMLOCK}) and {@link io.mooncake4j.engine.rdma.NicSelection} ({@code device_name}
 * filter, NUMA/PCI preferences from sysfs, the descriptor's {@code priority_matrix}).
 *
 * <p>Native calls go through the module-private bindings in
 * {@code io.mooncake4j.engine.rdma.verbs}. The endpoint/handshake/slicing transport itself is
 * not written yet (see {@code docs/rdma.md}).
 *
 * <p>Thread-safety: every class here is stateless or immutable except the cached availability
 * probe, which is computed once under class-initialisation locking.
 */
package io.mooncake4j.engine.rdma;
