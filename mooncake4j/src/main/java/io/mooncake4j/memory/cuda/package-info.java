/**
 * GPU memory through JCuda: {@link io.mooncake4j.memory.cuda.CudaDeviceStorage} ({@code cuda:N},
 * {@code cudaMalloc}), {@link io.mooncake4j.memory.cuda.CudaPinnedHostAllocator} (page-locked
 * host memory for staging), {@link io.mooncake4j.memory.cuda.CudaPointers} (location detection
 * for {@code *}), {@link io.mooncake4j.memory.cuda.CudaCopies},
 * {@link io.mooncake4j.memory.cuda.CudaStream} and {@link io.mooncake4j.memory.cuda.CudaEvent}
 * (synchronous and asynchronous copies, per-chunk completion), the
 * availability probe {@link io.mooncake4j.memory.cuda.CudaAvailability}, and
 * {@link io.mooncake4j.memory.cuda.CudaDeviceMemory}, the {@link io.mooncake4j.memory.DeviceMemory}
 * that transports (the TCP engine's GPU staging) use, and
 * {@link io.mooncake4j.memory.cuda.CudaDmaBuf}, the dma-buf export for GPUDirect RDMA (driver
 * API through FFM on {@code libcuda.so.1}, which JCuda 12.6.0 does not bind for this).
 *
 * <p>JCuda is optional. It is reached from the class path through method handles (it is not a
 * {@code requires} of this module; {@code docs/gpu.md} says why), and only this package touches
 * it, only after the probe has loaded it: a host without JCuda, without a driver or without a
 * GPU runs everything else, and asking for GPU memory there throws
 * {@link io.mooncake4j.memory.cuda.CudaUnavailableException} with the fix. JCuda's native
 * library is unpacked into a mooncake4j-owned folder
 * ({@code <java.io.tmpdir>/mooncake4j-<user>/jcuda-12.6.0-<platform>}, or
 * {@code -Dmooncake4j.cuda.nativeDir}).
 *
 * <p>Ownership: whoever allocates a storage, allocator or stream closes it, after every
 * registration and every copy using it has finished. Thread-safety: the probe, storages,
 * allocators and the static helpers are thread-safe; a {@link io.mooncake4j.memory.cuda.CudaStream}
 * and its events have one owner thread. Control-path calls throw {@link io.mooncake4j.memory.cuda.CudaException};
 * copy calls return {@code cudaError_t} codes ({@link io.mooncake4j.memory.cuda.CudaError}).
 */
package io.mooncake4j.memory.cuda;
