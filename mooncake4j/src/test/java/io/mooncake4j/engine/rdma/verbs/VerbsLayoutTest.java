package io.mooncake4j.engine.rdma.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Java mirrors of the verbs structures against the C compiler's view of
 * {@code <infiniband/verbs.h>}: live when {@code native/verbs_layout.c} can be built here,
 * else against the committed x86-64 golden output.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class VerbsLayoutTest {

    @Test
    void javaLayoutsShouldMatchTheCProbeOrTheGoldenFile() throws Exception {
        Optional<String> whyNot = NativeLayoutProbe.whyNotLive();
        List<String> expected;
        if (whyNot.isEmpty()) {
            expected = NativeLayoutProbe.facts(NativeLayoutProbe.runLive());
        } else {
            assumeTrue(NativeLayoutProbe.isX86_64(),
                    "live probe unavailable (" + whyNot.get() + ") and the golden file is x86-64 only");
            expected = NativeLayoutProbe.facts(NativeLayoutProbe.golden());
        }
        assertSameFacts(expected, VerbsLayouts.facts());
    }

    @Test
    void goldenFileShouldMatchTheLiveProbeOnX86_64() throws Exception {
        Optional<String> whyNot = NativeLayoutProbe.whyNotLive();
        assumeTrue(whyNot.isEmpty(), () -> "live probe unavailable: " + whyNot.orElse(""));
        assumeTrue(NativeLayoutProbe.isX86_64(), "golden file is the x86-64 output");
        assertEquals(NativeLayoutProbe.golden(), NativeLayoutProbe.runLive(),
                "regenerate src/test/resources/golden/verbs-layout-x86_64.txt from native/verbs_layout.c");
    }

    @Test
    void opsSlotsShouldSitWhereTheSpecSaysOnX86_64() {
        assumeTrue(NativeLayoutProbe.isX86_64(), "offsets quoted for x86-64");
        // spec §5.6: ibv_context offsets 96 (poll_cq), 208 (post_send), 216 (post_recv)
        assertEquals(96, VerbsLayouts.CONTEXT_OPS_POLL_CQ);
        assertEquals(208, VerbsLayouts.CONTEXT_OPS_POST_SEND);
        assertEquals(216, VerbsLayouts.CONTEXT_OPS_POST_RECV);
        assertEquals(40, VerbsLayouts.SEND_WR_RDMA_REMOTE_ADDR);
        assertEquals(48, VerbsLayouts.SEND_WR_RDMA_RKEY);
    }

    @Test
    void comparisonShouldReportAMovedMember() {
        List<String> expected = new ArrayList<>(VerbsLayouts.facts());
        int i = expected.indexOf(expected.stream().filter(l -> l.startsWith("ibv_wc.qp_num ")).findFirst().orElseThrow());
        expected.set(i, "ibv_wc.qp_num 32 4");
        AssertionError e = assertThrows(AssertionError.class,
                () -> assertSameFacts(expected, VerbsLayouts.facts()));
        assertTrue(e.getMessage().contains("ibv_wc.qp_num"), e.getMessage());
    }

    private static void assertSameFacts(List<String> cFacts, List<String> javaFacts) {
        Map<String, String> c = index(cFacts);
        Map<String, String> java = index(javaFacts);
        List<String> problems = new ArrayList<>();
        for (Map.Entry<String, String> e : c.entrySet()) {
            String j = java.get(e.getKey());
            if (j == null) {
                problems.add(e.getKey() + ": C has '" + e.getValue() + "', Java layout does not name it");
            } else if (!j.equals(e.getValue())) {
                problems.add(e.getKey() + ": C '" + e.getValue() + "' vs Java '" + j + "'");
            }
        }
        for (String k : java.keySet()) {
            if (!c.containsKey(k)) {
                problems.add(k + ": Java names it, the C probe does not print it");
            }
        }
        if (!problems.isEmpty()) {
            fail("verbs layouts differ from the C probe (offset size / sizeof):\n  " + String.join("\n  ", problems));
        }
        assertEquals(c.size(), java.size());
    }

    private static Map<String, String> index(List<String> facts) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String f : facts) {
            int sp = f.indexOf(' ');
            if (m.put(f.substring(0, sp), f.substring(sp + 1)) != null) {
                fail("duplicate fact " + f);
            }
        }
        return m;
    }
}
