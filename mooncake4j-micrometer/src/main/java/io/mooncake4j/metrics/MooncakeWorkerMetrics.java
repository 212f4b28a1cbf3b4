package io.mooncake4j.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.mooncake4j.connector.worker.MooncakeConnectorWorker;
import io.mooncake4j.connector.worker.WorkerCounters;
import java.util.Objects;
import java.util.function.ToDoubleFunction;

/**
 * One worker's side-channel counters ({@link MooncakeConnectorWorker#counters()}) and health as
 * Micrometer meters. vLLM has no metric for these; they carry mooncake4j's names. Each is read from
 * the worker when the registry is scraped (nothing to call per step).
 *
 * <table>
 *   <caption>Meters (a Prometheus registry adds {@code _total} to counters and turns dots into underscores)</caption>
 *   <tr><th>name</th><th>tags</th><th>counts</th></tr>
 *   <tr><td>{@value #LIMIT_REJECTIONS}</td><td>—</td><td>P: pulls refused because a side-channel limit was reached</td></tr>
 *   <tr><td>{@value #ERROR_REPLIES}</td><td>—</td><td>P: {@code ERROR} responses sent to D</td></tr>
 *   <tr><td>{@value #DROPPED}</td><td>{@code reason=malformed|reply_not_sent|placeholder_expired|stale_wave}</td>
 *       <td>P: messages, replies and waves dropped</td></tr>
 *   <tr><td>{@value #BACKLOG_PAUSES}</td><td>—</td><td>P: listener pauses at its byte budget</td></tr>
 *   <tr><td>{@value #HANDSHAKE_RETRIES}</td><td>—</td><td>D: pull sockets replaced after a stuck handshake</td></tr>
 *   <tr><td>{@value #BACKGROUND_ERRORS}</td><td>—</td><td>exceptions of background work (each logged)</td></tr>
 *   <tr><td>{@value #SELF_AIMED_REFUSALS}</td><td>—</td><td>P: pulls or writes refused because they aimed at P's
 *       own engine</td></tr>
 *   <tr><td>{@value #PEERS_DROPPED}</td><td>—</td><td>P: side-channel connections the listener closed</td></tr>
 *   <tr><td>{@value #ANSWERS_DROPPED}</td><td>{@code reason=protocol|peer_gone|queue_full|closing}</td>
 *       <td>P: final answers that never reached D</td></tr>
 *   <tr><td>{@value #BOOTSTRAP_CLOSED}</td><td>{@code reason=evicted|refused|expired}</td>
 *       <td>the bootstrap server this worker launched: connections closed by its bounds</td></tr>
 *   <tr><td>{@value #HEALTHY}</td><td>—</td><td>gauge: 1 while every background thread serves, else 0</td></tr>
 * </table>
 *
 * <p>Thread-safe. The meters hold the worker weakly (Micrometer's function meters): a closed and
 * dropped worker stops being reported; remove them from the registry to stop at once.
 */
public final class MooncakeWorkerMetrics implements MeterBinder {

    /** Pulls refused because a side-channel limit was reached. */
    public static final String LIMIT_REJECTIONS = "mooncake4j.side_channel.limit_rejections";
    /** ERROR responses sent to D. */
    public static final String ERROR_REPLIES = "mooncake4j.side_channel.error_replies";
    /** Messages, replies and waves dropped (tag {@code reason}). */
    public static final String DROPPED = "mooncake4j.side_channel.dropped";
    /** Listener pauses at its byte budget. */
    public static final String BACKLOG_PAUSES = "mooncake4j.side_channel.backlog_pauses";
    /** D pull sockets replaced after a stuck handshake. */
    public static final String HANDSHAKE_RETRIES = "mooncake4j.side_channel.handshake_retries";
    /** Exceptions of background work. */
    public static final String BACKGROUND_ERRORS = "mooncake4j.worker.background_errors";
    /** Pulls or writes refused because they aimed at P's own engine. */
    public static final String SELF_AIMED_REFUSALS = "mooncake4j.side_channel.self_aimed_refusals";
    /** Side-channel connections P's listener closed. */
    public static final String PEERS_DROPPED = "mooncake4j.side_channel.peers_dropped";
    /** Final answers that never reached D (tag {@code reason}). */
    public static final String ANSWERS_DROPPED = "mooncake4j.side_channel.answers_dropped";
    /** Bootstrap-server connections closed by its bounds (tag {@code reason}). */
    public static final String BOOTSTRAP_CLOSED = "mooncake4j.bootstrap.connections_closed";
    /** Gauge: 1 while the worker is healthy. */
    public static final String HEALTHY = "mooncake4j.worker.healthy";

