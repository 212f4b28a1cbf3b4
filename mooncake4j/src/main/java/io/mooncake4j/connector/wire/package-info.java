/**
 * The side-channel messages of vLLM's {@code MooncakeConnector}, byte-compatible with vLLM's
 * msgspec encoding: {@link io.mooncake4j.connector.wire.MooncakeXferMetadata} (D → P) and
 * {@link io.mooncake4j.connector.wire.MooncakeXferResponse} (P → D) with their codecs, and the
 * small msgpack reader and writer under them (our own: msgpack-core has no JPMS module name).
 *
 * <p>No I/O here: codecs turn records into {@code byte[]} and back. Decoding is hardened for
 * hostile input and fails only with {@link io.mooncake4j.connector.wire.ProtocolException}.
 *
 * <p>Thread-safety: records and codecs are immutable/stateless and thread-safe;
 * {@link io.mooncake4j.connector.wire.MsgpackReader} and
 * {@link io.mooncake4j.connector.wire.MsgpackWriter} are single-use, single-thread objects.
 */
package io.mooncake4j.connector.wire;
