package io.mooncake4j.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class TpOutputAggregatorTest {

    private static SimWorker.TransferResults r(Set<String> s, Set<String> rv, Set<String> f) {
        return new SimWorker.TransferResults(s, rv, f);
    }

    @Test
    void shouldReportARequestOnlyWhenEveryRankReportedIt() {
        TpOutputAggregator agg = new TpOutputAggregator(2);
        SimWorker.TransferResults step1 = agg.aggregate(List.of(
                r(Set.of("p1", "p2"), Set.of("d1"), Set.of()),
                r(Set.of("p1"), Set.of(), Set.of())));
        assertEquals(Set.of("p1"), step1.finishedSending());
        assertEquals(Set.of(), step1.finishedRecving());
        assertEquals(2, agg.pendingCount());
        SimWorker.TransferResults step2 = agg.aggregate(List.of(
                r(Set.of(), Set.of(), Set.of()),
                r(Set.of("p2"), Set.of("d1"), Set.of("d1"))));
        assertEquals(Set.of("p2"), step2.finishedSending());
        assertEquals(Set.of("d1"), step2.finishedRecving());
        assertEquals(Set.of("d1"), step2.failedRecving(), "failures are the union over ranks");
        assertEquals(0, agg.pendingCount());
    }
}
