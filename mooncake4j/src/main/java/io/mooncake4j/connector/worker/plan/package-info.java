/**
 * Pure transfer planning for the P (producer) send path: the port of vLLM's
 * {@code MooncakeConnectorWorker._get_transfer_regions}, {@code _align_transfer_regions},
 * {@code _validate_asymmetric_region_lengths}, {@code _build_transfer_params},
 * {@code _compute_sender_transfer_plan}, {@code resolve_need_send} and of
 * {@code TransferTopology} (spec {@code vllm-connector.md} §3.1, §6.2, §6.6–§6.10).
 *
 * <p>No I/O, no sockets, no engine: the worker's sender loop feeds the registered regions of
 * both sides and the ready requests' block ids in, and gets descriptor triples
 * {@code (src, dst, len)} in a reusable {@link io.mooncake4j.connector.worker.plan.DescriptorBuffer}
 * plus per-request planning errors out.
 *
 * <p>Thread-safety: {@link io.mooncake4j.connector.worker.plan.TransferRegion},
 * {@link io.mooncake4j.connector.worker.plan.TransferTopology} and
 * {@link io.mooncake4j.connector.worker.plan.PreparedRegions} are immutable. A
 * {@link io.mooncake4j.connector.worker.plan.TransferPlanner} keeps scratch arrays and, like
 * its {@code DescriptorBuffer}, is owned by one thread (the P sender loop); use one planner
 * per thread. Internal to the module (not exported).
 */
package io.mooncake4j.connector.worker.plan;
