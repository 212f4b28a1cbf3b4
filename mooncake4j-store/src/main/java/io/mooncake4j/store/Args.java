package io.mooncake4j.store;

import java.util.List;
import java.util.Locale;

/**
 * Argument checks of the client's public methods: every wrong argument is a {@link StoreException}
 * with {@link ErrorCode#INVALID_PARAMS} whose message names the argument, before anything is sent.
 */
final class Args {

    private Args() {}

    static StoreException invalid(String format, Object... args) {
        return new StoreException(ErrorCode.INVALID_PARAMS.code(), String.format(Locale.ROOT, format, args), null);
    }

    static <T> T notNull(T v, String name) {
        if (v == null) {
            throw invalid("%s is null", name);
        }
        return v;
    }

    static String key(String key) {
        return notNull(key, "key");
    }

    static List<String> keys(List<String> keys) {
        notNull(keys, "keys");
        for (int i = 0; i < keys.size(); i++) {
            if (keys.get(i) == null) {
                throw invalid("keys[%d] is null", i);
            }
        }
        return keys;
    }

    /** Checks that each array has one entry per key. */
    static void perKey(List<String> keys, String name, Object array, int length) {
        notNull(array, name);
        if (length != keys.size()) {
            throw invalid("%d keys but %d %s", keys.size(), length, name);
        }
    }

    /** Checks per-key part arrays: one row per key, and each key's addresses and sizes of equal length. */
    static void parts(List<String> keys, long[][] addresses, long[][] sizes) {
        keys(keys);
        perKey(keys, "addresses", addresses, addresses == null ? 0 : addresses.length);
        perKey(keys, "sizes", sizes, sizes == null ? 0 : sizes.length);
        for (int i = 0; i < keys.size(); i++) {
            if (addresses[i] == null || sizes[i] == null) {
                throw invalid("key %d (%s): %s is null", i, keys.get(i), addresses[i] == null ? "addresses" : "sizes");
            }
            if (addresses[i].length != sizes[i].length) {
                throw invalid("key %d (%s): %d addresses but %d sizes", i, keys.get(i), addresses[i].length,
                        sizes[i].length);
            }
            for (long s : sizes[i]) {
                if (s < 0) {
                    throw invalid("key %d (%s): negative size %d", i, keys.get(i), s);
                }
            }
        }
    }
}
