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
        /** Copy from the target segment into local memory. */
        READ(0),
        /** Copy from local memory into the target segment. */
        WRITE(1);

        private final int wire;

        Opcode(int wire) {
            this.wire = wire;
        }

        /** {@return the opcode's value on the wire (Mooncake's {@code TransferRequest::OpCode})} */
        public int wire() {
            return wire;
        }

        /**
         * Decodes a wire value.
         *
         * @param value 0 (read) or 1 (write)
         * @return the opcode
         * @throws IllegalArgumentException for any other value
         */
        public static Opcode fromWire(int value) {
            return switch (value) {
                case 0 -> READ;
                case 1 -> WRITE;
                default -> throw new IllegalArgumentException("unknown opcode " + value);
            };
        }
    }

    /**
     * Checks the request.
     *
     * @throws NullPointerException     when {@code opcode} is null
     * @throws IllegalArgumentException when {@code length} is negative
     */
    public TransferRequest {
        Objects.requireNonNull(opcode, "opcode");
        if (length < 0) {
            throw new IllegalArgumentException("length must be >= 0, got " + length);
        }
    }

    /**
     * A write request.
     *
     * @param source        local address to copy from
     * @param targetId      segment handle from {@link TransferEngine#openSegment}
     * @param targetAddress address in the target segment to copy to
     * @param length        bytes
     * @return the request
     */
    public static TransferRequest write(long source, long targetId, long targetAddress, long length) {
        return new TransferRequest(Opcode.WRITE, source, targetId, targetAddress, length);
    }

    /**
     * A read request.
     *
     * @param localAddress  local address to copy into
     * @param targetId      segment handle from {@link TransferEngine#openSegment}
     * @param targetAddress address in the target segment to copy from
     * @param length        bytes
     * @return the request
     */
    public static TransferRequest read(long localAddress, long targetId, long targetAddress, long length) {
        return new TransferRequest(Opcode.READ, localAddress, targetId, targetAddress, length);
    }
}
