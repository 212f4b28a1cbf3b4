package io.mooncake4j.store;

/**
 * A mounted memory segment as the master records it ({@code Segment}, {@code types.h}).
 *
 * @param id         the segment's id (random, chosen by the client)
 * @param name       the client's logical name (its {@code local_hostname}), matched by preferred segments
 * @param base       the segment's base address in the owner's process
 * @param size       bytes
 * @param teEndpoint where peers reach its memory: the transfer engine's {@code ip:port} in P2P-handshake mode
 * @param protocol   the transport, e.g. {@code "tcp"}
 * @param hostId     the owner's host id ({@code ""} on loopback)
 */
public record Segment(Uuid id, String name, long base, long size, String teEndpoint, String protocol, String hostId) {

    /** Checks that no field is null. */
    public Segment {
        Args.notNull(id, "id");
        Args.notNull(name, "name");
        Args.notNull(teEndpoint, "teEndpoint");
        Args.notNull(protocol, "protocol");
        Args.notNull(hostId, "hostId");
    }
}
