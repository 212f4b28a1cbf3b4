package io.mooncake4j.engine;

import java.util.Objects;

/**
 * One request of an asynchronous batch (Mooncake {@code TransferRequest}).
 *
 * @param opcode       read or write
 * @param source       local address
 * @param targetId     segment handle from {@link TransferEngine#openSegment}
 * @param targetOffset absolute address in the target segment
 * @param length       bytes
 */
public record TransferRequest(Opcode opcode, long source, long targetId, long targetOffset, long length) {

    /** Mooncake's opcodes; the numeric value is what travels on the wire. */
    public enum Opcode {
        READ(0), WRITE(1);

        private final int wire;

        Opcode(int wire) {
            this.wire = wire;
        }

        public int wire() {
            return wire;
        }

        public static Opcode fromWire(int value) {
            return switch (value) {
                case 0 -> READ;
                case 1 -> WRITE;
                default -> throw new IllegalArgumentException("unknown opcode " + value);
            };
        }
    }

    public TransferRequest {
        Objects.requireNonNull(opcode, "opcode");
        if (length < 0) {
            throw new IllegalArgumentException("length must be >= 0, got " + length);
        }
    }

    public static TransferRequest write(long source, long targetId, long targetAddress, long length) {
        return new TransferRequest(Opcode.WRITE, source, targetId, targetAddress, length);
    }

    public static TransferRequest read(long localAddress, long targetId, long targetAddress, long length) {
        return new TransferRequest(Opcode.READ, localAddress, targetId, targetAddress, length);
    }
}
