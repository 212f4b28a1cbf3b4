/** Operating-system facts read through FFM (resource limits) and formatting helpers. Module-private. */
package io.mooncake4j.internal.sys;
