package io.mooncake4j.connector.worker.plan;

import java.util.ArrayList;
import java.util.List;

/** Helpers for whole-list descriptor comparisons. */
final class PlanFixtures {

    private PlanFixtures() {
    }

    record Desc(long src, long dst, long len) {
    }

    static Desc d(long src, long dst, long len) {
        return new Desc(src, dst, len);
    }

    static List<Desc> list(DescriptorBuffer b) {
        List<Desc> out = new ArrayList<>(b.size());
        for (int i = 0; i < b.size(); i++) {
            out.add(new Desc(b.src(i), b.dst(i), b.len(i)));
        }
        return out;
    }

    static int[][] groups(int[]... g) {
        return g;
    }

    static int[] ids(int... ids) {
        return ids;
    }

    static TransferRegion region(String name, int index, long base, long blockLen, long kvBlockLen, int group) {
        return new TransferRegion(name, index, base, blockLen, kvBlockLen, group);
    }
}
