package io.mooncake4j.engine.core;

import io.mooncake4j.engine.ErrorCodes;
import io.mooncake4j.engine.handshake.SegmentDescriptor;
import io.mooncake4j.engine.spi.BatchTasks;
import io.mooncake4j.engine.spi.DescriptorContribution;
import io.mooncake4j.engine.spi.LocalBuffer;
import io.mooncake4j.engine.spi.MemoryKind;
import io.mooncake4j.engine.spi.RemoteSegment;
import io.mooncake4j.engine.spi.SliceFailure;
import io.mooncake4j.engine.spi.SliceGroup;
import io.mooncake4j.engine.spi.Transport;
import io.mooncake4j.engine.spi.TransportCapabilities;
import io.mooncake4j.engine.spi.TransportContext;
import io.mooncake4j.engine.spi.TransportException;
import io.mooncake4j.engine.spi.TransportDeclaration;
import io.mooncake4j.engine.spi.TransportFactory;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A transport for the core's own tests, after TENT's fault proxy: it moves host bytes inside this
 * JVM (both engines of a test live here, so a peer's absolute address is one of ours) and injects
 * the faults it was told to, per slice in the order slices reach it (slice {@code n} is the
 * {@code n}-th slice submitted to this transport, counting from 0, fallbacks included):
 * <ul>
 *   <li>{@link #failSlice}: slice {@code n} fails with a {@link SliceFailure} kind;
 *       {@link #failEverySlice}: every slice does;</li>
 *   <li>{@link #holdSlice}: slice {@code n} waits on a latch, then ends on a worker thread (a
 *       delay the test controls, no sleeping);</li>
 *   <li>{@link #dropSlice}/{@link #dropEverySlice}: the slice is kept and never ended, until
 *       {@code uninstall} fails it as the SPI demands ({@link #loseOnUninstall} makes uninstall
 *       forget it instead, to see what the core does on its own);</li>
 *   <li>{@link #refuseCanTransfer}, {@link #unreachable} ({@code reaches} false), {@link #failInstall},
 *       {@link #failRegister}.</li>
 * </ul>
 * It records what happened to each slice ({@link #submitted}, {@link #completedSlices},
 * {@link #failedSlices}, {@link #evictions}) and obeys the SPI: an aborted group's memory is never
 * touched, every slice ends at most once through its group. Thread-safe.
 *
 * <p>It registers as itself: its own name and a declaration ({@link #declaration()}) whose
 * preference gives its place in the core's order, so a test orders several of them as it likes
 * ({@link FaultTransportProvider} is the same transport found the way the built-in ones are).
 */
final class FaultTransport implements Transport {

    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    /** One slice this transport holds: its group and index in it. */
    record Held(SliceGroup group, int index) {
        void fail(SliceFailure f, String why) {
            group.fail(index, f, why);
        }
    }

    private final String name;
    private final int preference;
    private volatile boolean companion;
    private volatile boolean throughBatch;
    private final Map<Integer, SliceFailure> failAt = new ConcurrentHashMap<>();
    private final Map<Integer, CountDownLatch> holdAt = new ConcurrentHashMap<>();
    private final Set<Integer> dropAt = ConcurrentHashMap.newKeySet();
    private final List<Held> dropped = new ArrayList<>();
    private final AtomicInteger slices = new AtomicInteger();
    private final AtomicInteger completed = new AtomicInteger();
    private final AtomicInteger failed = new AtomicInteger();
    private final AtomicInteger abortedSeen = new AtomicInteger();
    private final List<BatchTasks> evicted = new ArrayList<>();
    private final CountDownLatch firstDrop = new CountDownLatch(1);
    private final CountDownLatch firstHold = new CountDownLatch(1);
    private final CountDownLatch abortedMove = new CountDownLatch(1);
    private volatile SliceFailure failEvery;
    private volatile boolean dropEvery;
    private volatile boolean refuseCanTransfer;
    private volatile boolean unreachable;
    private volatile boolean loseOnUninstall;
    private volatile String failInstall;
    private volatile int failRegister;
    private volatile ExecutorService workers;
    private volatile boolean installed;
    private volatile boolean uninstalled;

    /** A fault transport called {@code name}, at {@code preference} in the core's order (lower first). */
    FaultTransport(String name, int preference) {
        this.name = name;
        this.preference = preference;
    }

    /** Ends injected failures on the core batch ({@code BatchTasks.fail}), as tcp's lanes do, not through the group. */
    FaultTransport failThroughBatch() {
        throughBatch = true;
        return this;
    }

    /** Installed beside a transport that {@code initialize}'s protocol asks for (as tcp is). */
    FaultTransport companion() {
        companion = true;
        return this;
    }

    /** What it declares: host memory, its preference, requestable by name. */
    TransportDeclaration declaration() {
        return new TransportDeclaration(name, Set.of(MemoryKind.HOST), preference, true, companion);
    }

    /** A factory handing out this one instance (one engine per fault transport). */
    TransportFactory factory() {
        return new TransportFactory(declaration(), () -> this);
    }

    // ------------------------------------------------------------------ the script

    FaultTransport failSlice(int n, SliceFailure kind) {
        failAt.put(n, kind);
        return this;
    }

    FaultTransport failEverySlice(SliceFailure kind) {
        failEvery = kind;
        return this;
    }

    /** Slice {@code n} waits until {@code gate} opens, then completes (or, if its batch was given up, is left alone). */
    FaultTransport holdSlice(int n, CountDownLatch gate) {
        holdAt.put(n, gate);
        return this;
    }

    FaultTransport dropSlice(int n) {
        dropAt.add(n);
        return this;
    }

    FaultTransport dropEverySlice() {
        dropEvery = true;
        return this;
    }

    FaultTransport loseOnUninstall() {
        loseOnUninstall = true;
        return this;
    }

    FaultTransport refuseCanTransfer(boolean refuse) {
        refuseCanTransfer = refuse;
        return this;
    }

    FaultTransport unreachable(boolean u) {
        unreachable = u;
        return this;
    }

    FaultTransport failInstall(String why) {
        failInstall = why;
        return this;
    }

    /** {@code registerBuffers} returns {@code rc} (a negative {@link ErrorCodes} value; 0: accept). */
    FaultTransport failRegister(int rc) {
        failRegister = rc;
        return this;
    }

    // ------------------------------------------------------------------ what happened

    /** Slices submitted to this transport so far. */
    int submitted() {
        return slices.get();
    }

    int completedSlices() {
        return completed.get();
    }

    int failedSlices() {
        return failed.get();
    }

    /** Held or dropped slices found given up ({@code aborted}) when they would have moved. */
    int abortedSlices() {
        return abortedSeen.get();
    }

    synchronized List<BatchTasks> evictions() {
        return List.copyOf(evicted);
    }

    synchronized int droppedNow() {
        return dropped.size();
    }

    /** Waits until a slice was dropped; false at the deadline. */
    boolean awaitDrop(long seconds) throws InterruptedException {
        return firstDrop.await(seconds, TimeUnit.SECONDS);
    }

    /** Waits until a slice is held on its gate; false at the deadline. */
    boolean awaitHold(long seconds) throws InterruptedException {
        return firstHold.await(seconds, TimeUnit.SECONDS);
    }

    /** Waits until a held slice found its batch given up when its gate opened; false at the deadline. */
    boolean awaitAbortedMove(long seconds) throws InterruptedException {
        return abortedMove.await(seconds, TimeUnit.SECONDS);
    }

    boolean isInstalled() {
        return installed;
    }

    boolean isUninstalled() {
        return uninstalled;
    }

    // ------------------------------------------------------------------ Transport

    @Override
    public String name() {
        return name;
    }

    @Override
    public TransportCapabilities capabilities() {
        return new TransportCapabilities(Set.of(MemoryKind.HOST), Set.of(MemoryKind.HOST), false, true, false);
    }

    @Override
    public void install(TransportContext context) throws TransportException {
        String why = failInstall;
        if (why != null) {
            throw new TransportException(why);
        }
        workers = Executors.newThreadPerTaskExecutor(context.threads("fault-" + name));
        installed = true;
    }

    @Override
    public void uninstall() {
        if (uninstalled || !installed) {
            uninstalled = true;
            return;
        }
        uninstalled = true;
        List<Held> left;
        synchronized (this) {
            left = List.copyOf(dropped);
            dropped.clear();
        }
        if (!loseOnUninstall) {
            for (Held h : left) {
                failed.incrementAndGet();
                h.fail(SliceFailure.TRANSIENT, "transport uninstalled");
            }
        }
        ExecutorService w = workers;
        if (w != null) {
            w.shutdownNow();
        }
    }

    @Override
    public int registerBuffers(List<LocalBuffer> buffers) {
        return failRegister;
    }

    @Override
    public void unregisterBuffers(List<LocalBuffer> buffers) {}

    @Override
    public void describe(DescriptorContribution out) {}

    @Override
    public boolean canTransfer(RemoteSegment peer, LocalBuffer local, SegmentDescriptor.Buffer remote) {
        return !refuseCanTransfer;
    }

    @Override
    public boolean reaches(RemoteSegment peer) {
        return !unreachable;
    }

    @Override
    public void submit(RemoteSegment peer, SliceGroup group) {
        for (int i = 0; i < group.size(); i++) {
            int n = slices.getAndIncrement();
            SliceFailure f = failAt.getOrDefault(n, failEvery);
            CountDownLatch gate = holdAt.get(n);
            if (f != null) {
                failed.incrementAndGet();
                if (throughBatch) { // as tcp's lanes do: on the core batch, by task index and own name
                    group.batch().fail(group.task(i), name, f, "injected " + f + " on slice " + n);
                } else {
                    group.fail(i, f, "injected " + f + " on slice " + n);
                }
            } else if (gate != null) {
                int index = i;
                workers.execute(() -> {
                    firstHold.countDown();
                    try {
                        gate.await();
                    } catch (InterruptedException e) {
                        // the transport is uninstalling: fail what it holds
                        failed.incrementAndGet();
                        group.fail(index, SliceFailure.TRANSIENT, "transport uninstalled");
                        return;
                    }
                    move(group, index);
                });
            } else if (dropEvery || dropAt.contains(n)) {
                synchronized (this) {
                    dropped.add(new Held(group, i));
                }
                firstDrop.countDown();
            } else {
                move(group, i);
            }
        }
    }

    private void move(SliceGroup g, int i) {
        if (g.aborted()) {
            abortedSeen.incrementAndGet();
            abortedMove.countDown();
            return; // the SPI: never touch a given-up batch's memory again
        }
        if (g.isWrite(i)) {
            MemorySegment.copy(ALL, g.local(i), ALL, g.remote(i), g.length(i));
        } else {
            MemorySegment.copy(ALL, g.remote(i), ALL, g.local(i), g.length(i));
        }
        completed.incrementAndGet();
        g.complete(i);
    }

    @Override
    public synchronized void evict(BatchTasks batch, long deadlineNanos) {
        evicted.add(batch);
        dropped.removeIf(h -> {
            if (h.group().batch() == batch) {
                abortedSeen.incrementAndGet();
                return true;
            }
            return false;
        });
    }
}
