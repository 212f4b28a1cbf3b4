package io.mooncake4j.model;

import com.github.tjake.jlama.tensor.operations.TensorOperationsProvider;
import java.util.Locale;

/**
 * Which of Jlama's kernels run: its native ones ({@code jlama-native}, on the node's class path) for F32 work,
 * its Vector API ones for BF16. Jlama 0.8.4's native kernels crash the JVM (SIGSEGV in native code) on a BF16
 * working dtype, here on the tiny model and in the pairing tests; Jlama picks its kernels once per JVM, at
 * the first model's first operation. So a JVM whose first model works in BF16 forces the Vector API kernels
 * ({@value #FORCE_PANAMA}), and a BF16 model in a JVM that already runs the native kernels is refused with a
 * message saying how to start it.
 */
public final class JlamaKernels {

    /** Jlama's switch to its Vector API kernels. */
    public static final String FORCE_PANAMA = "jlama.force_panama_tensor_operations";

    private static boolean chosen; // guarded by the class

    private JlamaKernels() {}

    /**
     * Chooses the kernels for a model of working dtype {@code working} (before it loads), or checks the choice
     * made for an earlier one.
     *
     * @param working {@code F32} or {@code BF16}
     * @return the name of the kernels Jlama runs
     * @throws IllegalArgumentException when a BF16 model would run on the native kernels
     */
    public static synchronized String prepare(String working) {
        boolean bf16 = working.toUpperCase(Locale.ROOT).startsWith("B");
        if (!chosen && bf16) {
            System.setProperty(FORCE_PANAMA, "true");
        }
        chosen = true;
        String ops = TensorOperationsProvider.get().name();
        String refusal = refusal(working, ops);
        if (refusal != null) {
            throw new IllegalArgumentException(refusal);
        }
        return ops;
    }

    /** The refusal of a model of working dtype {@code working} on the kernels named {@code ops}, or null. */
    static String refusal(String working, String ops) {
        if (working.toUpperCase(Locale.ROOT).startsWith("B") && ops.toLowerCase(Locale.ROOT).contains("native")) {
            return "a BF16 working dtype cannot run on Jlama's native kernels (" + ops + "; they crash on it), which "
                    + "this JVM already uses for an F32 model: run BF16 models in a JVM of their own, or start it "
                    + "with -D" + FORCE_PANAMA + "=true";
        }
        return null;
    }
}
