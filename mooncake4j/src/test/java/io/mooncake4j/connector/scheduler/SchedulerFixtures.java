package io.mooncake4j.connector.scheduler;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.KvTransferParams;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import io.mooncake4j.memory.KvCacheConfig;
import io.mooncake4j.memory.KvCacheGroup;
import io.mooncake4j.memory.KvCacheSpec;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Requests, configurations and schedulers for the scheduler tests. */
final class SchedulerFixtures {

    static final String BOOTSTRAP = "http://10.1.2.3:8998";
    static final String P_ENGINE = "prefill-engine-7";

    private SchedulerFixtures() {}

    /** A mutable request the tests drive through its life. */
    static final class TestRequest implements Request {
        final String id;
        final int promptTokens;
        Map<String, Object> params;
        RequestStatus status = RequestStatus.WAITING;

        TestRequest(String id, int promptTokens, Map<String, Object> params) {
            this.id = id;
            this.promptTokens = promptTokens;
            this.params = params;
        }

        @Override
        public String requestId() {
            return id;
        }

        @Override
        public int numPromptTokens() {
            return promptTokens;
        }

        @Override
        public Map<String, Object> kvTransferParams() {
            return params;
        }

        @Override
        public RequestStatus status() {
            return status;
        }
    }

    static MooncakeConnectorConfig config(KvRole role, String engineId) {
        return MooncakeConnectorConfig.builder().kvRole(role).engineId(engineId).build();
    }

    /** One full-attention group of three layers, block size 16. */
    static KvCacheConfig fullAttention() {
        return KvCacheConfig.of(new KvCacheGroup(List.of("a0", "a1", "a2"), KvCacheSpec.fullAttention(16, 16384)));
    }

    /**
     * Three groups, block size 16: full attention; sliding window 64 tokens (64/16 + 1 = 5 blocks
     * kept); sliding window 100 tokens (ceil(100/16) + 1 = 8 blocks kept).
     */
    static KvCacheConfig hybrid() {
        return KvCacheConfig.of(
                new KvCacheGroup(List.of("full0", "full1"), KvCacheSpec.fullAttention(16, 16384)),
                new KvCacheGroup(List.of("sw0"), KvCacheSpec.slidingWindow(16, 16384, 64)),
                new KvCacheGroup(List.of("sw1"), KvCacheSpec.slidingWindow(16, 16384, 100)));
    }

    static MooncakeConnectorScheduler scheduler(KvRole role, KvCacheConfig kv) {
        return new MooncakeConnectorScheduler(config(role, role == KvRole.KV_CONSUMER ? "decode-0" : "prefill-0"),
                kv, 16);
    }

    /** P request params as the proxy sends them, in a fresh mutable map. */
    static Map<String, Object> producerParams(String transferId) {
        return new HashMap<>(KvTransferParams.forRemoteDecode(transferId).asMap());
    }

    /** D request params as the proxy sends them, in a fresh mutable map. */
    static Map<String, Object> consumerParams(String transferId) {
        return new HashMap<>(KvTransferParams.forRemotePrefill(transferId, P_ENGINE, BOOTSTRAP).asMap());
    }

    /** {@code from..to-1}. */
    static int[] range(int from, int to) {
        int[] out = new int[to - from];
        for (int i = 0; i < out.length; i++) {
            out[i] = from + i;
        }
        return out;
    }
}
