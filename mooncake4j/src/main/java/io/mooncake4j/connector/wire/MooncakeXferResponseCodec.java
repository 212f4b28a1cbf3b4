package io.mooncake4j.connector.wire;

import java.util.List;

/**
 * msgpack encoding of {@link MooncakeXferResponse}, byte-compatible with vLLM's msgspec encoder.
 *
 * <h2>Encoding</h2>
 * A msgpack map with, in this order: {@code status} (int, always, even 0), then {@code ok_reqs}
 * ([str…]), {@code err_reqs} ([str…]) and {@code err_msg} (str), each only when not {@code None}.
 *
 * <h2>Decoding</h2>
 * Keys in any order; unknown keys (e.g. the later {@code prefix_replay_checkpoints}) are skipped;
 * {@code nil} is accepted for the three optional fields. A missing {@code status}, a status
 * outside 0..2, a wrong type or trailing bytes raise {@link ProtocolException}.
 *
 * <p>Stateless and thread-safe.
 */
public final class MooncakeXferResponseCodec {

    static final String STATUS = "status";
    static final String OK_REQS = "ok_reqs";
    static final String ERR_REQS = "err_reqs";
    static final String ERR_MSG = "err_msg";

    private MooncakeXferResponseCodec() {
    }

    /** The msgpack bytes of {@code resp}, exactly as msgspec would write them. */
    public static byte[] encode(MooncakeXferResponse resp) {
        int n = 1 + (resp.okReqs() != null ? 1 : 0) + (resp.errReqs() != null ? 1 : 0)
                + (resp.errMsg() != null ? 1 : 0);
        MsgpackWriter w = new MsgpackWriter(64);
        w.writeMapHeader(n);
        w.writeString(STATUS).writeInt(resp.status().value());
        if (resp.okReqs() != null) {
            w.writeString(OK_REQS);
            Fields.strArray(w, resp.okReqs());
        }
        if (resp.errReqs() != null) {
            w.writeString(ERR_REQS);
            Fields.strArray(w, resp.errReqs());
        }
        if (resp.errMsg() != null) {
            w.writeString(ERR_MSG).writeString(resp.errMsg());
        }
        return w.toByteArray();
    }

    /** Decodes with {@link MsgpackLimits#DEFAULT}. */
    public static MooncakeXferResponse decode(byte[] bytes) {
        return decode(bytes, MsgpackLimits.DEFAULT);
    }

    /**
     * Decodes one message (the whole of {@code bytes}).
     *
     * @throws ProtocolException on any malformation
     */
    public static MooncakeXferResponse decode(byte[] bytes, MsgpackLimits limits) {
        MsgpackReader r = new MsgpackReader(bytes, limits);
        if (!r.hasRemaining()) {
            throw new ProtocolException("Input data was truncated: empty message");
        }
        Fields.expect(r, MsgpackType.MAP, "object", "$");
        int n = r.readMapHeader();
        MooncakeXferResponseStatus status = null;
        List<String> ok = null;
        List<String> err = null;
        String msg = null;
        for (int i = 0; i < n; i++) {
            String key = Fields.key(r);
            String path = "$." + key;
            switch (key) {
                case STATUS -> status = MooncakeXferResponseStatus.fromValue(Fields.int64(r, path));
                case OK_REQS -> ok = r.tryReadNil() ? null : Fields.strList(r, path);
                case ERR_REQS -> err = r.tryReadNil() ? null : Fields.strList(r, path);
                case ERR_MSG -> msg = r.tryReadNil() ? null : Fields.str(r, path);
                default -> r.skipValue();
            }
        }
        r.expectEnd();
        if (status == null) {
            throw Fields.missing(STATUS);
        }
        return new MooncakeXferResponse(status, ok, err, msg);
    }
}
