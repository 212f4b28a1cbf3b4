package io.mooncake4j.internal.json;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 10, unit = TimeUnit.SECONDS)
class JsonTest {

    @Test
    void roundTripsAndSortsKeysLikeJsoncpp() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", "10.0.0.2:15321");
        m.put("buffers", List.of(Map.of("addr", 140234567892992L)));
        m.put("a\"b", true);
        String s = Json.write(m, true);
        assertEquals("{\"a\\\"b\":true,\"buffers\":[{\"addr\":140234567892992}],\"name\":\"10.0.0.2:15321\"}", s);
        assertEquals(m, Json.parse(s));
    }

    @Test
    void readsUnsigned64BitNumbersAsBigInteger() {
        assertEquals(new BigInteger("18446744073709551615"), Json.parse("18446744073709551615"));
        assertEquals(-5L, Json.parse(" -5 "));
        assertEquals(1.5, Json.parse("1.5"));
    }

    @Test
    void rejectsMalformedInput() {
        for (String bad : List.of("", "{", "{\"a\":}", "[1,]", "01", "\"\\x\"", "{} x", "nul", "[".repeat(100))) {
            assertThrows(JsonException.class, () -> Json.parse(bad), bad);
        }
    }

    @Test
    void rejectsNumbersOutsideTheDoubleRangeAtParse() {
        for (String bad : List.of("1e999", "[-1e400]", "{\"num_workers\":1E+9999}")) {
            JsonException e = assertThrows(JsonException.class, () -> Json.parse(bad), bad);
            assertTrue(e.getMessage().contains("outside the range of a double"), e.getMessage());
        }
        for (String bad : List.of("NaN", "Infinity", "-Infinity", "[1,NaN]")) {
            assertThrows(JsonException.class, () -> Json.parse(bad), bad);
        }
    }

    @Test
    void writesNonFiniteNumbersAsNullInsteadOfFailing() {
        assertEquals("[null,null,null,1.5]", Json.write(List.of(Double.NaN, Double.POSITIVE_INFINITY,
                Float.NEGATIVE_INFINITY, 1.5)));
    }

    @Test
    void escapesLikeJsoncpp() {
        assertEquals("\"a\\u001fb\\b\\f\\n\\r\\t\\\"\\\\/\u00e9\u007f\"", Json.write("a\u001fb\b\f\n\r\t\"\\/\u00e9\u007f"));
        assertEquals("a\u001fb", Json.parse("\"a\\u001Fb\""));
    }

    @Test
    void boundsNestingAtMaxDepth() {
        int deepest = Json.MAX_DEPTH + 1;
        assertEquals(List.of(), unwrap(Json.parse("[".repeat(deepest) + "]".repeat(deepest)), deepest - 1));
        JsonException e = assertThrows(JsonException.class,
                () -> Json.parse("[".repeat(deepest + 1) + "]".repeat(deepest + 1)));
        assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("nesting"), e.getMessage());
    }

    private static Object unwrap(Object v, int levels) {
        for (int i = 0; i < levels; i++) {
            v = ((List<?>) v).getFirst();
        }
        return v;
    }

    @Test
    void namesTheOffsetOfTheProblem() {
        JsonException e = assertThrows(JsonException.class, () -> Json.parse("{\"a\": tru}"));
        assertTrue(e.getMessage().startsWith("invalid JSON at offset "), e.getMessage());
        JsonException trailing = assertThrows(JsonException.class, () -> Json.parse("{} x"));
        assertTrue(trailing.getMessage().contains("trailing"), trailing.getMessage());
    }
}
