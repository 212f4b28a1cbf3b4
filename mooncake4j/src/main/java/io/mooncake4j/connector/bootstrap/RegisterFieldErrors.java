package io.mooncake4j.connector.bootstrap;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The field checks of a {@code /register} body and the error entries they add, in the shape vLLM's
 * bootstrap server (FastAPI with pydantic) answers a 422 with: {@code type}, {@code loc}, {@code msg},
 * {@code input}. Pure functions; the server's thread.
 */
final class RegisterFieldErrors {

    private RegisterFieldErrors() {}

    static Map<String, Object> error(String type, List<Object> loc, String msg, Object input) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("type", type);
        e.put("loc", loc);
        e.put("msg", msg);
        e.put("input", finite(input));
        return e;
    }

    /** {@code v} with every non-finite number replaced by its name (JSON cannot carry them). */
    static Object finite(Object v) {
        if (v instanceof Double d && !Double.isFinite(d)) {
            return d.toString();
        }
        if (v instanceof Float f && !Float.isFinite(f)) {
            return f.toString();
        }
        if (v instanceof Map<?, ?> m) {
            Map<Object, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> out.put(k, finite(x)));
            return out;
        }
        if (v instanceof List<?> l) {
            List<Object> out = new ArrayList<>(l.size());
            for (Object x : l) {
                out.add(finite(x));
            }
            return out;
        }
        return v;
    }

    static String str(Map<?, ?> obj, String key, List<Map<String, Object>> errors) {
        if (!obj.containsKey(key)) {
            errors.add(error("missing", List.of("body", key), "Field required", obj));
            return null;
        }
        Object v = obj.get(key);
        if (v instanceof String s) {
            if (s.length() > MooncakeBootstrapServer.MAX_FIELD_CHARS) {
                Map<String, Object> e = error("string_too_long", List.of("body", key),
                        "String should have at most " + MooncakeBootstrapServer.MAX_FIELD_CHARS + " characters", s);
                e.put("ctx", Map.of("max_length", (long) MooncakeBootstrapServer.MAX_FIELD_CHARS));
                errors.add(e);
                return null;
            }
            return s;
        }
        errors.add(error("string_type", List.of("body", key), "Input should be a valid string", v));
        return null;
    }

    static Integer integer(Map<?, ?> obj, String key, List<Map<String, Object>> errors) {
        if (!obj.containsKey(key)) {
            errors.add(error("missing", List.of("body", key), "Field required", obj));
            return null;
        }
        Object v = obj.get(key);
        List<Object> loc = List.of("body", key);
        if (v instanceof Long l) {
            return inIntRange(l, v, loc, errors);
        }
        if (v instanceof BigInteger) {
            errors.add(error("int_type", loc, "Input should be a valid integer (mooncake4j accepts 32-bit ranks)", v));
            return null;
        }
        if (v instanceof Boolean b) {
            return b ? 1 : 0;
        }
        if (v instanceof Double d) {
            if (d == Math.rint(d) && !Double.isInfinite(d)) {
                return inIntRange((long) (double) d, v, loc, errors);
            }
            errors.add(error("int_from_float", loc,
                    "Input should be a valid integer, got a number with a fractional part", v));
            return null;
        }
        if (v instanceof String s) {
            try {
                return inIntRange(Long.parseLong(s.strip()), v, loc, errors);
            } catch (NumberFormatException e) {
                errors.add(error("int_parsing", loc,
                        "Input should be a valid integer, unable to parse string as an integer", v));
                return null;
            }
        }
        errors.add(error("int_type", loc, "Input should be a valid integer", v));
        return null;
    }

    static Integer inIntRange(long l, Object v, List<Object> loc, List<Map<String, Object>> errors) {
        if (l < Integer.MIN_VALUE || l > Integer.MAX_VALUE) {
            errors.add(error("int_type", loc, "Input should be a valid integer (mooncake4j accepts 32-bit ranks)", v));
            return null;
        }
        return (int) l;
    }
}
