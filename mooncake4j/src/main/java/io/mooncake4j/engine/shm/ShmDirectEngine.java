package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.core.CoreEngine;
import io.mooncake4j.engine.core.CoreSettings;
import java.util.List;

/**
 * The engine core with only the {@link ShmTransport}: every slice goes over shm, none falls back
 * (a peer on another machine, or a buffer shm cannot reach, fails its transfer). It serves
 * {@code bin/mooncake4j bench --engine=shm-direct} and the two-process tests, to measure the shm
 * path alone; {@code TransferEngines.create("shm")} is the same core with tcp as its fallback. A
 * preset: no engine-level code of its own. Thread-safe.
 */
public final class ShmDirectEngine extends CoreEngine {

    /** Settings from the environment ({@link CoreSettings#fromEnvironment()}). */
    public ShmDirectEngine() {
        super(CoreSettings.fromEnvironment(), List.of(new Candidate("shm", ShmTransport::new)), System.getenv());
    }
}
