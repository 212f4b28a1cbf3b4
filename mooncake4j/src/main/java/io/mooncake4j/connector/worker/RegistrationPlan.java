package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.ConnectorException;
import io.mooncake4j.engine.DeviceMemoryAccess;
import io.mooncake4j.engine.TransferEngine;
import io.mooncake4j.internal.sys.Bytes;
import io.mooncake4j.internal.sys.ResourceLimits;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheSpec;
import io.mooncake4j.memory.KvCacheTensor;
import io.mooncake4j.memory.MemoryLocation;
import io.mooncake4j.memory.MemoryStorage;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.function.Function;

/**
 * What {@link MooncakeConnectorWorker#registerKvCaches} will register, computed without touching
 * the engine: the transfer regions in layer order, the layers skipped for lack of a KV spec, the
 * unique storages (the unit of memory registration), their bytes and locations, and the verdict of
 * the locked-memory check. Immutable; the CLI prints it, the worker registers it.
 *
 * @param protocol      the engine protocol the plan was checked against
 * @param regions       transfer regions in layer order (one per dense tensor or tensor piece)
 * @param skippedLayers layers without a KV-cache spec, not registered
 * @param storages      unique storages by base address, first-seen order
 * @param totalBytes    bytes of all storages
 * @param hostBytes     bytes of storages that are not GPU memory (what RLIMIT_MEMLOCK limits)
 * @param locations     distinct storage locations, first-seen order
 * @param memlockLimit  soft RLIMIT_MEMLOCK (-1 unlimited), empty if unknown
 * @param memlockVerdict host bytes against the limit, for protocols that pin memory
 * @param deviceAccess  for each GPU location ({@code cuda:N}) among the storages, what the engine said about
 *                      reaching it ({@link TransferEngine#deviceMemoryAccess}); empty when the plan was not
 *                      checked against an engine (then the protocol decides, see {@link #locationProblem()})
 */
