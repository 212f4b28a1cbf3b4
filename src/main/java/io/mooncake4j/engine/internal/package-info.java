/**
 * Pieces shared by the transports ({@code engine.tcp}, {@code engine.rdma}): the per-batch task
 * state of the asynchronous batch API. Module-private.
 */
package io.mooncake4j.engine.internal;
