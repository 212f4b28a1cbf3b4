package io.mooncake4j.connector.worker;

import java.io.IOException;
import java.util.function.Consumer;

/**
 * D's side-channel pulls as {@link KvReceiver} sees them, whichever ZMTP runs underneath:
 * {@link ZmtpPullChannels} (builtin DEALER connections) or {@link PullChannels} (JeroMQ DEALERs). Both run on
 * {@code mooncake-d-io-0}, call a pull's {@link PullChannels.Listener} there, and keep the rule that a pull
 * whose connection was lost after its request went out fails early only when P's port refuses connections
 * (P gone, so it writes nothing), else at its receive deadline.
 */
interface PullIo extends AutoCloseable {

    /** Starts a pull; thread-safe. After {@link #close()} the listener hears a failure at once. */
    void submit(String address, byte[] payload, PullChannels.Listener listener);

    /** Connections replaced after no ZMTP handshake within their handshake timeout. */
    long handshakeRetries();

    /** Times JeroMQ's poller was nudged (0 for the builtin DEALER: it has no such workaround). */
    long pollerNudges();

    /** Connections dropped before their handshake and made again. */
    long handshakeReconnects();

    long pullsStarted();

    /** New connections made (retries included); below {@link #pullsStarted()} when connections are reused. */
    long connectionsOpened();

    int activePulls();

    /** Whether the I/O thread is running. */
    boolean alive();

    /** Makes the next loop iteration throw {@code fault} (tests of the watchdog). */
    void injectFault(Error fault);

    /** Stops the I/O thread, failing the pulls still open. Idempotent. */
    @Override
    void close();

    /** Starts the pull I/O of {@code impl}; the JeroMQ one uses {@code allocator} (null: JeroMQ's own). */
    static PullIo start(SideChannelListener.Impl impl, long receiveTimeoutNanos, long handshakeTimeoutNanos,
            BackgroundErrors errors, SideChannelLimits limits, HealthMonitor health, zmq.msg.MsgAllocator allocator,
            Consumer<String> addressLost) throws IOException {
        return switch (impl) {
            case BUILTIN -> new ZmtpPullChannels(receiveTimeoutNanos, handshakeTimeoutNanos, errors, limits, health,
                    addressLost, 0);
            case JEROMQ -> new PullChannels(receiveTimeoutNanos, handshakeTimeoutNanos, errors, limits, health,
                    allocator, addressLost);
        };
    }
}
