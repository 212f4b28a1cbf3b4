package io.mooncake4j.connector.worker.send;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.PriorityQueue;
import java.util.function.Predicate;

/**
 * Deadlines of held items, earliest first, so that expiry costs what is due rather than a scan of
 * everything held (the sender's holds and placeholders, {@link PendingSends}). Entries are never removed
 * when their item goes away (sent, finished, replaced): each is checked against {@code live} when it
 * comes up and skipped if dead, and the queue is rebuilt from its live entries once it holds more than
 * twice what the owner says may be live, so it stays proportional to the items held. An item that is
 * due but cannot expire yet (a write in flight, a waiting pull) stays in a small due set and is offered
 * again at the next {@link #expireDue}. Confined to one thread (the sender loop); not thread-safe.
 *
 * @param <T> the held item
 */
public final class ExpiryQueue<T> {

    /** Whether an entry for {@code item} with deadline {@code at} still stands. */
    interface Liveness<T> {
        boolean live(T item, long at);
    }

    private record Entry<T>(long at, T item) {
    }

    /** Rebuilds are not worth it below this many entries. */
    private static final int COMPACT_MIN = 64;

    private final Liveness<T> liveness;
    // deadlines compared as differences: monotonic clock values (System.nanoTime or a test's) may wrap
    private final PriorityQueue<Entry<T>> pending = new PriorityQueue<>((a, b) -> Long.compare(a.at - b.at, 0));
    private final List<Entry<T>> due = new ArrayList<>();

    ExpiryQueue(Liveness<T> liveness) {
        this.liveness = liveness;
    }

    /**
     * Adds {@code item}, due when {@code at - now < 0}. {@code liveBound} is at most how many of this
     * queue's entries can be live now (e.g. the size of the table the items live in).
     */
    void add(long at, T item, int liveBound) {
        pending.add(new Entry<>(at, item));
        if (pending.size() > COMPACT_MIN && pending.size() > 2L * liveBound + due.size()) {
            List<Entry<T>> keep = new ArrayList<>();
            for (Entry<T> e : pending) {
                if (live(e)) {
                    keep.add(e);
                }
            }
            pending.clear();
            pending.addAll(keep);
        }
    }

    /** Moves what is due at {@code now} and live into the due set; drops dead entries met on the way. */
    private void advance(long now) {
        Entry<T> head;
        while ((head = pending.peek()) != null && head.at - now < 0) {
            pending.poll();
            if (live(head)) {
                due.add(head);
            }
        }
        due.removeIf(e -> !live(e));
    }

    /**
     * Offers every live item due at {@code now} to {@code expire}, in deadline order; an item for which
     * it returns true has expired and leaves the queue, one for which it returns false is offered again
     * next time.
     */
    void expireDue(long now, Predicate<T> expire) {
        advance(now);
        due.removeIf(e -> expire.test(e.item));
    }

    /** Whether some live item due at {@code now} satisfies {@code p} (nothing leaves the queue). */
    boolean anyDue(long now, Predicate<T> p) {
        advance(now);
        for (Entry<T> e : due) {
            if (p.test(e.item)) {
                return true;
            }
        }
        return false;
    }

    /** {@return the earliest deadline among live entries not in the due set, if any (after {@link #anyDue})} */
    OptionalLong nextDeadline() {
        Entry<T> head;
        while ((head = pending.peek()) != null && !live(head)) {
            pending.poll();
        }
        return head == null ? OptionalLong.empty() : OptionalLong.of(head.at);
    }

    /** Entries held, dead ones not yet dropped included (tests: the queue stays bounded). */
    int size() {
        return pending.size() + due.size();
    }

    private boolean live(Entry<T> e) {
        return liveness.live(e.item, e.at);
    }
}