    private final MooncakeConnectorWorker worker;
    private final Tags tags;

    /**
     * Meters of {@code worker} carrying {@code tags} (for example the engine id and TP rank).
     *
     * @param worker the worker whose counters are read
     * @param tags   tags every meter carries (for example the engine id and TP rank)
     */
    public MooncakeWorkerMetrics(MooncakeConnectorWorker worker, Iterable<Tag> tags) {
        this.worker = Objects.requireNonNull(worker, "worker");
        this.tags = Tags.of(Objects.requireNonNull(tags, "tags"));
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        Objects.requireNonNull(registry, "registry");
        counter(registry, LIMIT_REJECTIONS, tags, "pulls refused because a side-channel limit was reached",
                WorkerCounters::limitRejections);
        counter(registry, ERROR_REPLIES, tags, "ERROR responses sent to decode workers", WorkerCounters::errorReplies);
        counter(registry, DROPPED, tags.and("reason", "malformed"), "side-channel messages, replies and waves dropped",
                WorkerCounters::malformedMessages);
        counter(registry, DROPPED, tags.and("reason", "reply_not_sent"), "side-channel messages, replies and waves dropped",
                WorkerCounters::repliesDropped);
        counter(registry, DROPPED, tags.and("reason", "placeholder_expired"),
                "side-channel messages, replies and waves dropped", WorkerCounters::placeholdersExpired);
        counter(registry, DROPPED, tags.and("reason", "stale_wave"), "side-channel messages, replies and waves dropped",
                WorkerCounters::staleWaves);
        counter(registry, BACKLOG_PAUSES, tags, "listener pauses at its byte budget", WorkerCounters::backlogPauses);
        counter(registry, HANDSHAKE_RETRIES, tags, "pull sockets replaced after a stuck handshake",
                WorkerCounters::handshakeRetries);
        counter(registry, BACKGROUND_ERRORS, tags, "exceptions of background work", WorkerCounters::backgroundErrors);
        counter(registry, SELF_AIMED_REFUSALS, tags, "pulls or writes refused because they aimed at P's own engine",
                WorkerCounters::selfAimedRefusals);
        counter(registry, PEERS_DROPPED, tags, "side-channel connections the listener closed",
                WorkerCounters::peersDropped);
        String answers = "final side-channel answers that never reached the decode worker";
        counter(registry, ANSWERS_DROPPED, tags.and("reason", "protocol"), answers,
                c -> c.answersDropped().protocol());
        counter(registry, ANSWERS_DROPPED, tags.and("reason", "peer_gone"), answers,
                c -> c.answersDropped().peerGone());
        counter(registry, ANSWERS_DROPPED, tags.and("reason", "queue_full"), answers,
                c -> c.answersDropped().queueFull());
        counter(registry, ANSWERS_DROPPED, tags.and("reason", "closing"), answers,
                c -> c.answersDropped().closing());
        String boot = "bootstrap-server connections closed by its bounds";
        counter(registry, BOOTSTRAP_CLOSED, tags.and("reason", "evicted"), boot, c -> c.bootstrapClosed().evicted());
        counter(registry, BOOTSTRAP_CLOSED, tags.and("reason", "refused"), boot, c -> c.bootstrapClosed().refused());
        counter(registry, BOOTSTRAP_CLOSED, tags.and("reason", "expired"), boot, c -> c.bootstrapClosed().expired());
        Gauge.builder(HEALTHY, worker, w -> w.health().healthy() ? 1 : 0).tags(tags)
                .description("1 while every background thread of the worker serves").register(registry);
    }

    private void counter(MeterRegistry registry, String name, Tags t, String description,
            ToDoubleFunction<WorkerCounters> value) {
        FunctionCounter.builder(name, worker, w -> value.applyAsDouble(w.counters())).tags(t)
                .description(description).register(registry);
    }
}
