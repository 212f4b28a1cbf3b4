package io.mooncake4j.internal.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.StreamWriteConstraints;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import com.fasterxml.jackson.core.json.JsonWriteFeature;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Strict JSON (RFC 8259) for configuration files and Mooncake's handshake and bootstrap messages,
 * read and written with jackson-core's streaming API. Objects read as insertion-ordered
 * {@code Map<String,Object>}, arrays as {@code List<Object>}, integers as {@code Long} (or
 * {@code BigInteger} beyond the signed 64-bit range), other numbers as {@code Double}, and
 * {@code true}/{@code false}/{@code null} as themselves. Input is bounded: nesting
 * {@value #MAX_DEPTH}, numbers of at most {@value #MAX_NUMBER_LENGTH} characters, strings of at most
 * {@value #MAX_STRING_LENGTH} characters. A number outside the double range ({@code 1e999}) is
 * rejected at parse, since JSON has no Infinity; every problem is a {@link JsonException} naming its
 * offset.
 *
 * <p>{@link #write(Object, boolean)} emits compact JSON; with {@code sortKeys} object keys are
 * sorted by their UTF-16 code units, which equals byte order for ASCII keys (what jsoncpp's
 * {@code FastWriter} produces, byte for byte: control characters as lower-case {@code \}{@code u00xx}
 * escapes, {@code /} and non-ASCII characters unescaped). A non-finite double, which JSON cannot
 * hold, is written as {@code null} (as JavaScript's {@code JSON.stringify} does) instead of
 * failing the message that carries it.
 *
 * <p>Thread-safe (the factory is shared, parsers and generators are per call).
 */
public final class Json {

    public static final int MAX_DEPTH = 64;
    public static final int MAX_NUMBER_LENGTH = 1000;
    public static final int MAX_STRING_LENGTH = 16 << 20;

    private static final JsonFactory FACTORY = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder()
                    .maxNestingDepth(MAX_DEPTH + 1)
                    .maxNumberLength(MAX_NUMBER_LENGTH)
                    .maxStringLength(MAX_STRING_LENGTH)
                    .build())
            .streamWriteConstraints(StreamWriteConstraints.builder().maxNestingDepth(MAX_DEPTH + 1).build())
            .disable(StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION)
            .disable(JsonWriteFeature.WRITE_HEX_UPPER_CASE)
            .build();

    private Json() {}

    /** Parses one JSON value that must span the whole input (surrounding whitespace allowed). */
    public static Object parse(String text) {
        try (JsonParser p = FACTORY.createParser(text)) {
            JsonToken t = p.nextToken();
            if (t == null) {
                throw err(0, "unexpected end of input");
            }
            Object v = value(p, t);
            long end = p.currentLocation().getCharOffset();
            JsonToken after;
            try {
                after = p.nextToken();
            } catch (JsonProcessingException e) {
                after = JsonToken.NOT_AVAILABLE; // garbage after the value
            }
            if (after != null) {
                throw err(end, "trailing characters after the value");
            }
            return v;
        } catch (StreamConstraintsException e) {
            throw new JsonException("invalid JSON: " + e.getOriginalMessage(), e);
        } catch (JsonProcessingException e) {
            long at = e.getLocation() == null ? -1 : e.getLocation().getCharOffset();
            throw err(at, e.getOriginalMessage());
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a String source does not fail
        }
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

    private static JsonException err(long offset, String what) {
        return new JsonException(String.format(Locale.ROOT, "invalid JSON at offset %d: %s", offset, what));
    }

    private static Object value(JsonParser p, JsonToken t) throws IOException {
        return switch (t) {
            case START_OBJECT -> {
                Map<String, Object> m = new LinkedHashMap<>();
                for (JsonToken k = p.nextToken(); k != JsonToken.END_OBJECT; k = p.nextToken()) {
                    String name = p.currentName();
                    m.put(name, value(p, p.nextToken()));
                }
                yield m;
            }
            case START_ARRAY -> {
                List<Object> l = new ArrayList<>();
                for (JsonToken e = p.nextToken(); e != JsonToken.END_ARRAY; e = p.nextToken()) {
                    l.add(value(p, e));
                }
                yield l;
            }
            case VALUE_STRING -> p.getText();
            case VALUE_TRUE -> Boolean.TRUE;
            case VALUE_FALSE -> Boolean.FALSE;
            case VALUE_NULL -> null;
            case VALUE_NUMBER_INT -> {
                if (p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
                    yield p.getBigIntegerValue();
                }
                yield p.getLongValue();
            }
            case VALUE_NUMBER_FLOAT -> {
                double d = p.getDoubleValue();
                if (Double.isInfinite(d)) {
                    throw err(p.currentTokenLocation().getCharOffset(), "number " + p.getText()
                            + " is outside the range of a double (JSON has no Infinity)");
                }
                yield d;
            }
            default -> throw new JsonParseException(p, "unexpected token " + t);
        };
    }

    // ------------------------------------------------------------------ writing

    /** Compact JSON; {@code sortKeys} sorts object keys (jsoncpp order for ASCII keys). */
    public static String write(Object v, boolean sortKeys) {
        StringWriter out = new StringWriter();
        try (JsonGenerator g = FACTORY.createGenerator(out)) {
            write(g, v, sortKeys, 0);
        } catch (JsonException e) {
            throw e;
        } catch (IOException e) {
            throw new JsonException("cannot write JSON: " + e.getMessage(), e);
        }
        return out.toString();
    }

    /** Compact JSON in insertion order. */
    public static String write(Object v) {
        return write(v, false);
    }

    private static void write(JsonGenerator g, Object v, boolean sort, int depth) throws IOException {
        if (depth > MAX_DEPTH) {
            throw new JsonException("nesting deeper than " + MAX_DEPTH);
        }
        switch (v) {
            case null -> g.writeNull();
            case String s -> g.writeString(s);
            case Boolean b -> g.writeBoolean(b);
            case Long l -> g.writeNumber(l);
            case Integer i -> g.writeNumber(i);
            case Short s -> g.writeNumber(s);
            case Byte b -> g.writeNumber(b);
            case BigInteger b -> g.writeNumber(b);
            case Double d when !Double.isFinite(d) -> g.writeNull();
            case Float f when !Float.isFinite(f) -> g.writeNull();
            case Double d -> g.writeNumber(d);
            case Float f -> g.writeNumber(f);
            case BigDecimal d -> g.writeNumber(d);
            case Map<?, ?> m -> {
                Map<?, ?> src = m;
                if (sort) {
                    Map<String, Object> sorted = new TreeMap<>();
                    m.forEach((k, val) -> sorted.put(String.valueOf(k), val));
                    src = sorted;
                }
                g.writeStartObject();
                for (Map.Entry<?, ?> e : src.entrySet()) {
                    g.writeFieldName(String.valueOf(e.getKey()));
                    write(g, e.getValue(), sort, depth + 1);
                }
                g.writeEndObject();
            }
            case Iterable<?> it -> {
                g.writeStartArray();
                for (Object o : it) {
                    write(g, o, sort, depth + 1);
                }
                g.writeEndArray();
            }
            default -> throw new JsonException("cannot write " + v.getClass().getName() + " as JSON");
        }
    }
}
