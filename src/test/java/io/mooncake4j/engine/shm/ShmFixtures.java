package io.mooncake4j.engine.shm;

import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.ExtensionDescriptors;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.RemoteSegment;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.SliceGroup;
import io.mooncake4j.engine.spi.Transport;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/** Test doubles for driving {@link ShmTransport} without the engine core. */
final class ShmFixtures {

    private ShmFixtures() {}

    /** The TCP-shaped descriptor of {@code buffers} with {@code t}'s extensions, through JSON and back. */
    static SegmentDescriptor describe(String name, List<LocalBuffer> buffers, Transport t) throws Exception {
        List<long[]> bufs = new ArrayList<>();
        for (LocalBuffer b : buffers) {
            bufs.add(new long[] {b.address(), b.length()});
        }
        return SegmentDescriptor.parse(ExtensionDescriptors.describe(name, 1, bufs, t).toJson());
    }

    /** A peer segment backed by a parsed descriptor. */
    record Peer(long id, SegmentDescriptor descriptor) implements RemoteSegment {
        @Override
        public String name() {
            return descriptor.name();
        }

        @Override
        public String machineId() {
            return null;
        }

        @Override
        public boolean sameMachine() {
            return true;
        }

        @Override
        public boolean isMooncake4j() {
            return true;
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

    /** Slices with recorded outcomes: null = pending, "" = done, else the failure. */
    static final class Slices implements SliceGroup {
        final List<long[]> slices = new ArrayList<>(); // write?1:0, local, remote, length
        final List<String> outcome = new ArrayList<>();
        final List<SliceFailure> failures = new ArrayList<>();
        volatile boolean aborted;

        Slices add(boolean write, long local, long remote, long length) {
            slices.add(new long[] {write ? 1 : 0, local, remote, length});
            outcome.add(null);
            failures.add(null);
            return this;
        }

        @Override
        public int size() {
            return slices.size();
        }

        @Override
        public boolean isWrite(int i) {
            return slices.get(i)[0] == 1;
        }

        @Override
        public long local(int i) {
            return slices.get(i)[1];
        }

        @Override
        public long remote(int i) {
            return slices.get(i)[2];
        }

        @Override
        public long length(int i) {
            return slices.get(i)[3];
        }

        @Override
        public LocalBuffer localBuffer(int i) {
            return LocalBuffer.of(local(i), length(i), "cpu:0");
        }

        @Override
        public synchronized void complete(int i) {
            if (outcome.get(i) == null) {
                outcome.set(i, "");
            }
        }

        @Override
        public synchronized void fail(int i, SliceFailure failure, String why) {
            if (outcome.get(i) == null) {
                outcome.set(i, failure + ": " + why);
                failures.set(i, failure);
            }
        }

        @Override
        public boolean aborted() {
            return aborted;
        }

        /** No core batch behind these slices (shm ends slices through complete/fail only). */
        @Override
        public io.mooncake4j.engine.internal.TaskBatch batch() {
            return null;
        }

        @Override
        public int task(int i) {
            return i;
        }

        @Override
        public boolean contiguous() {
            return true;
        }

        boolean allDone() {
            return outcome.stream().allMatch(""::equals);
        }
    }

    /** Deterministic bytes: what {@code fill} writes and {@code firstMismatch} checks. */
    static void fill(MemorySegment s, long seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, pattern(seed, i));
        }
    }

    /** The first offset whose byte differs from the pattern, or -1. */
    static long firstMismatch(MemorySegment s, long seed) {
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != pattern(seed, i)) {
                return i;
            }
        }
        return -1;
    }

    static byte pattern(long seed, long i) {
        return (byte) (seed * 31 + i * 7 + (i >>> 9));
    }
}
