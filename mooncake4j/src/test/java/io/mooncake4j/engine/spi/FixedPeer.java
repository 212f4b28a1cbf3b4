package io.mooncake4j.engine.spi;

import io.mooncake4j.engine.handshake.SegmentDescriptor;

/**
 * A peer segment for testing one transport on its own: a fixed, already parsed descriptor (no
 * refresh), and the two facts the core would otherwise tell a transport about the peer.
 *
 * @param id           the core's id for the peer
 * @param descriptor   its descriptor
 * @param sameMachine  what the core's machine check says
 * @param isMooncake4j whether the peer is taken for a mooncake4j engine
 */
public record FixedPeer(long id, SegmentDescriptor descriptor, boolean sameMachine, boolean isMooncake4j)
        implements RemoteSegment {

    /** A peer the core takes for a mooncake4j engine on this machine, whatever its descriptor says. */
    public static FixedPeer sameMachine(long id, SegmentDescriptor descriptor) {
        return new FixedPeer(id, descriptor, true, true);
    }

    /**
     * A peer as the core sees it today: never on the same machine (nothing advertises a machine
     * for the core to compare), a mooncake4j engine when its descriptor carries extensions.
     */
    public static FixedPeer asCore(long id, SegmentDescriptor descriptor) {
        return new FixedPeer(id, descriptor, false, !descriptor.extensions().isEmpty());
    }

    @Override
    public String name() {
        return descriptor.name();
    }

    @Override
    public String machineId() {
        return null;
    }

    @Override
    public SegmentDescriptor.Buffer buffer(long addr, long len) {
        for (SegmentDescriptor.Buffer b : descriptor.buffers()) {
            if (b.contains(addr, len)) {
                return b;
            }
        }
        return null;
    }

    @Override
    public boolean refresh() {
        return false; // a fixed descriptor
    }
}
