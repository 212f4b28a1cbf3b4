/**
 * Where KV caches live: {@link io.mooncake4j.memory.MemoryStorage} (one backing allocation, the
 * unit of registration), {@link io.mooncake4j.memory.KvCacheTensor} (a strided per-layer view,
 * the unit of transfer regions), the host allocator, model presets and layout builders, and
 * {@link io.mooncake4j.memory.DeviceMemory}: how a transport reaches GPU memory it cannot
 * dereference (detection, asynchronous copy queues, pinned bounce buffers; CUDA implementation in
 * {@code io.mooncake4j.memory.cuda}).
 *
 * <p>Thread-safety: storages, tensors, specs and presets are immutable; the allocator is
 * thread-safe. Ownership: whoever allocated a storage frees it; a storage must outlive its
 * registration with any engine.
 */
package io.mooncake4j.memory;
