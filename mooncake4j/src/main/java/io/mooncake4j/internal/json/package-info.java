/**
 * Strict JSON for configuration and Mooncake's handshake and bootstrap messages, over jackson-core's
 * streaming API ({@link io.mooncake4j.internal.json.Json}). Module-private; stateless, thread-safe.
 */
package io.mooncake4j.internal.json;
