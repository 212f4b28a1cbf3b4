package io.mooncake4j.http;

import java.net.InetAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A counted resource (request bodies being read, requests in flight) shared by client addresses: at
 * most {@code total} slots are held at once, and at most {@code perClient} by one address, so that the
 * connections of one client (however many it opens) cannot take the slots every other client needs.
 * Waiters are woken in no particular order. Thread-safe.
 */
public final class FairSlots {

    private final int total;
    private final int perClient;
    private final Map<InetAddress, Integer> held = new HashMap<>(); // guarded by this
    private int inUse; // guarded by this

    /** A held slot; closing it gives it back (once). */
    public final class Slot implements AutoCloseable {
        private final InetAddress client;
        private boolean released; // guarded by FairSlots.this

        private Slot(InetAddress client) {
            this.client = client;
        }

        @Override
        public void close() {
            release(this);
        }
    }

    public FairSlots(int total, int perClient) {
        if (total < 1 || perClient < 1) {
            throw new IllegalArgumentException("slots must be >= 1, got " + total + " and " + perClient);
        }
        this.total = total;
        this.perClient = Math.min(perClient, total);
    }

    /** All slots. */
    public int total() {
        return total;
    }

    /** The most one address may hold. */
    public int perClient() {
        return perClient;
    }

    /** Slots held now (all addresses). */
    public synchronized int inUse() {
        return inUse;
    }

    /** Slots {@code client} holds now. */
    public synchronized int heldBy(InetAddress client) {
        return held.getOrDefault(client, 0);
    }

    /** A slot for {@code client} if one is free for it now, else null. */
    public synchronized Slot tryAcquire(InetAddress client) {
        Objects.requireNonNull(client, "client");
        if (!free(client)) {
            return null;
        }
        return take(client);
    }

    /**
     * A slot for {@code client}, waiting at most {@code wait} for one; null when none came free for it.
     *
     * @throws InterruptedException the wait was interrupted
     */
    public synchronized Slot acquire(InetAddress client, Duration wait) throws InterruptedException {
        Objects.requireNonNull(client, "client");
        long deadline = System.nanoTime() + wait.toNanos();
        while (!free(client)) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            long ms = Math.max(1, left / 1_000_000);
            wait(ms);
        }
        return take(client);
    }

    private boolean free(InetAddress client) {
        return inUse < total && held.getOrDefault(client, 0) < perClient;
    }

    private Slot take(InetAddress client) {
        inUse++;
        held.merge(client, 1, Integer::sum);
        return new Slot(client);
    }

    private synchronized void release(Slot s) {
        if (s.released) {
            return;
        }
        s.released = true;
        inUse--;
        held.computeIfPresent(s.client, (k, n) -> n == 1 ? null : n - 1);
        notifyAll();
    }
}
