package io.mooncake4j.engine.rdma.verbs;

import io.mooncake4j.engine.TransferEngineException;
import java.util.Locale;

/**
 * A failed libibverbs control-path call: names the verb, the errno (0 when the verb reports none)
 * and, where one is known, the fix.
 */
public class VerbsException extends TransferEngineException {

    private static final long serialVersionUID = 1L;

    private final String operation;
    private final int errno;

    public VerbsException(String operation, int errno, String detail) {
        super(format(operation, errno, detail));
        this.operation = operation;
        this.errno = errno;
    }

    /** The verb that failed, for example {@code ibv_reg_mr}. */
    public String operation() {
        return operation;
    }

    /** The errno it reported, 0 when none. */
    public int errno() {
        return errno;
    }

    private static String format(String operation, int errno, String detail) {
        if (errno == 0) {
            return String.format(Locale.ROOT, "%s failed: %s", operation, detail);
        }
        return String.format(Locale.ROOT, "%s failed: errno %d (%s): %s", operation, errno, errnoName(errno), detail);
    }

    /** Symbolic name of the common Linux errno values verbs report. */
    public static String errnoName(int errno) {
        return switch (errno) {
            case Verbs.EPERM -> "EPERM";
            case Verbs.ENOENT -> "ENOENT";
            case Verbs.EIO -> "EIO";
            case Verbs.EAGAIN -> "EAGAIN";
            case Verbs.ENOMEM -> "ENOMEM";
            case Verbs.EACCES -> "EACCES";
            case Verbs.EFAULT -> "EFAULT";
            case Verbs.EBUSY -> "EBUSY";
            case Verbs.ENODEV -> "ENODEV";
            case Verbs.EINVAL -> "EINVAL";
            case Verbs.ENOSYS -> "ENOSYS";
            case Verbs.EOPNOTSUPP -> "EOPNOTSUPP";
            case Verbs.ETIMEDOUT -> "ETIMEDOUT";
            default -> "errno " + errno;
        };
    }
}
