/**
 * The root of mooncake4j: the exception hierarchy shared by every area.
 *
 * <p>See {@code docs/} for the architecture; the engine API lives in {@link io.mooncake4j.engine},
 * KV-cache memory in {@link io.mooncake4j.memory}, the vLLM-compatible connector in
 * {@link io.mooncake4j.connector}.
 */
package io.mooncake4j;
