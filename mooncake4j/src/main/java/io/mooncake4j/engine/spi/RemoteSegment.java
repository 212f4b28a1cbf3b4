package io.mooncake4j.engine.spi;

import io.mooncake4j.engine.handshake.SegmentDescriptor;

/**
 * A peer segment as the core knows it: its descriptor (fetched over the handshake port and
 * cached; replaced when refreshed) and where it runs. Transports keep their per-peer state (QPs,
 * sockets, mappings) keyed by {@link #id()} and drop it in {@link Transport#forget}.
 */
public interface RemoteSegment {

    /** The handle {@code openSegment} returned; stable across descriptor refreshes. */
    long id();

    /** {@code host:rpcPort}. */
    String name();

    /** The current descriptor; a refresh replaces it (and calls {@link Transport#forget} first). */
    SegmentDescriptor descriptor();

    /**
     * The machine identity the peer advertises ({@code mc4j_machine}), or null for a peer that
     * advertises none (Mooncake's C++ engine, older mooncake4j).
     */
    String machineId();

    /** Whether the peer advertises the same machine identity as this engine. */
    boolean sameMachine();

    /** Whether the peer is a mooncake4j engine (it advertises extension fields), not Mooncake's C++ engine. */
    boolean isMooncake4j();

    /** The advertised buffer that wholly contains {@code [addr, addr+len)}, or null. */
    SegmentDescriptor.Buffer buffer(long addr, long len);

    /**
     * Fetches the peer's descriptor again (a transport calls this when its connection to the peer
     * died: the peer may have restarted on other ports). When it changed, every transport's
     * {@link Transport#forget} runs first. False (logged) when the fetch failed.
     */
    boolean refresh();

    /**
     * A transport found, as it connected, that this peer's data endpoint is this engine's own (its name
     * resolves to our data port on an address of this host now): its transfers fail without a byte
     * written, and {@link io.mooncake4j.engine.TransferEngine#refusedAsOwnSegment} answers true for its
     * names until a refresh finds another engine there. The default does nothing.
     */
    default void foundOwnEngine() {
    }

    /**
     * Whether the last connection or refresh found this engine's own segment behind this peer
     * ({@link #foundOwnEngine}, or a refreshed descriptor that is ours): a transport then {@link #refresh}es
     * before it connects again, rather than trusting the descriptor it cached before. The default: never.
     */
    default boolean ownEngineFound() {
        return false;
    }
}
