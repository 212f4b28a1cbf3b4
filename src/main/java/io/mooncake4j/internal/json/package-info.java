/** A small strict JSON reader/writer for configuration and Mooncake handshakes. Module-private. */
package io.mooncake4j.internal.json;
