package io.mooncake4j.internal.json;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * A small strict JSON reader and writer (RFC 8259), enough for configuration files and
 * Mooncake's handshake messages. Objects read as insertion-ordered {@code Map<String,Object>},
 * arrays as {@code List<Object>}, integers as {@code Long} (or {@code BigInteger} beyond the
 * signed 64-bit range), other numbers as {@code Double}, and {@code true}/{@code false}/{@code null}
 * as themselves. Nesting is bounded ({@value #MAX_DEPTH}).
 *
 * <p>{@link #write(Object, boolean)} emits compact JSON; with {@code sortKeys} object keys are
 * sorted by their UTF-16 code units, which equals byte order for ASCII keys (what jsoncpp's
 * {@code FastWriter} produces).
 */
public final class Json {

    public static final int MAX_DEPTH = 64;

    private final String s;
    private int pos;

    private Json(String s) {
        this.s = s;
    }

    /** Parses one JSON value that must span the whole input (surrounding whitespace allowed). */
    public static Object parse(String text) {
        Json p = new Json(text);
        p.ws();
        Object v = p.value(0);
        p.ws();
        if (p.pos != text.length()) {
            throw p.err("trailing characters");
        }
        return v;
    }

    /** Parses a JSON object. */
    @SuppressWarnings("unchecked")
    public static Map<String, Object> parseObject(String text) {
        Object v = parse(text);
        if (!(v instanceof Map)) {
            throw new JsonException("expected a JSON object, got " + typeName(v));
        }
        return (Map<String, Object>) v;
    }

    public static String typeName(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Map) {
            return "object";
        }
        if (v instanceof List) {
            return "array";
        }
        if (v instanceof String) {
            return "string";
        }
        if (v instanceof Boolean) {
            return "boolean";
        }
        return "number";
    }

    private JsonException err(String what) {
        return new JsonException(String.format(Locale.ROOT, "invalid JSON at offset %d: %s", pos, what));
    }

    private void ws() {
        while (pos < s.length()) {
            char c = s.charAt(pos);
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                pos++;
            } else {
                break;
            }
        }
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw err("nesting deeper than " + MAX_DEPTH);
        }
        if (pos >= s.length()) {
            throw err("unexpected end of input");
        }
        char c = s.charAt(pos);
        return switch (c) {
            case '{' -> object(depth);
            case '[' -> array(depth);
            case '"' -> string();
            case 't' -> literal("true", Boolean.TRUE);
            case 'f' -> literal("false", Boolean.FALSE);
            case 'n' -> literal("null", null);
            default -> {
                if (c == '-' || (c >= '0' && c <= '9')) {
                    yield number();
                }
                throw err("unexpected character '" + c + "'");
            }
        };
    }

    private Object literal(String word, Object v) {
        if (!s.startsWith(word, pos)) {
            throw err("expected " + word);
        }
        pos += word.length();
        return v;
    }

    private Map<String, Object> object(int depth) {
        pos++;
        Map<String, Object> m = new LinkedHashMap<>();
        ws();
        if (pos < s.length() && s.charAt(pos) == '}') {
            pos++;
            return m;
        }
        while (true) {
            ws();
            if (pos >= s.length() || s.charAt(pos) != '"') {
                throw err("expected a string key");
            }
            String k = string();
            ws();
            expect(':');
            ws();
            m.put(k, value(depth + 1));
            ws();
            if (pos >= s.length()) {
                throw err("unterminated object");
            }
            char c = s.charAt(pos++);
            if (c == '}') {
                return m;
            }
            if (c != ',') {
                throw err("expected ',' or '}'");
            }
        }
    }

    private List<Object> array(int depth) {
        pos++;
        List<Object> l = new ArrayList<>();
        ws();
        if (pos < s.length() && s.charAt(pos) == ']') {
            pos++;
            return l;
        }
        while (true) {
            ws();
            l.add(value(depth + 1));
            ws();
            if (pos >= s.length()) {
                throw err("unterminated array");
            }
            char c = s.charAt(pos++);
            if (c == ']') {
                return l;
            }
            if (c != ',') {
                throw err("expected ',' or ']'");
            }
        }
    }

    private void expect(char c) {
        if (pos >= s.length() || s.charAt(pos) != c) {
            throw err("expected '" + c + "'");
        }
        pos++;
    }

    private String string() {
        pos++;
        StringBuilder sb = new StringBuilder();
        while (true) {
            if (pos >= s.length()) {
                throw err("unterminated string");
            }
            char c = s.charAt(pos++);
            if (c == '"') {
                return sb.toString();
            }
            if (c < 0x20) {
                throw err("control character in string");
            }
            if (c != '\\') {
                sb.append(c);
                continue;
            }
            if (pos >= s.length()) {
                throw err("unterminated escape");
            }
            char e = s.charAt(pos++);
            switch (e) {
                case '"' -> sb.append('"');
                case '\\' -> sb.append('\\');
                case '/' -> sb.append('/');
                case 'b' -> sb.append('\b');
                case 'f' -> sb.append('\f');
                case 'n' -> sb.append('\n');
                case 'r' -> sb.append('\r');
                case 't' -> sb.append('\t');
                case 'u' -> {
                    if (pos + 4 > s.length()) {
                        throw err("short \\u escape");
                    }
                    try {
                        sb.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                    } catch (NumberFormatException ex) {
                        throw err("bad \\u escape");
                    }
                    pos += 4;
                }
                default -> throw err("bad escape '\\" + e + "'");
            }
        }
    }

    private Object number() {
        int start = pos;
        if (s.charAt(pos) == '-') {
            pos++;
        }
        boolean integral = true;
        int digits = pos;
        while (pos < s.length() && Character.isDigit(s.charAt(pos))) {
            pos++;
        }
        if (pos == digits) {
            throw err("expected digits");
        }
        if (s.charAt(digits) == '0' && pos - digits > 1) {
            throw err("leading zero");
        }
        if (pos < s.length() && s.charAt(pos) == '.') {
            integral = false;
            pos++;
            int f = pos;
            while (pos < s.length() && Character.isDigit(s.charAt(pos))) {
                pos++;
            }
            if (f == pos) {
                throw err("expected fraction digits");
            }
        }
        if (pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
            integral = false;
            pos++;
            if (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) {
                pos++;
            }
            int e = pos;
            while (pos < s.length() && Character.isDigit(s.charAt(pos))) {
                pos++;
            }
            if (e == pos) {
                throw err("expected exponent digits");
            }
        }
        String t = s.substring(start, pos);
        if (!integral) {
            return Double.parseDouble(t);
        }
        BigInteger b = new BigInteger(t);
        return b.bitLength() < 64 ? (Object) b.longValue() : b;
    }

    // ------------------------------------------------------------------ writing

    /** Compact JSON; {@code sortKeys} sorts object keys (jsoncpp order for ASCII keys). */
    public static String write(Object v, boolean sortKeys) {
        StringBuilder sb = new StringBuilder();
        write(sb, v, sortKeys, 0);
        return sb.toString();
    }

    /** Compact JSON in insertion order. */
    public static String write(Object v) {
        return write(v, false);
    }

    private static void write(StringBuilder sb, Object v, boolean sort, int depth) {
        if (depth > MAX_DEPTH) {
            throw new JsonException("nesting deeper than " + MAX_DEPTH);
        }
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String str) {
            quote(sb, str);
        } else if (v instanceof Boolean b) {
            sb.append(b);
        } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) {
            sb.append(v);
        } else if (v instanceof Double || v instanceof Float || v instanceof BigDecimal) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                throw new JsonException("JSON cannot hold " + d);
            }
            sb.append(v);
        } else if (v instanceof Map<?, ?> m) {
            Map<?, ?> src = m;
            if (sort) {
                Map<String, Object> sorted = new TreeMap<>();
                m.forEach((k, val) -> sorted.put(String.valueOf(k), val));
                src = sorted;
            }
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : src.entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                quote(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue(), sort, depth + 1);
            }
            sb.append('}');
        } else if (v instanceof Iterable<?> it) {
            sb.append('[');
            boolean first = true;
            for (Object o : it) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o, sort, depth + 1);
            }
            sb.append(']');
        } else {
            throw new JsonException("cannot write " + v.getClass().getName() + " as JSON");
        }
    }

    private static void quote(StringBuilder sb, String str) {
        sb.append('"');
        for (int i = 0; i < str.length(); i++) {
            char c = str.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        sb.append('"');
    }
}
