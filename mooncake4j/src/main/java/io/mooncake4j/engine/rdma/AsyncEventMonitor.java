package io.mooncake4j.engine.rdma;

import io.mooncake4j.engine.rdma.verbs.AsyncEvent;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads each device's asynchronous events ({@code ibv_get_async_event} + ack) on one platform
 * thread per device, {@code mooncake-rdma-events-N}, as Mooncake's worker pool does, and acts on
 * them:
 *
 * <ul>
 *   <li>{@code PORT_ERR} on the engine's port: the NIC is taken out of selection (new slices and
 *       retries go to the other NICs) and its endpoints are broken, so queued slices move at once
 *       and posted ones flush instead of waiting out the hardware retries;</li>
 *   <li>{@code PORT_ACTIVE} on that port: the NIC is put back (unless the device failed);</li>
 *   <li>{@code DEVICE_FATAL}: the NIC is out for good and its endpoints are broken;</li>
 *   <li>{@code CQ_ERR}: the CQ's endpoints are broken (rebuilt on next use);</li>
 *   <li>QP errors: logged (the QP's completions report and recover the work).</li>
 * </ul>
 *
 * Every event is counted. The wait for an event is bounded ({@link #WAIT_MS}), so {@link #close}
 * stops the threads within that time; it is called before the devices are closed. A provider
 * that fails to deliver events is reported once at ERROR and its thread ends.
 */
final class AsyncEventMonitor implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(AsyncEventMonitor.class);
    private static final AtomicInteger THREADS = new AtomicInteger();
    /** Longest wait for one event, hence the longest stop time. */
    static final int WAIT_MS = 100;

    private final int port;
    private final Consumer<RdmaContext> breakEndpoints;
    private final List<Thread> threads = new ArrayList<>();
    private final AtomicLong events = new AtomicLong();
    private final AtomicLong portDown = new AtomicLong();
    private volatile boolean running = true;

    /**
     * @param port           the port the engine uses ({@code MC_IB_PORT}); other ports' events are only counted
     * @param breakEndpoints breaks every endpoint of a context (slices go elsewhere)
     */
    AsyncEventMonitor(RdmaContext[] contexts, int port, Consumer<RdmaContext> breakEndpoints) {
        this.port = port;
        this.breakEndpoints = breakEndpoints;
        for (RdmaContext c : contexts) {
            if (c.device.hasAsyncEvents()) {
                threads.add(Thread.ofPlatform().daemon(true).name("mooncake-rdma-events-" + THREADS.getAndIncrement())
                        .unstarted(() -> readLoop(c)));
            }
        }
    }

    void start() {
        for (Thread t : threads) {
            t.start();
        }
    }

    /** Events received so far, all devices. */
    long events() {
        return events.get();
    }

    /** {@code PORT_ERR} events on the engine's port so far. */
    long portDownEvents() {
        return portDown.get();
    }

    List<Thread> threads() {
        return List.copyOf(threads);
    }

    private void readLoop(RdmaContext c) {
        while (running) {
            AsyncEvent ev;
            try {
                ev = c.device.nextAsyncEvent(WAIT_MS);
            } catch (RuntimeException e) {
                LOG.error("{}: reading asynchronous events failed; port and device failures on it will not be seen"
                        + " (a dead NIC stays in rotation until its transfers fail)", c.name, e);
                return;
            }
            if (ev != null) {
                try {
                    handle(c, ev);
                } catch (RuntimeException e) {
                    LOG.error("{}: handling {} failed", c.name, ev, e);
                }
            }
        }
    }

    void handle(RdmaContext c, AsyncEvent ev) {
        events.incrementAndGet();
        switch (ev.type()) {
            case AsyncEvent.PORT_ERR -> {
                if (ev.port() != port) {
                    LOG.info("{}: {} on a port this engine does not use", c.name, ev);
                    return;
                }
                portDown.incrementAndGet();
                c.setActive(false);
                LOG.warn("{}: {}; the NIC is out of selection until its port is active again", c.name, ev);
                breakEndpoints.accept(c);
            }
            case AsyncEvent.PORT_ACTIVE -> {
                if (ev.port() != port) {
                    return;
                }
                if (c.isFailed()) {
                    LOG.warn("{}: {} after a device fatal error; the NIC stays out of selection", c.name, ev);
                    return;
                }
                c.setActive(true);
                LOG.info("{}: {}; the NIC is back in selection", c.name, ev);
            }
            case AsyncEvent.DEVICE_FATAL -> {
                c.markFailed();
                LOG.error("{}: {}; the NIC is out of selection for the engine's lifetime (restart after the driver"
                        + " recovers it)", c.name, ev);
                breakEndpoints.accept(c);
            }
            case AsyncEvent.CQ_ERR -> {
                LOG.error("{}: {}; its endpoints are rebuilt", c.name, ev);
                breakEndpoints.accept(c);
            }
            case AsyncEvent.QP_FATAL, AsyncEvent.QP_REQ_ERR, AsyncEvent.QP_ACCESS_ERR, AsyncEvent.WQ_FATAL ->
                    LOG.warn("{}: {}; the QP's work completes in error and is retried on a fresh endpoint", c.name, ev);
            default -> LOG.debug("{}: {}", c.name, ev);
        }
    }

    /** Stops the reader threads and waits for them (at most about {@link #WAIT_MS} each). */
    @Override
    public void close() {
        running = false;
        for (Thread t : threads) {
            try {
                if (!t.join(java.time.Duration.ofSeconds(10))) {
                    LOG.error("{} did not stop within 10 s", t.getName());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
