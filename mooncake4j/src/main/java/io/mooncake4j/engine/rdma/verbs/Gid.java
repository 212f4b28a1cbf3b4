package io.mooncake4j.engine.rdma.verbs;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.Locale;

/**
 * A 16-byte {@code union ibv_gid}. {@link #toString()} is Mooncake's wire form: lowercase
 * {@code %02x} bytes joined by {@code ':'} (47 characters), as in the handshake's
 * {@code local_gid} and the descriptor's {@code devices[].gid}.
 *
 * @param raw the 16 bytes, network order
 */
public record Gid(byte[] raw) {

    public static final int BYTES = 16;

    public Gid {
        if (raw.length != BYTES) {
            throw new IllegalArgumentException("a GID has 16 bytes, got " + raw.length);
        }
        raw = raw.clone();
    }

    @Override
    public byte[] raw() {
        return raw.clone();
    }

    /** All zero: a GID table slot with no address (Mooncake disables such a device). */
    public boolean isNull() {
        for (byte b : raw) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    /** Parses the wire form: exactly 16 colon-separated hex tokens, each at most 0xff. */
    public static Gid parse(String text) {
        String[] tokens = text.split(":", -1);
        if (tokens.length != BYTES) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "GID '%s' must have 16 colon-separated hex bytes, has %d", text, tokens.length));
        }
        byte[] b = new byte[BYTES];
        for (int i = 0; i < BYTES; i++) {
            String t = tokens[i];
            if (t.isEmpty() || t.length() > 2 || !t.chars().allMatch(c -> Character.digit(c, 16) >= 0)) {
                throw new IllegalArgumentException(String.format(Locale.ROOT,
                        "GID '%s': token %d '%s' is not a hex byte", text, i, t));
            }
            b[i] = (byte) Integer.parseInt(t, 16);
        }
        return new Gid(b);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Gid g && Arrays.equals(raw, g.raw);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(raw);
    }

    @Override
    public String toString() {
        return HexFormat.ofDelimiter(":").formatHex(raw);
    }
}
