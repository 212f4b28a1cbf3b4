/** Helpers shared by the module's HTTP servers (request bodies read within bounds). Module-private. */
package io.mooncake4j.internal.http;
