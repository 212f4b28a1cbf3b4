package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.verbs.QpCapabilities;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The RDMA tunables of Mooncake's {@code MC_*} environment (spec §7.3), read once. As in
 * Mooncake's {@code loadGlobalConfig}, a value that does not parse or is out of range is ignored
 * (with a WARN here) and the default kept.
 *
 * @param sliceSize         {@code MC_SLICE_SIZE}: bytes per work request
 * @param fragmentLimit     a tail up to this many bytes past a slice stays in the last slice
 *                          ({@code MC_FRAGMENT_RATIO})
 * @param retryCnt          {@code MC_RETRY_CNT}: attempts per slice over other paths
 * @param numQpPerEp        {@code MC_NUM_QP_PER_EP}: RC QPs per endpoint
 * @param maxWr             {@code MC_MAX_WR}: outstanding work requests per QP
 * @param maxSge            {@code MC_MAX_SGE}: scatter/gather entries per work request
 * @param maxInline         {@code MC_MAX_INLINE}: inline data bytes
 * @param maxCqePerCtx      {@code MC_MAX_CQE_PER_CTX}: CQ entries per device
 * @param maxEpPerCtx       {@code MC_MAX_EP_PER_CTX}: endpoints per device
 * @param ibPort            {@code MC_IB_PORT}: the device port used
 * @param gidIndex          {@code MC_GID_INDEX} (else {@code NCCL_IB_GID_INDEX}); -1 = automatic selection
 * @param autoGidMaxRetries {@code MC_AUTO_GID_MAX_RETRIES}: re-probes of the automatic GID choice
 * @param pkeyIndex         {@code MC_PKEY_INDEX}
 * @param mtuBytes          {@code MC_MTU}: path MTU in bytes (0: the port's active MTU)
 * @param trafficClass      {@code MC_IB_TC}: traffic class of the GRH
 * @param serviceLevel      {@code MC_IB_SL}: service level
 * @param maxMrSize         {@code MC_MAX_MR_SIZE}: larger buffers are registered in pieces
 * @param relaxedOrdering   {@code MC_IB_PCI_RELAXED_ORDERING}: register with relaxed ordering
 */
public record RdmaSettings(int sliceSize, int fragmentLimit, int retryCnt, int numQpPerEp, int maxWr, int maxSge,
                           int maxInline, int maxCqePerCtx, int maxEpPerCtx, int ibPort, int gidIndex,
                           int autoGidMaxRetries, int pkeyIndex, int mtuBytes, int trafficClass, int serviceLevel,
                           long maxMrSize, boolean relaxedOrdering) {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaSettings.class);

    /** Mooncake's defaults. */
    public static RdmaSettings defaults() {
        return new RdmaSettings(65536, 16384, 9, 2, 256, 4, 64, 4096, 65536, 1, -1, 2, 0, 4096, 0, 0, 1L << 40, true);
    }

    /** From {@code env} (a map so tests need not touch the real environment). */
    public static RdmaSettings from(Map<String, String> env) {
        RdmaSettings d = defaults();
        // at most 1 GiB: a slice (plus its fragment tail) must fit Slice.length (an int) and the port's
        // max_msg_sz (1 GiB on mlx5)
        int slice = intIn(env, "MC_SLICE_SIZE", d.sliceSize(), 1, 1 << 30);
        int ratio = intIn(env, "MC_FRAGMENT_RATIO", 0, 1, Integer.MAX_VALUE);
        int fragment = ratio > 0 ? slice / ratio : d.fragmentLimit();
        int gid = intIn(env, "MC_GID_INDEX", Integer.MIN_VALUE, 0, 255);
        if (gid == Integer.MIN_VALUE) {
            gid = intIn(env, "NCCL_IB_GID_INDEX", -1, 0, 255);
        }
        int mtu = intIn(env, "MC_MTU", d.mtuBytes(), 512, 4096);
        if (mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096) {
            LOG.warn("ignoring MC_MTU={}: must be 512, 1024, 2048 or 4096; using {}", mtu, d.mtuBytes());
            mtu = d.mtuBytes();
        }
        return new RdmaSettings(
                slice,
                fragment,
                intIn(env, "MC_RETRY_CNT", d.retryCnt(), 1, 127),
                intIn(env, "MC_NUM_QP_PER_EP", d.numQpPerEp(), 1, 256),
                intIn(env, "MC_MAX_WR", d.maxWr(), 1, 1 << 20),
                intIn(env, "MC_MAX_SGE", d.maxSge(), 1, 1024),
                intIn(env, "MC_MAX_INLINE", d.maxInline(), 0, 1 << 16),
                intIn(env, "MC_MAX_CQE_PER_CTX", d.maxCqePerCtx(), 1, 1 << 24),
                intIn(env, "MC_MAX_EP_PER_CTX", d.maxEpPerCtx(), 1, Integer.MAX_VALUE),
                intIn(env, "MC_IB_PORT", d.ibPort(), 1, 255),
                gid,
                intIn(env, "MC_AUTO_GID_MAX_RETRIES", d.autoGidMaxRetries(), 0, 64),
                intIn(env, "MC_PKEY_INDEX", d.pkeyIndex(), 0, 65535),
                mtu,
                intIn(env, "MC_IB_TC", d.trafficClass(), 0, 255),
                intIn(env, "MC_IB_SL", d.serviceLevel(), 0, 15),
                longIn(env, "MC_MAX_MR_SIZE", d.maxMrSize()),
                intIn(env, "MC_IB_PCI_RELAXED_ORDERING", 1, 0, Integer.MAX_VALUE) != 0);
    }

    /** QP capabilities for {@code ibv_create_qp}: {@code MC_MAX_WR}, {@code MC_MAX_SGE}, {@code MC_MAX_INLINE} on both queues. */
    public QpCapabilities qpCapabilities() {
        return new QpCapabilities(maxWr, maxWr, maxSge, maxSge, maxInline);
    }

    /** True when the GID index is chosen automatically (no {@code MC_GID_INDEX}/{@code NCCL_IB_GID_INDEX}). */
    public boolean autoGid() {
        return gidIndex < 0;
    }

    private static int intIn(Map<String, String> env, String key, int def, int min, int max) {
        String v = env.get(key);
        if (v == null || v.isBlank()) {
            return def;
        }
        try {
            int x = Integer.parseInt(v.strip());
            if (x >= min && x <= max) {
                return x;
            }
        } catch (NumberFormatException e) {
            // fall through to the warning
        }
        LOG.warn("ignoring {}={}: expected an integer in [{}, {}]; using {}", key, v, min, max,
                def == Integer.MIN_VALUE ? "the fallback" : String.format(Locale.ROOT, "%d", def));
        return def;
    }

    private static long longIn(Map<String, String> env, String key, long def) {
        String v = env.get(key);
        if (v == null || v.isBlank()) {
            return def;
        }
        try {
            long x = Long.parseLong(v.strip());
            if (x > 0) {
                return x;
            }
        } catch (NumberFormatException e) {
            // fall through to the warning
        }
        LOG.warn("ignoring {}={}: expected a positive integer; using {}", key, v, def);
        return def;
    }
}
