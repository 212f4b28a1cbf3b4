package io.mooncake4j.engine.handshake;

import io.mooncake4j.internal.json.Json;
import io.mooncake4j.internal.json.JsonException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * The body of a Connection (type 0) request or reply: Mooncake's {@code HandShakeDesc}
 * ({@code TransferHandshakeUtil}, spec §2.7), used by the RDMA transport to exchange QP numbers.
 *
 * <p>Keys (sorted, compact, trailing LF): {@code local_gid}, {@code local_lid},
 * {@code local_nic_path}, {@code payload}, {@code peer_nic_path}, {@code qp_num},
 * {@code ready_ack} (only when {@link #readyAck()} is non-null), {@code reply_msg}. On decode a
 * non-string {@code local_gid} reads as {@code ""}, a non-integer {@code local_lid} as 0, and the
 * presence of {@code ready_ack} (a boolean, else false) means the sender supports the ready-ACK.
 * Immutable.
 *
 * @see <a href="https://github.com/kvcache-ai/Mooncake">Mooncake</a>
 *      {@code mooncake-transfer-engine/src/transfer_metadata.cpp} ({@code TransferHandshakeUtil})
 *
 * @param localNicPath the sender's NIC path ({@code host:port@device})
 * @param peerNicPath  the NIC path it connects to
 * @param localGid     the sender's GID, Mooncake's text form
 * @param localLid     the sender's LID (0 on RoCE)
 * @param qpNums   QP numbers, unsigned 32-bit
 * @param readyAck null when the key is absent
 * @param replyMsg {@code ""} = accepted; anything else is a rejection
 * @param payload  Mooncake's opaque payload field ({@code ""})
 */
public record HandShakeDesc(String localNicPath, String peerNicPath, String localGid, int localLid,
        List<Long> qpNums, Boolean readyAck, String replyMsg, String payload) {

    public HandShakeDesc {
        localNicPath = Objects.requireNonNullElse(localNicPath, "");
        peerNicPath = Objects.requireNonNullElse(peerNicPath, "");
        localGid = Objects.requireNonNullElse(localGid, "");
        qpNums = qpNums == null ? List.of() : List.copyOf(qpNums);
        replyMsg = Objects.requireNonNullElse(replyMsg, "");
        payload = Objects.requireNonNullElse(payload, "");
    }

    /** What a node without RDMA answers: every field empty, no {@code ready_ack}. */
    public static HandShakeDesc empty() {
        return new HandShakeDesc("", "", "", 0, List.of(), null, "", "");
    }

    /** A rejection carrying {@code message} in {@code reply_msg}. */
    public static HandShakeDesc rejection(String message) {
        return new HandShakeDesc("", "", "", 0, List.of(), null, message, "");
    }

    /** {@code <serverName>@<device>} (Mooncake {@code MakeNicPath}). */
    public static String nicPath(String serverName, String device) {
        return serverName + "@" + device;
    }

    /** The server part of a NIC path (before the last {@code '@'}). */
    public static String serverOf(String nicPath) {
        int at = nicPath.lastIndexOf('@');
        return at < 0 ? nicPath : nicPath.substring(0, at);
    }

    /** The device part of a NIC path (after the last {@code '@'}), {@code ""} when there is none. */
    public static String deviceOf(String nicPath) {
        int at = nicPath.lastIndexOf('@');
        return at < 0 ? "" : nicPath.substring(at + 1);
    }

    /** A copy with another {@code ready_ack} (null removes the key). */
    public HandShakeDesc withReadyAck(Boolean ack) {
        return new HandShakeDesc(localNicPath, peerNicPath, localGid, localLid, qpNums, ack, replyMsg, payload);
    }

    /** jsoncpp {@code FastWriter} form: sorted keys, compact, trailing LF. */
    public String toJson() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("local_gid", localGid);
        m.put("local_lid", (long) localLid);
        m.put("local_nic_path", localNicPath);
        m.put("payload", payload);
        m.put("peer_nic_path", peerNicPath);
        m.put("qp_num", qpNums);
        if (readyAck != null) {
            m.put("ready_ack", readyAck);
        }
        m.put("reply_msg", replyMsg);
        return Json.write(m, true) + "\n";
    }

    /** Decodes a parsed JSON value (as the handshake server hands it over). */
    public static HandShakeDesc fromJson(Object json) {
        if (!(json instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException("HandShakeDesc is " + Json.typeName(json) + ", not an object");
        }
        String gid = m.get("local_gid") instanceof String s ? s : "";
        int lid = m.get("local_lid") instanceof Long l && l >= 0 && l <= 0xFFFFFFFFL ? (int) (long) l : 0;
        List<Long> qps = new ArrayList<>();
        if (m.get("qp_num") instanceof List<?> list) {
            for (Object o : list) {
                if (!(o instanceof Long q) || q < 0 || q > 0xFFFFFFFFL) {
                    throw new IllegalArgumentException(String.format(Locale.ROOT,
                            "qp_num entry %s is not an unsigned 32-bit integer", o));
                }
                qps.add(q);
            }
        }
        Boolean ack = null;
        if (m.containsKey("ready_ack")) {
            ack = m.get("ready_ack") instanceof Boolean b ? b : Boolean.FALSE;
        }
        return new HandShakeDesc(text(m.get("local_nic_path")), text(m.get("peer_nic_path")), gid, lid, qps, ack,
                text(m.get("reply_msg")), text(m.get("payload")));
    }

    /** Parses JSON text. */
    public static HandShakeDesc parse(String json) {
        try {
            return fromJson(Json.parse(json));
        } catch (JsonException e) {
            throw new IllegalArgumentException("malformed HandShakeDesc JSON: " + e.getMessage(), e);
        }
    }

    private static String text(Object o) {
        return o instanceof String s ? s : "";
    }
}
