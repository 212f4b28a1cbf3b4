package io.mooncake4j.engine.spi;

import java.util.Objects;
import java.util.Set;

/**
 * What a transport can move, as the core's selection reads it before asking
 * {@link Transport#canTransfer} about a particular request.
 *
 * @param localKinds      memory kinds it can move from/to on this side
 * @param remoteKinds     memory kinds it can move from/to on the peer's side
 * @param sameMachineOnly true when the peer must run on this machine ({@code shm}, CUDA IPC)
 * @param mooncakeWire    true when it speaks a wire Mooncake's C++ engine speaks ({@code tcp},
 *                        {@code rdma}); only such transports are offered to C++ peers
 * @param spansBuffers    true when one slice may span adjacent registered buffers on either side
 *                        ({@code rdma}, as Mooncake's slice-length calculator); the core then
 *                        passes the buffers each range starts in
 */
public record TransportCapabilities(Set<MemoryKind> localKinds, Set<MemoryKind> remoteKinds,
        boolean sameMachineOnly, boolean mooncakeWire, boolean spansBuffers) {

    public TransportCapabilities {
        localKinds = Set.copyOf(Objects.requireNonNull(localKinds, "localKinds"));
        remoteKinds = Set.copyOf(Objects.requireNonNull(remoteKinds, "remoteKinds"));
    }

    /** Whether the kinds allow moving between a {@code local} and a {@code remote} buffer. */
    public boolean moves(MemoryKind local, MemoryKind remote) {
        return localKinds.contains(local) && remoteKinds.contains(remote);
    }
}
