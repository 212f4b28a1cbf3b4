package io.mooncake4j.internal.json;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

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
}
