/**
 * The {@code shm} transport: host memory between processes on one machine (Mooncake TENT's shm
 * idea). {@link io.mooncake4j.engine.shm.MachineIdentity} decides "same machine" (boot id and PID
 * namespace); {@link io.mooncake4j.engine.shm.ShmAdvert} is what a segment descriptor advertises
 * under {@code mc4j_shm} (pid, and per buffer a memfd's fd/offset/name or {@code vm});
 * {@link io.mooncake4j.engine.shm.ShmTransport} maps each remote memfd buffer once
 * ({@code PeerMappings}) and copies each slice with one memcpy on the caller's thread, or uses
 * {@code process_vm_writev/readv} for host memory that is not shareable. Module-private; the engine
 * core finds it through {@code ShmTransportProvider} and installs it ({@code EngineBuilder.only("shm")}
 * is the core with shm alone, for measuring it). Ownership: a {@code PeerMappings} belongs to the transport and lives as long as
 * the peer's descriptor; its arenas are closed on refresh, {@code forget} and uninstall.
 */
package io.mooncake4j.engine.shm;
