/**
 * What the worker's loops share (not exported): {@link io.mooncake4j.connector.worker.loop.SelectorLoop},
 * the one thread-owned NIO selector loop that both side-channel ends run their ZMTP connections on
 * (P's ROUTER, D's DEALERs: the owner registers its channels, the loop selects, wakes, recovers a lost
 * selector); {@link io.mooncake4j.connector.worker.loop.HealthMonitor} (a loop's death, recovery or
 * exhaustion, for the worker's health); {@link io.mooncake4j.connector.worker.loop.BackgroundErrors}
 * (an exception of background work: counted, logged once per distinct error); and
 * {@link io.mooncake4j.connector.worker.loop.WaveTrace} (per-wave timestamps for the benchmarks, off by
 * default). Also what the send and receive paths take from the worker, as types of their own so that
 * they name nothing of the worker's package: {@link io.mooncake4j.connector.worker.loop.ChannelLimits}
 * (the side channel's bounds) and {@link io.mooncake4j.connector.worker.loop.TransferRecorder} (where
 * transfers are recorded for the connector's stats).
 *
 * <p><b>Threads.</b> A {@code SelectorLoop} starts and owns its thread; the others are thread-safe
 * (immutable, or an interface whose implementations must be) and start none.
 */
package io.mooncake4j.connector.worker.loop;
