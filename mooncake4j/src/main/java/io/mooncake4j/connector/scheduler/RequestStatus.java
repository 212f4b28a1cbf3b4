package io.mooncake4j.connector.scheduler;

/**
 * The lifecycle states of a request in the embedder's scheduler (vLLM's {@code RequestStatus}).
 * The connector distinguishes only {@link #FINISHED_LENGTH_CAPPED} (a P request that reached
 * {@code max_tokens}, i.e. a completed prefill whose KV is to be sent) from every other state;
 * the rest are listed so that an embedder can map its own states one to one.
 */
public enum RequestStatus {
    /** Queued, not scheduled yet. */
    WAITING,
    /** Waiting for a structured-output grammar. */
    WAITING_FOR_FSM,
    /** D: waiting for its KV cache from P. */
    WAITING_FOR_REMOTE_KVS,
    /** Scheduled. */
    RUNNING,
    /** Preempted; its blocks were freed. */
    PREEMPTED,
    /** Finished by a stop string or token. */
    FINISHED_STOPPED,
    /** Finished because it reached {@code max_tokens}: the normal end of a P request. */
    FINISHED_LENGTH_CAPPED,
    /** Aborted by the client or the server. */
    FINISHED_ABORTED,
    /** Ignored (e.g. the prompt is too long). */
    FINISHED_IGNORED,
    /** Finished with an internal error. */
    FINISHED_ERROR;

    /** {@return vLLM's {@code RequestStatus.is_finished}} */
    public boolean isFinished() {
        return ordinal() >= FINISHED_STOPPED.ordinal();
    }
}
