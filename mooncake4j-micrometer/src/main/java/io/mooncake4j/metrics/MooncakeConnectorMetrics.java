package io.mooncake4j.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.mooncake4j.connector.worker.MooncakeKvConnectorStats;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The connector's transfer statistics as Micrometer meters under vLLM's Prometheus names. Bind it to
 * a registry, then hand it every non-empty result of the worker's {@code getKvConnectorStats()}
 * (which drains the worker's statistics, so the same snapshot can also feed vLLM-style logging):
 *
 * <pre>{@code
 * MooncakeConnectorMetrics metrics = new MooncakeConnectorMetrics(Tags.of("engine", config.engineId()));
 * metrics.bindTo(registry);
 * // each step:
 * worker.getKvConnectorStats().ifPresent(metrics::record);
 * }</pre>
 *
 * <table>
 *   <caption>Meters (Prometheus names, as a Prometheus registry renders them)</caption>
 *   <tr><th>Micrometer</th><th>Prometheus</th><th>from</th></tr>
 *   <tr><td>timer {@value #XFER_TIME}</td><td>{@code vllm:mooncake_xfer_time_seconds}</td><td>each successful transfer's duration</td></tr>
 *   <tr><td>summary {@value #BYTES}</td><td>{@code vllm:mooncake_bytes_transferred}</td><td>its bytes</td></tr>
 *   <tr><td>summary {@value #DESCRIPTORS}</td><td>{@code vllm:mooncake_num_descriptors}</td><td>its descriptor count</td></tr>
 *   <tr><td>counter {@value #FAILED_TRANSFERS}</td><td>{@code vllm:mooncake_num_failed_transfers_total}</td><td>P: failed transfers</td></tr>
 *   <tr><td>counter {@value #FAILED_RECVS}</td><td>{@code vllm:mooncake_num_failed_recvs_total}</td><td>D: failed receives</td></tr>
 *   <tr><td>counter {@value #EXPIRED}</td><td>{@code vllm:mooncake_num_kv_expired_reqs_total}</td><td>P: sends expired after the abort timeout</td></tr>
 * </table>
 *
 * <p>Thread-safe; may be bound to several registries.
 */
public final class MooncakeConnectorMetrics implements MeterBinder {

    /** Timer of each successful transfer. */
    public static final String XFER_TIME = "vllm:mooncake_xfer_time";
    /** Summary of the bytes of each successful transfer. */
    public static final String BYTES = "vllm:mooncake_bytes_transferred";
    /** Summary of the descriptors of each successful transfer. */
    public static final String DESCRIPTORS = "vllm:mooncake_num_descriptors";
    /** Counter of failed transfers (P). */
    public static final String FAILED_TRANSFERS = "vllm:mooncake_num_failed_transfers";
    /** Counter of failed receives (D). */
    public static final String FAILED_RECVS = "vllm:mooncake_num_failed_recvs";
    /** Counter of sends expired after the abort timeout (P). */
    public static final String EXPIRED = "vllm:mooncake_num_kv_expired_reqs";

    private record Meters(Timer time, DistributionSummary bytes, DistributionSummary descriptors,
                          Counter failedTransfers, Counter failedRecvs, Counter expired) {}

    private final Tags tags;
    private final List<Meters> bound = new CopyOnWriteArrayList<>();

    /** Meters with no extra tags. */
    public MooncakeConnectorMetrics() {
        this(Tags.empty());
    }

    /**
     * Meters carrying {@code tags} (for example the engine id and TP rank, as vLLM's engine label).
     *
     * @param tags tags every meter carries (for example the engine id and TP rank)
     */
    public MooncakeConnectorMetrics(Iterable<Tag> tags) {
        this.tags = Tags.of(Objects.requireNonNull(tags, "tags"));
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        Objects.requireNonNull(registry, "registry");
        bound.add(new Meters(
                Timer.builder(XFER_TIME).description("Duration of each successful KV-cache transfer.")
                        .tags(tags)
                        .serviceLevelObjectives(ms(1), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500),
                                ms(1000), ms(2500), ms(5000))
                        .register(registry),
                DistributionSummary.builder(BYTES).description("Bytes moved by each successful KV-cache transfer.")
                        .tags(tags)
                        .serviceLevelObjectives(1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30)
                        .register(registry),
                DistributionSummary.builder(DESCRIPTORS)
                        .description("Descriptors (block ranges) of each successful KV-cache transfer.")
                        .tags(tags)
                        .serviceLevelObjectives(10, 100, 1000, 10_000, 100_000)
                        .register(registry),
                Counter.builder(FAILED_TRANSFERS).description("KV-cache transfers that failed (producer).")
                        .tags(tags).register(registry),
                Counter.builder(FAILED_RECVS).description("KV-cache receives that failed (consumer).")
                        .tags(tags).register(registry),
                Counter.builder(EXPIRED).description("Sends dropped because the consumer did not pull before the abort timeout.")
                        .tags(tags).register(registry)));
    }

    private static Duration ms(long millis) {
        return Duration.ofMillis(millis);
    }

    /**
     * Adds one snapshot of the worker's statistics to every bound registry.
     *
     * @param stats a drained snapshot of the worker's statistics
     */
    public void record(MooncakeKvConnectorStats stats) {
        Objects.requireNonNull(stats, "stats");
        long failedTransfers = stats.numFailedTransfers();
        long failedRecvs = stats.numFailedRecvs();
        long expired = stats.numKvExpiredReqs();
        for (Meters m : bound) {
            stats.forEachTransfer((seconds, bytes, descriptors) -> {
                m.time().record(Duration.ofNanos(Math.round(seconds * 1e9)));
                m.bytes().record(bytes);
                m.descriptors().record(descriptors);
            });
            m.failedTransfers().increment(failedTransfers);
            m.failedRecvs().increment(failedRecvs);
            m.expired().increment(expired);
        }
    }
}
