package io.mooncake4j.connector.worker.send;

import io.mooncake4j.connector.wire.MooncakeXferMetadata;
import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.connector.worker.plan.PreparedRegions;
import io.mooncake4j.connector.worker.plan.TransferPlanner;
import io.mooncake4j.connector.worker.plan.TransferRegion;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.ToIntFunction;

/**
 * The region pairs P prepared for each shape of D it serves, least recently used dropped first
 * ({@link #MAX_PREPARED_SHAPES}): a pull asks {@link #prepared} and pulls of the same D share the result.
 *
 * <p><b>Threads.</b> Sender loop only.
 */
final class PreparedShapes {

    private final TransferPlanner planner;
    private final List<TransferRegion> localRegions;
    private final ToIntFunction<String> groupOfLayer;
    private final Function<String, LayerLayout> layoutOfLayer;
    private final int localPpSize;

    PreparedShapes(TransferPlanner planner, List<TransferRegion> localRegions, ToIntFunction<String> groupOfLayer,
            Function<String, LayerLayout> layoutOfLayer, int localPpSize) {
        this.planner = planner;
        this.localRegions = localRegions;
        this.groupOfLayer = groupOfLayer;
        this.layoutOfLayer = layoutOfLayer;
        this.localPpSize = localPpSize;
    }

    /**
     * The region pairs prepared for one shape of D (its registration as its pull describes it, its
     * ranks): a pure function of that shape and of this worker's fixed registration, so pulls of the
     * same D share them (preparing took a few hundred µs per pull). Immutable once built,
     * except {@link #byLayer}, built on first use (sender loop).
     */
    static final class Prepared {
        final PreparedRegions regions;
        /** The prepared region pairs of each local layer (layer-wise push), built on first use. */
        Map<String, PreparedRegions> byLayer;

        Prepared(PreparedRegions regions) {
            this.regions = regions;
        }
    }

    /** What the prepared regions depend on in a pull's metadata (arrays compared by content). */
    private record ShapeKey(int tpRank, int tpSize, int ppSize, long[] base, long[] blockLens, long[] kvBlockLens,
            List<String> names, int[] layerIndices, int[] groupIndices) {

        static ShapeKey of(MooncakeXferMetadata m) {
            return new ShapeKey(m.remoteTpRank(), m.remoteTpSize(), m.remotePpSize(), m.kvCachesBaseAddr(),
                    m.blockLens(), m.kvBlockLens(), m.registeredLayerNames(), m.registeredLayerIndices(),
                    m.registeredGroupIndices());
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof ShapeKey k && tpRank == k.tpRank && tpSize == k.tpSize && ppSize == k.ppSize
                    && Arrays.equals(base, k.base) && Arrays.equals(blockLens, k.blockLens)
                    && Arrays.equals(kvBlockLens, k.kvBlockLens) && names.equals(k.names)
                    && Arrays.equals(layerIndices, k.layerIndices) && Arrays.equals(groupIndices, k.groupIndices);
        }

        @Override
        public int hashCode() {
            int h = ((tpRank * 31 + tpSize) * 31 + ppSize) * 31 + Arrays.hashCode(base);
            h = h * 31 + Arrays.hashCode(blockLens);
            h = h * 31 + Arrays.hashCode(kvBlockLens);
            h = h * 31 + names.hashCode();
            h = h * 31 + Arrays.hashCode(layerIndices);
            return h * 31 + Arrays.hashCode(groupIndices);
        }
    }

    /** Shapes kept (least recently used dropped first): a few per D worker is the usual need. */
    static final int MAX_PREPARED_SHAPES = 64;

    private final LinkedHashMap<ShapeKey, Prepared> preparedByShape = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<ShapeKey, Prepared> eldest) {
            return size() > MAX_PREPARED_SHAPES;
        }
    };

    /** The region pairs for a pull of this shape, prepared once per shape. */
    Prepared prepared(MooncakeXferMetadata meta) {
        ShapeKey key = ShapeKey.of(meta);
        Prepared p = preparedByShape.get(key);
        if (p == null) {
            List<TransferRegion> remote = planner.regions(meta.kvCachesBaseAddr(), meta.blockLens(),
                    meta.kvBlockLens(), meta.registeredLayerNames(), meta.registeredLayerIndices(),
                    meta.registeredGroupIndices(), groupOfLayer);
            p = new Prepared(planner.prepare(localRegions, remote, meta.remoteTpRank(), meta.remoteTpSize(),
                    TransferPlanner.allowPartialLayers(meta.remotePpSize(), localPpSize), layoutOfLayer));
            preparedByShape.put(key, p);
        }
        return p;
    }
}
