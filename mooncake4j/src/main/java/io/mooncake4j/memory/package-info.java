/**
 * Where KV caches live: {@link io.mooncake4j.memory.MemoryStorage} (one backing allocation, the
 * unit of registration), {@link io.mooncake4j.memory.KvCacheTensor} (a strided per-layer view,
 * the unit of transfer regions), the host allocator, model presets and layout builders, and
 * {@link io.mooncake4j.memory.DeviceMemory}: how a transport reaches GPU memory it cannot
 * dereference (detection, asynchronous copy queues, pinned bounce buffers, device allocation; CUDA
 * implementation in {@code io.mooncake4j.memory.cuda}), with {@link io.mooncake4j.memory.DeviceCopier}
 * for tools that move bulk data between host and device memory.
 *
 * <p>Thread-safety: storages, tensors, specs and presets are immutable; the allocator is
 * thread-safe; a {@code DeviceCopier} has one owner thread at a time. Ownership: whoever allocated a
 * storage frees it (device allocations by closing them); a storage must outlive its registration
 * with any engine.
 */
package io.mooncake4j.memory;
