package io.mooncake4j.connector.worker;

import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.Supplier;

/**
 * P's side-channel listener as the worker and {@link KvSender} see it, whichever ZMTP runs underneath:
 * {@link ZmtpSenderListener} (the builtin ROUTER) or {@link SenderListener} (JeroMQ's). Both call the
 * {@link SideChannelHandler} on {@code mooncake-p-sender-0} with {@code (identity, frames, sink)} and
 * route replies by identity from any thread.
 */
interface SideChannelListener extends AutoCloseable {

    /** Completes with the bound port, or exceptionally when binding failed or the listener exited first. */
    CompletableFuture<Integer> ready();

    /** The single sender-loop thread, where the handler runs. */
    ScheduledExecutorService senderLoop();

    ListenerStats stats();

    /** Whether the listener thread runs. */
    boolean alive();

    /** Makes the next loop iteration throw {@code fault} (tests of the watchdog). */
    void injectFault(Error fault);

    /** Times a handler task woke the listener because the backlog went back under its budget (tests). */
    long backlogWakeUps();

    /** Stops both threads and closes the socket(s). Idempotent. */
    @Override
    void close();

    /** Which ZMTP implementation the side channel runs on ({@code kv_connector_extra_config.side_channel_zmq}). */
    enum Impl {
        /** Our own ZMTP 3.1 on NIO ({@code io.mooncake4j.internal.zmtp}). */
        BUILTIN,
        /** JeroMQ 0.6.0. */
        JEROMQ;

        /** {@return the implementation named by the config value ({@code "builtin"} or {@code "jeromq"})} */
        static Impl of(String configValue) {
            return "jeromq".equals(configValue) ? JEROMQ : BUILTIN;
        }
    }

    /** Starts the listener of {@code impl}; the JeroMQ one uses {@code allocator} (null: JeroMQ's own). */
    static SideChannelListener start(Impl impl, String hostname, Supplier<SideChannelHandler> handler,
            SideChannelLimits limits, HealthMonitor health, zmq.msg.MsgAllocator allocator,
            Supplier<? extends SenderListener.Quiesce> quiesce, long pollMs) throws IOException {
        return switch (impl) {
            case BUILTIN -> new ZmtpSenderListener(hostname, handler, limits, health, quiesce, pollMs);
            case JEROMQ -> new SenderListener(hostname, handler, limits, health, allocator, quiesce, pollMs);
        };
    }
}
