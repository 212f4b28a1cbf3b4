package io.mooncake4j.engine.rdma;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * An immutable snapshot of the engine's registrations: sorted by address for the data path's
 * lock-free, allocation-free lookups, and in registration order for the descriptor
 * ({@code buffers[0]} is the first registered, as in Mooncake). Replaced as a whole under the
 * engine's registration lock; readers take the current snapshot from a volatile field.
 */
final class LocalRegistrations {

    static final LocalRegistrations EMPTY = new LocalRegistrations(new LocalRegistration[0], List.of());

    private final LocalRegistration[] sorted;
    private final List<LocalRegistration> ordered;

    private LocalRegistrations(LocalRegistration[] sorted, List<LocalRegistration> ordered) {
        this.sorted = sorted;
        this.ordered = ordered;
    }

    /** In registration order. */
    List<LocalRegistration> ordered() {
        return ordered;
    }

    /** This snapshot plus {@code added} (appended in order). */
    LocalRegistrations plus(List<LocalRegistration> added) {
        LocalRegistration[] next = Arrays.copyOf(sorted, sorted.length + added.size());
        for (int i = 0; i < added.size(); i++) {
            next[sorted.length + i] = added.get(i);
        }
        Arrays.sort(next, Comparator.comparing(LocalRegistration::address, Long::compareUnsigned));
        List<LocalRegistration> o = new ArrayList<>(ordered);
        o.addAll(added);
        return new LocalRegistrations(next, List.copyOf(o));
    }

    /** The pieces registered for the caller's address {@code owner}, in address order. */
    List<LocalRegistration> ownedBy(long owner) {
        List<LocalRegistration> out = new ArrayList<>(1);
        for (LocalRegistration r : sorted) {
            if (r.owner() == owner) {
                out.add(r);
            }
        }
        return out;
    }

    /** This snapshot without the pieces of {@code owner}. */
    LocalRegistrations minusOwner(long owner) {
        return new LocalRegistrations(Arrays.stream(sorted).filter(r -> r.owner() != owner)
                .toArray(LocalRegistration[]::new), ordered.stream().filter(r -> r.owner() != owner).toList());
    }

    /** The registration holding the byte at {@code a}, or null. Allocation-free. */
    LocalRegistration containing(long a) {
        LocalRegistration[] cur = sorted;
        int lo = 0;
        int hi = cur.length - 1;
        int cand = -1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(cur[mid].address(), a) <= 0) {
                cand = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        return cand >= 0 && cur[cand].containsByte(a) ? cur[cand] : null;
    }

    /**
     * Bytes from {@code a} that lie in registered memory without a gap, capped at {@code len}:
     * {@code len} when the whole range is covered (possibly by several adjacent registrations).
     */
    long coveredFrom(long a, long len) {
        long done = 0;
        while (done < len) {
            LocalRegistration r = containing(a + done);
            if (r == null) {
                return done;
            }
            done += Math.min(len - done, r.bytesToEnd(a + done));
        }
        return done;
    }

    LocalRegistration[] all() {
        return sorted.clone();
    }
}
