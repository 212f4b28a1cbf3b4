package io.mooncake4j.store;

import java.security.SecureRandom;
import java.util.Locale;

/**
 * Mooncake's {@code UUID}: {@code std::pair<uint64_t, uint64_t>} (16 bytes on the wire), the id
 * of a client and of a segment.
 *
 * @param first  the first half
 * @param second the second half
 */
public record Uuid(long first, long second) {

    private static final SecureRandom RANDOM = new SecureRandom();

    /** {@return a random id (Mooncake draws 16 random bytes too)} */
    public static Uuid random() {
        return new Uuid(RANDOM.nextLong(), RANDOM.nextLong());
    }

    @Override
    public String toString() {
        // Mooncake's UuidToString: both halves as unsigned decimal
        return String.format(Locale.ROOT, "%s-%s", Long.toUnsignedString(first), Long.toUnsignedString(second));
    }
}
