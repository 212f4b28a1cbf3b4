/**
 * The producer's machinery (not exported): the side-channel ROUTER ({@link io.mooncake4j.connector.worker.send.SenderListener},
 * vLLM's {@code _mooncake_sender_listener}) and the send path it hands D's pulls to
 * ({@link io.mooncake4j.connector.worker.send.KvSender}, vLLM's {@code send_kv_to_decode}).
 *
 * <p>The send path's state is held by the class that owns it, each a final class that
 * {@code KvSender} composes and hands its collaborators at construction (no part extends another):
 * {@code SenderLoop} (the sender loop's thread), {@code TransferPool} (the transfer threads),
 * {@code PoolShares} (each D's share of them), {@code PendingLimits} (what pulls hold against the
 * side-channel limits), {@code PreparedShapes} (region pairs per shape of D), {@code RetriedPulls}
 * (which pull serves each D request and the outcomes answered lately, so that a pull D sends again
 * after losing its connection is never written twice), {@code PendingSends} (the transfers to send,
 * vLLM's {@code reqs_need_send}: {@code record_send_reqs}, the finished set, the hold and placeholder
 * expiry and its one timer), {@code Waves} (the pulls being served, a pull being a {@code Pull}, and
 * their waves), {@code LayerwisePush} (writes layer by layer while the forward pass runs, the model
 * runner's queue), {@code BlockWriter} (the write into D's blocks with its abandonment, staleness and
 * self-target checks) and {@code Replies} (the answers to D). {@code KvSender} itself admits the
 * pulls (the side channel's refusals and limits).
 *
 * <p><b>Threads.</b> {@code mooncake-p-listener-0} runs the ROUTER on the shared
 * {@link io.mooncake4j.connector.worker.loop.SelectorLoop} and owns every connection; it hands each
 * whole message to {@code mooncake-p-sender-0} (the sender loop, {@code SenderLoop}), which owns all
 * of the send path's state. {@code mooncake-p-xfer-<n>} run the blocking writes and answer D for a
 * wave that landed; replies reach the listener through a queue and the loop's wake-up
 * ({@link io.mooncake4j.connector.worker.send.ReplySink} is safe from any thread).
 */
package io.mooncake4j.connector.worker.send;
