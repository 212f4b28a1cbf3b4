package io.mooncake4j.connector.wire;

/** The msgpack value families a {@link MsgpackReader} distinguishes. */
public enum MsgpackType {
    NIL, BOOLEAN, INTEGER, FLOAT, STRING, BINARY, ARRAY, MAP, EXTENSION;

    /** The family of a msgpack format byte. Every byte value maps to a family except 0xc1 (never used). */
    static MsgpackType ofFormat(int b) {
        b &= 0xff;
        if (b <= 0x7f || b >= 0xe0) {
            return INTEGER;
        }
        if (b <= 0x8f) {
            return MAP;
        }
        if (b <= 0x9f) {
            return ARRAY;
        }
        if (b <= 0xbf) {
            return STRING;
        }
        return switch (b) {
            case 0xc0 -> NIL;
            case 0xc2, 0xc3 -> BOOLEAN;
            case 0xc4, 0xc5, 0xc6 -> BINARY;
            case 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8 -> EXTENSION;
            case 0xca, 0xcb -> FLOAT;
            case 0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd1, 0xd2, 0xd3 -> INTEGER;
            case 0xd9, 0xda, 0xdb -> STRING;
            case 0xdc, 0xdd -> ARRAY;
            case 0xde, 0xdf -> MAP;
            default -> null; // 0xc1
        };
    }
}
