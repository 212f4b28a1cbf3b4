/** Operating-system facts read through FFM or procfs (resource limits, capabilities) and formatting helpers. Module-private. */
package io.mooncake4j.internal.sys;
