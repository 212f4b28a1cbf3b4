package io.mooncake4j.connector.worker;

import io.mooncake4j.connector.KvRole;
import io.mooncake4j.connector.MooncakeConnectorConfig;
import java.util.List;

/** Shared inputs of the worker tests. */
final class WorkerTestSupport {

    private WorkerTestSupport() {}

    static MooncakeConnectorConfig config(KvRole role) {
        return MooncakeConnectorConfig.builder()
                .kvRole(role)
                .engineId("test-engine")
                .protocol("tcp")
                .hostname("127.0.0.1")
                .build();
    }

    /** Names of live threads that belong to mooncake4j. */
    static List<String> liveMooncakeThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(Thread::isAlive)
                .map(Thread::getName)
                .filter(n -> n.startsWith("mooncake-"))
                .sorted()
                .toList();
    }
}
