package io.mooncake4j.connector.worker.send;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The sender's deadline queue: what is due, in order, once; dead entries skipped; bounded. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class ExpiryQueueTest {

    private final Set<String> held = new HashSet<>();
    private final ExpiryQueue<String> q = new ExpiryQueue<>((item, at) -> held.contains(item));

    private void hold(String item, long at) {
        held.add(item);
        q.add(at, item, held.size());
    }

    private List<String> expire(long now) {
        List<String> out = new ArrayList<>();
        q.expireDue(now, item -> {
            out.add(item);
            held.remove(item);
            return true;
        });
        return out;
    }

    @Test
    void offersWhatIsDueInDeadlineOrderOnceAndSkipsWhatWentAway() {
        hold("c", 30);
        hold("a", 10);
        hold("b", 20);
        hold("gone", 15);
        held.remove("gone"); // sent or finished before its deadline
        assertEquals(List.of(), expire(10), "due only strictly after the deadline");
        assertEquals(OptionalLong.of(10), q.nextDeadline());
        assertEquals(List.of("a", "b"), expire(21));
        assertEquals(List.of(), expire(29), "nothing is offered twice");
        assertEquals(OptionalLong.of(30), q.nextDeadline());
        assertEquals(List.of("c"), expire(1_000));
        assertEquals(OptionalLong.empty(), q.nextDeadline());
        assertEquals(0, q.size());
    }

    @Test
    void anItemThatCannotExpireYetIsOfferedAgainUntilItDoes() {
        hold("busy", 10);
        List<String> offered = new ArrayList<>();
        q.expireDue(11, item -> offered.add(item) && false); // a write in flight: stays
        assertTrue(q.anyDue(12, item -> item.equals("busy")));
        assertEquals(OptionalLong.empty(), q.nextDeadline(), "no longer pending: in the due set");
        assertEquals(List.of("busy"), expire(13));
        assertEquals(List.of("busy"), offered);
        assertFalse(q.anyDue(14, item -> true));
        held.add("busy"); // held again, but its entry was consumed: no second expiry
        assertEquals(List.of(), expire(15));
    }

    @Test
    void deadlinesAcrossTheClocksWrapKeepTheirOrder() {
        long base = Long.MAX_VALUE - 5;
        hold("late", base + 20); // wraps to a negative value
        hold("early", base);
        assertEquals(OptionalLong.of(base), q.nextDeadline());
        assertEquals(List.of("early"), expire(base + 1));
        assertEquals(List.of("late"), expire(base + 21));
    }

    @Test
    void entriesOfItemsThatWentAwayAreDroppedSoTheQueueStaysProportionalToWhatIsHeld() {
        for (int i = 0; i < 10_000; i++) {
            hold("r" + i, 1_000_000 + i);
            if (i >= 3) {
                held.remove("r" + (i - 3)); // each request done shortly after the next arrives
            }
            assertTrue(q.size() <= 2 * held.size() + 65, "entries " + q.size() + " for " + held.size() + " held");
        }
        assertEquals(List.of("r9997", "r9998", "r9999"), expire(Long.MAX_VALUE / 2));
    }
}