public record RegistrationPlan(
        String protocol,
        List<RegisteredRegion> regions,
        List<String> skippedLayers,
        List<MemoryStorage> storages,
        long totalBytes,
        long hostBytes,
        List<String> locations,
        OptionalLong memlockLimit,
        MemlockVerdict memlockVerdict,
        Map<String, DeviceMemoryAccess> deviceAccess) {

    /** Keeps unmodifiable copies of the collections. */
    public RegistrationPlan {
        deviceAccess = Collections.unmodifiableMap(new LinkedHashMap<>(deviceAccess));
        Objects.requireNonNull(protocol, "protocol");
        regions = List.copyOf(regions);
        skippedLayers = List.copyOf(skippedLayers);
        storages = List.copyOf(storages);
        locations = List.copyOf(locations);
        Objects.requireNonNull(memlockLimit, "memlockLimit");
        Objects.requireNonNull(memlockVerdict, "memlockVerdict");
    }

    /** A plan not checked against an engine's GPU-memory support (no {@code deviceAccess}). */
    RegistrationPlan(String protocol, List<RegisteredRegion> regions, List<String> skippedLayers,
                            List<MemoryStorage> storages, long totalBytes, long hostBytes, List<String> locations,
                            OptionalLong memlockLimit, MemlockVerdict memlockVerdict) {
        this(protocol, regions, skippedLayers, storages, totalBytes, hostBytes, locations, memlockLimit,
                memlockVerdict, Map.of());
    }

    /**
     * Walks {@code kvCaches} as vLLM's {@code register_kv_caches} does (§6.3 of the connector spec).
     *
     * @param kvCaches                      layer name to the layer's tensors (one fused, or K and V), in layer order
     * @param kvCacheConfig                 the layers' specs and groups; layers absent from it are skipped
     * @param physicalBlocksPerLogicalBlock kernel blocks per logical block (vLLM's
     *                                      {@code _physical_blocks_per_logical_kv_block}, usually 1)
     * @param protocol                      the engine protocol
     * @param memlockLimit                  the soft RLIMIT_MEMLOCK as {@link ResourceLimits#memlockSoftLimit()} reads it
     * @throws ConnectorException when a region's transfer length exceeds its block stride
     */
    static RegistrationPlan of(Map<String, List<KvCacheTensor>> kvCaches, KvCacheConfig kvCacheConfig,
                                      int physicalBlocksPerLogicalBlock, String protocol, OptionalLong memlockLimit) {
        return of(kvCaches, kvCacheConfig, physicalBlocksPerLogicalBlock, protocol, memlockLimit, null);
    }

    /**
     * Like {@link #of(Map, KvCacheConfig, int, String, OptionalLong)}, and asks {@code deviceAccess}
     * (the engine's {@link TransferEngine#deviceMemoryAccess}) once per GPU location among the
     * storages; null to skip that check.
     */
    static RegistrationPlan of(Map<String, List<KvCacheTensor>> kvCaches, KvCacheConfig kvCacheConfig,
                                      int physicalBlocksPerLogicalBlock, String protocol, OptionalLong memlockLimit,
                                      Function<String, DeviceMemoryAccess> deviceAccess) {
        if (physicalBlocksPerLogicalBlock <= 0) {
            throw new IllegalArgumentException("physicalBlocksPerLogicalBlock must be positive");
        }
        Map<String, Integer> groupByLayer = kvCacheConfig.transferGroupIndexByLayer();
        List<RegisteredRegion> regions = new ArrayList<>();
        List<String> skipped = new ArrayList<>();
        Map<Long, MemoryStorage> storages = new LinkedHashMap<>();
        for (Map.Entry<String, List<KvCacheTensor>> e : kvCaches.entrySet()) {
            String layer = e.getKey();
            List<KvCacheTensor> tensors = e.getValue();
            Optional<KvCacheSpec> specOpt = kvCacheConfig.specOf(layer);
            if (specOpt.isEmpty() || tensors.isEmpty()) {
                skipped.add(layer);
                continue;
            }
            KvCacheSpec spec = specOpt.get();
            int layerIndex = LayerNames.extractLayerIndex(layer);
            int group = groupByLayer.get(layer);
            for (KvCacheTensor tensor : tensors) {
                for (KvCacheTensor region : tensor.denseRegions()) {
                    long blockLen = region.blockStrideBytes();
                    long kvBlockLen = kvBlockLen(layer, spec, tensor.blockDense(), blockLen,
                            physicalBlocksPerLogicalBlock, tensors.size());
                    if (kvBlockLen > blockLen) {
                        throw new ConnectorException(String.format(Locale.ROOT,
                                "Mooncake transfer length exceeds physical block stride for %s: "
                                        + "kv_block_len=%d, block_len=%d.", layer, kvBlockLen, blockLen));
                    }
                    regions.add(new RegisteredRegion(layer, layerIndex, group, region.dataAddress(), blockLen,
                            kvBlockLen, region.numBlocks(), tensor.storage().address()));
                }
                storages.putIfAbsent(tensor.storage().address(), tensor.storage());
            }
        }
        long total = 0;
        long host = 0;
        LinkedHashSet<String> locations = new LinkedHashSet<>();
        for (MemoryStorage s : storages.values()) {
            total = Math.addExact(total, s.byteSize());
            if (!s.isDevice()) {
                host = Math.addExact(host, s.byteSize());
            }
            locations.add(s.location());
        }
        MemlockVerdict verdict = verdict(protocol, host, memlockLimit);
        Map<String, DeviceMemoryAccess> access = new LinkedHashMap<>();
        if (deviceAccess != null) {
            for (String loc : locations) {
                if (MemoryLocation.isCuda(loc)) {
                    access.put(loc, Objects.requireNonNull(deviceAccess.apply(loc), "device access"));
                }
            }
        }
        return new RegistrationPlan(protocol, regions, skipped, List.copyOf(storages.values()), total, host,
                List.copyOf(locations), memlockLimit, verdict, access);
    }

    private static long kvBlockLen(String layer, KvCacheSpec spec, boolean dense, long blockLen, int physPerLogical,
                                   int tensorsInLayer) {
        if (spec.kind() == KvCacheSpec.Kind.KPOOL_TAIL) {
            return spec.unpaddedPageSizeBytes() / 2;
        }
        if (spec.kind().isAttention() && dense) {
            long divisor = (long) physPerLogical * tensorsInLayer;
            if (spec.pageSizeBytes() % divisor != 0) {
                throw new ConnectorException(String.format(Locale.ROOT,
                        "page size %d of layer %s is not divisible by %d physical block(s) per logical block "
                                + "times %d tensor(s) of the layer", spec.pageSizeBytes(), layer, physPerLogical,
                        tensorsInLayer));
            }
            return spec.pageSizeBytes() / divisor;
        }
        return blockLen;
    }

    /** Whether registering {@code protocol} counts host memory against RLIMIT_MEMLOCK. */
    static boolean pinsHostMemory(String protocol) {
        return protocol.toLowerCase(Locale.ROOT).equals("rdma");
    }

    private static MemlockVerdict verdict(String protocol, long hostBytes, OptionalLong limit) {
        if (!pinsHostMemory(protocol)) {
            return MemlockVerdict.NOT_APPLICABLE;
        }
        if (limit.isEmpty()) {
            return MemlockVerdict.UNKNOWN;
        }
        if (limit.getAsLong() == ResourceLimits.UNLIMITED) {
            return MemlockVerdict.UNLIMITED;
        }
        return hostBytes > limit.getAsLong() ? MemlockVerdict.EXCEEDS_LIMIT : MemlockVerdict.WITHIN_LIMIT;
    }

    /** {@return true when nothing would be registered (every layer skipped, or no layers)} */
    public boolean isEmpty() {
        return storages.isEmpty();
    }

    /** {@return the registered layer names, in order, each once} */
    public List<String> layerNames() {
        return regions.stream().map(RegisteredRegion::layerName).distinct().toList();
    }

    /**
     * {@return regions per storage base address}
     *
     * @param storage a registered storage
     */
    public long regionCount(MemoryStorage storage) {
        return regions.stream().filter(r -> r.storageAddress() == storage.address()).count();
    }

    /**
     * The reason the engine cannot register these storages, if any: GPU memory ({@code cuda:N}) that
     * the engine said it cannot reach (its reason and fix are quoted), or, when the engine did not say,
     * GPU memory over {@code tcp} (an engine without CUDA staging). GPU memory the engine stages or
     * reaches directly is no problem.
     *
     * @return why the engine cannot register these storages, or empty when it can
     */
    public Optional<String> locationProblem() {
        for (MemoryStorage s : storages) {
            if (!s.isDevice()) {
                continue;
            }
            DeviceMemoryAccess a = deviceAccess.get(s.location());
            if (a != null && a.allowed()) {
                continue;
            }
            if (a != null && a.kind() == DeviceMemoryAccess.Kind.UNSUPPORTED) {
                return Optional.of(String.format(Locale.ROOT,
                        "Cannot register GPU memory with protocol %s: storage 0x%x (%s) is at %s, and %s. "
                                + "Otherwise allocate the KV caches in host memory (cpu:N)%s.",
                        protocol, s.address(), Bytes.human(s.byteSize()), s.location(), a.description(),
                        protocol.equalsIgnoreCase("rdma") ? "" : ", or use protocol \"rdma\" with GPUDirect RDMA"));
            }
            if (protocol.toLowerCase(Locale.ROOT).equals("tcp")) {
                return Optional.of(String.format(Locale.ROOT,
                        "Cannot register GPU memory with protocol tcp: storage 0x%x (%s) is at %s, and this engine "
                                + "does not report GPU staging support. Use mooncake4j's TCP engine (kind \"tcp\") "
                                + "where CUDA is available (JCuda on the class path, an NVIDIA driver), protocol "
                                + "\"rdma\" with GPUDirect RDMA (nvidia-peermem loaded), or allocate the KV caches "
                                + "in host memory (cpu:N).",
                        s.address(), Bytes.human(s.byteSize()), s.location()));
            }
        }
        return Optional.empty();
    }

    /**
     * {@return how the engine reaches the GPU memory of this plan, one clause per location; empty without GPU memory}
     */
    public Optional<String> deviceMemoryText() {
        if (deviceAccess.isEmpty()) {
            return Optional.empty();
        }
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, DeviceMemoryAccess> e : deviceAccess.entrySet()) {
            parts.add(e.getKey() + " " + e.getValue().kind().name().toLowerCase(Locale.ROOT)
                    + (e.getValue().allowed() ? ": " + e.getValue().description() : ""));
        }
        return Optional.of(String.join("; ", parts));
    }

    /** {@return the memlock warning for {@link MemlockVerdict#EXCEEDS_LIMIT}, naming the fix; empty otherwise} */
    public Optional<String> memlockWarning() {
        if (memlockVerdict != MemlockVerdict.EXCEEDS_LIMIT) {
            return Optional.empty();
        }
        return Optional.of(String.format(Locale.ROOT,
                "Registering %s of host memory over %s exceeds the locked-memory limit RLIMIT_MEMLOCK=%s; "
                        + "registration will likely fail. Raise it: 'ulimit -l unlimited' in the launching shell, "
                        + "'* - memlock unlimited' in /etc/security/limits.conf, LimitMEMLOCK=infinity for a "
                        + "systemd unit, or --ulimit memlock=-1 for a container.",
                Bytes.human(hostBytes), protocol, ResourceLimits.describe(memlockLimit.getAsLong())));
    }

    /** {@return one line: layers, regions, storages, bytes, locations, memlock} */
    public String summary() {
        return String.format(Locale.ROOT,
                "%d layer(s) (%d skipped), %d region(s), %d unique storage(s), %s total at %s; protocol %s; "
                        + "memlock %s", layerNames().size(), skippedLayers.size(), regions.size(), storages.size(),
                Bytes.human(totalBytes), locations, protocol, memlockText())
                + deviceMemoryText().map(t -> "; GPU memory " + t).orElse("");
    }

    /** {@return the memlock limit and verdict for people} */
    public String memlockText() {
        String limit = memlockLimit.isPresent() ? ResourceLimits.describe(memlockLimit.getAsLong()) : "unknown";
        return "limit " + limit + ", " + memlockVerdict.text();
    }

    /** {@return vLLM's parallel per-region lists plus the storages} */
    public KvRegistration kvRegistration() {
        List<Long> base = new ArrayList<>(regions.size());
        List<Long> blockLen = new ArrayList<>(regions.size());
        List<Long> kvBlockLen = new ArrayList<>(regions.size());
        List<String> names = new ArrayList<>(regions.size());
        List<Integer> indices = new ArrayList<>(regions.size());
        List<Integer> groups = new ArrayList<>(regions.size());
        for (RegisteredRegion r : regions) {
            base.add(r.baseAddress());
            blockLen.add(r.blockLen());
            kvBlockLen.add(r.kvBlockLen());
            names.add(r.layerName());
            indices.add(r.layerIndex());
            groups.add(r.groupIndex());
        }
        return new KvRegistration(base, blockLen, kvBlockLen, names, indices, groups, storages);
    }

    /** {@return a JSON-ready tree (maps, lists, strings, numbers) for {@code --json} output} */
    public Map<String, Object> toJsonTree() {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("protocol", protocol);
        root.put("layers", layerNames().size());
        root.put("skipped_layers", skippedLayers);
        List<Object> regionList = new ArrayList<>();
        for (RegisteredRegion r : regions) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("layer", r.layerName());
            m.put("layer_index", r.layerIndex());
            m.put("group_index", r.groupIndex());
            m.put("base_addr", r.baseAddress());
            m.put("block_len", r.blockLen());
            m.put("kv_block_len", r.kvBlockLen());
            m.put("num_blocks", r.numBlocks());
            m.put("storage_addr", r.storageAddress());
            regionList.add(m);
        }
        root.put("regions", regionList);
        List<Object> storageList = new ArrayList<>();
        for (MemoryStorage s : storages) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("addr", s.address());
            m.put("bytes", s.byteSize());
            m.put("location", s.location());
            m.put("regions", regionCount(s));
            storageList.add(m);
        }
        root.put("storages", storageList);
        root.put("total_bytes", totalBytes);
        root.put("host_bytes", hostBytes);
        root.put("locations", locations);
        root.put("memlock_limit", memlockLimit.isPresent() ? (Object) memlockLimit.getAsLong() : null);
        root.put("memlock_verdict", memlockVerdict.name().toLowerCase(Locale.ROOT));
        Map<String, Object> access = new LinkedHashMap<>();
        for (Map.Entry<String, DeviceMemoryAccess> e : deviceAccess.entrySet()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("kind", e.getValue().kind().name().toLowerCase(Locale.ROOT));
            m.put("description", e.getValue().description());
            access.put(e.getKey(), m);
        }
        root.put("device_access", access);
        return root;
    }
}
