package io.mooncake4j.engine.core;

import io.mooncake4j.engine.EngineKindProvider;
import io.mooncake4j.engine.TransferEngine;

/**
 * The engine kinds built into the library, provided to {@code TransferEngines} the way other kinds
 * are ({@link EngineKindProvider}, {@code ServiceLoader}), so that the public {@code engine}
 * package names nothing of the core: {@code "tcp"} is the core with tcp alone
 * ({@link EngineBuilder#only}); {@code "auto"}, {@code "rdma"} and {@code "shm"} the core with every
 * provided transport ({@link EngineBuilder#allTransports()}), of which {@code initialize}'s
 * {@code protocol} picks; {@code "shm-direct"} the core with shm alone. Stateless.
 */
public abstract sealed class CoreEngineKinds implements EngineKindProvider {

    private final String kind;

    private CoreEngineKinds(String kind) {
        this.kind = kind;
    }

    @Override
    public String kind() {
        return kind;
    }

    @Override
    public String lastError(TransferEngine engine) {
        return engine instanceof CoreEngine c ? c.lastError() : null;
    }

    /** {@code "tcp"}: tcp alone, wire-compatible with Mooncake's TCP transport. */
    public static final class Tcp extends CoreEngineKinds {
        public Tcp() {
            super("tcp");
        }

        @Override
        public TransferEngine create() {
            return EngineBuilder.only("tcp");
        }
    }

    /** {@code "rdma"}: every provided transport; {@code initialize("rdma")} requires rdma. */
    public static final class Rdma extends CoreEngineKinds {
        public Rdma() {
            super("rdma");
        }

        @Override
        public TransferEngine create() {
            return EngineBuilder.allTransports();
        }
    }

    /** {@code "shm"}: every provided transport; {@code initialize("shm")} requires shm. */
    public static final class Shm extends CoreEngineKinds {
        public Shm() {
            super("shm");
        }

        @Override
        public TransferEngine create() {
            return EngineBuilder.allTransports();
        }
    }

    /** {@code "shm-direct"}: shm alone, no fallback (to measure the shm transport by itself). */
    public static final class ShmDirect extends CoreEngineKinds {
        public ShmDirect() {
            super("shm-direct");
        }

        @Override
        public TransferEngine create() {
            return EngineBuilder.only("shm");
        }
    }

    /** {@code "auto"}: every provided transport that can run here. */
    public static final class Auto extends CoreEngineKinds {
        public Auto() {
            super("auto");
        }

        @Override
        public TransferEngine create() {
            return EngineBuilder.allTransports();
        }
    }
}
