package io.mooncake4j.cli;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * gflags-style command-line flags: {@code --name=value}, {@code --name value}, and boolean
 * {@code --name} / {@code --noname} / {@code --name=false}. Both {@code -} and {@code _} are
 * accepted inside names ({@code --num-blocks} = {@code --num_blocks}). Every flag a command reads
 * is remembered, so {@link #rejectUnknown()} can name a misspelt one.
 */
final class Flags {

    /** A usage error: printed with the command's usage, exit code 2. */
    static final class UsageException extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private final Map<String, String> values = new LinkedHashMap<>();
    private final List<String> positional = new ArrayList<>();
    private final Set<String> known = new LinkedHashSet<>();
    private List<String> raw = List.of();

    static Flags parse(List<String> args) {
        Flags f = new Flags();
        f.raw = List.copyOf(args);
        for (int i = 0; i < args.size(); i++) {
            String a = args.get(i);
            if (a.equals("--")) {
                f.positional.addAll(args.subList(i + 1, args.size()));
                break;
            }
            if (!a.startsWith("-") || a.equals("-")) {
                f.positional.add(a);
                continue;
            }
            String body = a.startsWith("--") ? a.substring(2) : a.substring(1);
            int eq = body.indexOf('=');
            if (eq >= 0) {
                f.values.put(norm(body.substring(0, eq)), body.substring(eq + 1));
            } else if (i + 1 < args.size() && !args.get(i + 1).startsWith("--")) {
                f.values.put(norm(body), args.get(++i));
            } else {
                f.values.put(norm(body), null); // boolean form
            }
        }
        return f;
    }

    private static String norm(String name) {
        return name.replace('-', '_').toLowerCase(Locale.ROOT);
    }

    boolean has(String name) {
        known.add(norm(name));
        return values.containsKey(norm(name));
    }

    String string(String name, String def) {
        known.add(norm(name));
        String n = norm(name);
        if (!values.containsKey(n)) {
            return def;
        }
        String v = values.get(n);
        if (v == null) {
            throw new UsageException("--" + name + " needs a value");
        }
        return v;
    }

    long longValue(String name, long def) {
        String v = string(name, null);
        if (v == null) {
            return def;
        }
        try {
            return parseSize(v);
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " must be an integer, got '" + v + "'");
        }
    }

    int intValue(String name, int def) {
        long v = longValue(name, def);
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
            throw new UsageException("--" + name + " is out of range: " + v);
        }
        return (int) v;
    }

    double doubleValue(String name, double def) {
        String v = string(name, null);
        if (v == null) {
            return def;
        }
        try {
            return Double.parseDouble(v);
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " must be a number, got '" + v + "'");
        }
    }

    boolean bool(String name, boolean def) {
        String n = norm(name);
        known.add(n);
        known.add("no" + n);
        if (values.containsKey("no" + n) && values.get("no" + n) == null) {
            return false;
        }
        if (!values.containsKey(n)) {
            return def;
        }
        String v = values.get(n);
        if (v == null || v.equalsIgnoreCase("true") || v.equals("1")) {
            return true;
        }
        if (v.equalsIgnoreCase("false") || v.equals("0")) {
            return false;
        }
        throw new UsageException("--" + name + " must be true or false, got '" + v + "'");
    }

    /** The arguments as given, for a command whose flags take several values ({@code proxy --prefill URL PORT}). */
    List<String> raw() {
        return raw;
    }

    List<String> positional() {
        return List.copyOf(positional);
    }

    /**
     * Fails on the first flag given that is not in {@code accepted} (names as in the usage text,
     * {@code -} or {@code _}; a boolean's {@code --noname} counts as {@code name}), before any flag is
     * read, so a misspelt flag is reported before what its absence causes.
     */
    void rejectUnknown(Collection<String> accepted) {
        Set<String> names = new LinkedHashSet<>();
        for (String a : accepted) {
            names.add(norm(a));
        }
        for (String k : values.keySet()) {
            if (!names.contains(k) && !(k.startsWith("no") && names.contains(k.substring(2)))) {
                throw new UsageException("unknown flag --" + k);
            }
        }
    }

    /** Fails on a positional argument (the commands take flags only). */
    void rejectPositional() {
        if (!positional.isEmpty()) {
            throw new UsageException("unexpected argument '" + positional.getFirst() + "' (flags are written --name value or --name=value)");
        }
    }

    /** An integer flag that must be {@code >= 1}. */
    int positiveInt(String name, int def) {
        int v = intValue(name, def);
        if (v <= 0) {
            throw new UsageException("--" + name + " must be positive, got " + v);
        }
        return v;
    }

    /** A size flag ({@link #parseSize}) that must be {@code >= 1}. */
    long positiveLong(String name, long def) {
        long v = longValue(name, def);
        if (v <= 0) {
            throw new UsageException("--" + name + " must be positive, got " + v);
        }
        return v;
    }

    /** Fails on any positional argument, then on any flag no getter asked for (call after reading every flag). */
    void rejectUnknown() {
        rejectPositional();
        for (String k : values.keySet()) {
            if (!known.contains(k)) {
                throw new UsageException("unknown flag --" + k);
            }
        }
    }

    /** Integers with an optional binary suffix: 64K, 1M, 1G (also KiB/MiB/GiB). */
    static long parseSize(String v) {
        String s = v.trim().toUpperCase(Locale.ROOT);
        long mul = 1;
        if (s.endsWith("IB")) {
            s = s.substring(0, s.length() - 2);
        } else if (s.endsWith("B") && s.length() > 1 && Character.isLetter(s.charAt(s.length() - 2))) {
            s = s.substring(0, s.length() - 1);
        }
        if (s.endsWith("K")) {
            mul = 1L << 10;
        } else if (s.endsWith("M")) {
            mul = 1L << 20;
        } else if (s.endsWith("G")) {
            mul = 1L << 30;
        } else if (s.endsWith("T")) {
            mul = 1L << 40;
        }
        if (mul != 1) {
            s = s.substring(0, s.length() - 1);
        }
        return Math.multiplyExact(Long.parseLong(s), mul);
    }
}
