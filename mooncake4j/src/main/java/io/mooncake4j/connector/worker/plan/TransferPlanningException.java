package io.mooncake4j.connector.worker.plan;

import io.mooncake4j.connector.ConnectorException;

/**
 * A planning failure that vLLM raises as an exception (an {@code assert} inside the planning
 * code). The sender answers the whole side-channel message with {@code ERROR} and this message,
 * as vLLM's {@code _sender_worker} does with {@code str(e)}.
 */
public final class TransferPlanningException extends ConnectorException {

    private static final long serialVersionUID = 1L;

    public TransferPlanningException(String message) {
        super(message);
    }
}
