package io.mooncake4j.engine;

/**
 * An engine kind that {@link TransferEngines#create} builds besides its own ({@code tcp}, {@code rdma},
 * {@code shm}, {@code auto}), found with {@link java.util.ServiceLoader} on the class or module path.
 * {@code mooncake4j-testing} provides {@code "mock"} (the scripted engine), which is how a node built
 * on the library offers {@code --engine mock} without the library depending on test support.
 */
public interface EngineKindProvider {

    /** {@return the kind's name, lower case, e.g. {@code "mock"}} */
    String kind();

    /** {@return a new, uninitialised engine of this kind; the caller owns it} */
    TransferEngine create();

    /**
     * Why the last {@code initialize} of {@code engine} failed, in words that name the cause and
     * the fix, when this provider made it and keeps such a message; else null
     * ({@link TransferEngines#lastError}).
     *
     * @param engine an engine, possibly of another kind
     * @return the message, or null
     */
    default String lastError(TransferEngine engine) {
        return null;
    }
}
