package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.worker.plan.LayerLayout;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.IntPredicate;
import java.util.function.ToIntFunction;

/** What the transfer planner needs to know of vLLM's KV-cache config, as functions (pure, thread-safe). */
final class KvCacheLayouts {

    private KvCacheLayouts() {}

    /** The KV-cache groups that hold Mamba state (one block per request, not paged attention). */
    static IntPredicate mambaGroups(KvCacheConfig kvCacheConfig) {
        List<KvCacheGroup> groups = kvCacheConfig.groups();
        return g -> g >= 0 && g < groups.size() && groups.get(g).spec().kind() == KvCacheSpec.Kind.MAMBA;
    }

    /** The transfer group of a layer name (0 when the config does not name it). */
    static ToIntFunction<String> groupOfLayer(KvCacheConfig kvCacheConfig) {
        Map<String, Integer> byLayer = kvCacheConfig.transferGroupIndexByLayer();
        return name -> byLayer.getOrDefault(name, 0);
    }

    /** The block layout of a layer name (null when the config does not name it). */
    static Function<String, LayerLayout> layoutOfLayer(KvCacheConfig kvCacheConfig) {
        return name -> kvCacheConfig.specOf(name)
                .map(sp -> new LayerLayout(sp.kind().isAttention(), sp.pageSizeBytes() > sp.unpaddedPageSizeBytes(),
                        false))
                .orElse(null);
    }
}
