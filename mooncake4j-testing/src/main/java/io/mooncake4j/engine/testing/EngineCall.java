package io.mooncake4j.engine.testing;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * One recorded call: the method, its 1-based sequence number among calls of that method, the
 * arguments (arrays are copied at call time) and the code the engine returned.
 *
 * @param method  the engine method called
 * @param ordinal 1-based number of this call among the calls of {@code method}
 * @param args    the arguments in order (arrays and lists copied at call time; may hold nulls)
 * @param result  the code returned ({@code openSegment} and {@code allocateBatchId}: the id, as an int)
 */
public record EngineCall(EngineMethod method, int ordinal, List<Object> args, int result) {

    /** Keeps an unmodifiable copy of the arguments (which may hold nulls). */
    public EngineCall {
        Objects.requireNonNull(method, "method");
        args = Collections.unmodifiableList(new ArrayList<>(args)); // may hold nulls
    }

    /**
     * {@return argument {@code i} as a {@code long[]} (the address and length arrays of batch calls)}
     *
     * @param i the index, from 0
     */
    public long[] longs(int i) {
        return ((long[]) args.get(i)).clone();
    }

    /**
     * {@return argument {@code i} as a string}
     *
     * @param i the index, from 0
     */
    public String string(int i) {
        return (String) args.get(i);
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(method.name()).append('#').append(ordinal).append('(');
        for (int i = 0; i < args.size(); i++) {
            Object a = args.get(i);
            sb.append(i == 0 ? "" : ", ").append(a instanceof long[] l ? Arrays.toString(l) : String.valueOf(a));
        }
        return sb.append(") = ").append(result).toString();
    }
}
