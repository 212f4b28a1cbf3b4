package io.mooncake4j.http;

import java.net.InetAddress;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A counted resource (request bodies being read, requests in flight) shared by client networks: at
 * most {@code total} slots are held at once, and at most {@code perClient} by one network (the client's
 * address cut to a prefix, {@link HttpLimits#network}), so that the connections of one client (however
 * many it opens, from however many addresses of its network) cannot take the slots every other client
 * needs. A holder that can be evicted ({@link Evictable}: a body being read) may lose its slot to a
 * newcomer when the newcomer would otherwise wait: the slowest one old enough, of the newcomer's own
 * network when that network holds its share, else of the network holding the most. Waiters are woken
 * in no particular order. Thread-safe.
 */
public final class FairSlots {

    /** A holder that may be evicted to make room: a request body being read. */
    public interface Evictable {
        /** Whether it has held its slot long enough to be judged ({@code now}: {@link System#nanoTime()}). */
        boolean judged(long now);

        /** Its progress, in bytes per second; the lowest is evicted first. */
        double rate(long now);

        /** Ends it (closes its connection); its holder gives the slot back. */
        void evict();
    }

    private final int total;
    private final int perClient;
    private final java.util.function.UnaryOperator<InetAddress> network;
    private final Map<InetAddress, Integer> held = new HashMap<>(); // guarded by this
    private final java.util.Set<Slot> evictable = new java.util.HashSet<>(); // guarded by this
    private final java.util.concurrent.atomic.AtomicLong evictions = new java.util.concurrent.atomic.AtomicLong();
    private int inUse; // guarded by this

    /** A held slot; closing it gives it back (once). */
    public final class Slot implements AutoCloseable {
        private final InetAddress client;
        private final Evictable holder;
        private boolean released; // guarded by FairSlots.this

        private Slot(InetAddress client, Evictable holder) {
            this.client = client;
            this.holder = holder;
        }

        @Override
        public void close() {
            release(this);
        }
    }

    /** Slots shared per address. */
    public FairSlots(int total, int perClient) {
        this(total, perClient, java.util.function.UnaryOperator.identity());
    }

    /**
     * Slots shared per network.
     *
     * @param network the key of a client's share, e.g. {@code limits::network}
     */
    public FairSlots(int total, int perClient, java.util.function.UnaryOperator<InetAddress> network) {
        if (total < 1 || perClient < 1) {
            throw new IllegalArgumentException("slots must be >= 1, got " + total + " and " + perClient);
        }
        this.total = total;
        this.perClient = Math.min(perClient, total);
        this.network = Objects.requireNonNull(network, "network");
    }

    /** Holders evicted so far to make room for a newcomer. */
    public long evictions() {
        return evictions.get();
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

    /** Slots {@code client}'s network holds now. */
    public synchronized int heldBy(InetAddress client) {
        return held.getOrDefault(network.apply(client), 0);
    }

    /** A slot for {@code client} if one is free for it now, else null. */
    public synchronized Slot tryAcquire(InetAddress client) {
        Objects.requireNonNull(client, "client");
        InetAddress net = network.apply(client);
        if (!free(net)) {
            return null;
        }
        return take(net, null);
    }

    /**
     * A slot for {@code client}, held by {@code holder}, which a later newcomer may evict; when none is
     * free, the slowest judged holder (see the class comment) is evicted first, and only when there is
     * none this waits at most {@code wait}.
     *
     * @return the slot, or null when none came free for it
     * @throws InterruptedException the wait was interrupted
     */
    public Slot acquire(InetAddress client, Duration wait, Evictable holder) throws InterruptedException {
        Objects.requireNonNull(holder, "holder");
        long deadline = System.nanoTime() + wait.toNanos();
        InetAddress net = network.apply(Objects.requireNonNull(client, "client"));
        while (true) {
            Slot victim;
            synchronized (this) {
                if (free(net)) {
                    Slot s = take(net, holder);
                    evictable.add(s);
                    return s;
                }
                victim = victim(net, System.nanoTime());
                if (victim == null) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return null;
                    }
                    wait(Math.max(1, Math.min(left / 1_000_000, 100))); // evictable holders age: look again
                    continue;
                }
                evictable.remove(victim);
                evictions.incrementAndGet();
            }
            victim.holder.evict(); // outside the lock: closes a connection
            victim.close();
        }
    }

    /** The slowest judged evictable slot of {@code net} when it holds its share, else of the largest holder. */
    private Slot victim(InetAddress net, long now) {
        InetAddress from = net;
        if (held.getOrDefault(net, 0) < perClient) {
            int most = 0;
            for (Slot s : evictable) {
                int n = held.getOrDefault(s.client, 0);
                if (s.holder.judged(now) && n > most) {
                    most = n;
                    from = s.client;
                }
            }
        }
        Slot worst = null;
        double worstRate = Double.MAX_VALUE;
        for (Slot s : evictable) {
            if (s.client.equals(from) && s.holder.judged(now)) {
                double r = s.holder.rate(now);
                if (r < worstRate) {
                    worst = s;
                    worstRate = r;
                }
            }
        }
        return worst;
    }

    /**
     * A slot for {@code client}, waiting at most {@code wait} for one; null when none came free for it.
     *
     * @throws InterruptedException the wait was interrupted
     */
    public synchronized Slot acquire(InetAddress client, Duration wait) throws InterruptedException {
        Objects.requireNonNull(client, "client");
        InetAddress net = network.apply(client);
        long deadline = System.nanoTime() + wait.toNanos();
        while (!free(net)) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            long ms = Math.max(1, left / 1_000_000);
            wait(ms);
        }
        return take(net, null);
    }

    private boolean free(InetAddress net) {
        return inUse < total && held.getOrDefault(net, 0) < perClient;
    }

    private Slot take(InetAddress net, Evictable holder) {
        inUse++;
        held.merge(net, 1, Integer::sum);
        return new Slot(net, holder);
    }

    private synchronized void release(Slot s) {
        if (s.released) {
            return;
        }
        s.released = true;
        evictable.remove(s);
        inUse--;
        held.computeIfPresent(s.client, (k, n) -> n == 1 ? null : n - 1);
        notifyAll();
    }
}
