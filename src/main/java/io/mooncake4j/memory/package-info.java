/**
 * Where KV caches live: {@link io.mooncake4j.memory.MemoryStorage} (one backing allocation, the
 * unit of registration), {@link io.mooncake4j.memory.KvCacheTensor} (a strided per-layer view,
 * the unit of transfer regions), the host allocator, model presets and layout builders.
 *
 * <p>Thread-safety: storages, tensors, specs and presets are immutable; the allocator is
 * thread-safe. Ownership: whoever allocated a storage frees it; a storage must outlive its
 * registration with any engine.
 */
package io.mooncake4j.memory;
