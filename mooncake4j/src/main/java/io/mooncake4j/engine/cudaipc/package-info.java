/**
 * The {@code cuda-ipc} transport: GPU memory between processes on one machine over CUDA IPC
 * handles (Mooncake TENT's intra-node NVLink idea). {@link io.mooncake4j.engine.cudaipc.CudaIpcAdvert}
 * is what a segment descriptor advertises under {@code mc4j_cuda_ipc} (the process token, and per
 * GPU buffer the allocation's IPC handle, the buffer's offset in it, the allocation's size and the
 * GPU's uuid); {@link io.mooncake4j.engine.cudaipc.CudaIpcTransport} opens each remote allocation
 * once ({@code PeerHandles}, capped per peer) and copies each slice device to device on the
 * caller's thread. The CUDA calls go through {@link io.mooncake4j.engine.cudaipc.IpcDriver}:
 * {@code CudaDriverIpc} is the driver API on {@code libcuda.so.1}, tests substitute a fake whose
 * device memory is host memory. Module-private; the engine core installs it first in its order
 * (it moves GPU memory only). Ownership: a {@code PeerHandles} belongs to the transport and lives
 * as long as the peer's descriptor; its handles are closed on refresh, {@code forget} and
 * uninstall, each once the copies holding it ended; the driver's streams and retained contexts
 * are released at uninstall.
 */
package io.mooncake4j.engine.cudaipc;
