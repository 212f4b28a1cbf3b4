package io.mooncake4j.engine.rdma.verbs;

import java.util.Locale;

/**
 * One asynchronous device event ({@code struct ibv_async_event}): its {@code enum ibv_event_type}
 * and, for port events, the port number (0 otherwise; for CQ/QP/SRQ/WQ events the element is an
 * object pointer the transport does not need, since the CQ's and QPs' completions tell it).
 *
 * @param type {@code event_type}
 * @param port {@code element.port_num} of a port event, else 0
 */
public record AsyncEvent(int type, int port) {

    public static final int CQ_ERR = 0;
    public static final int QP_FATAL = 1;
    public static final int QP_REQ_ERR = 2;
    public static final int QP_ACCESS_ERR = 3;
    public static final int COMM_EST = 4;
    public static final int SQ_DRAINED = 5;
    public static final int PATH_MIG = 6;
    public static final int PATH_MIG_ERR = 7;
    public static final int DEVICE_FATAL = 8;
    public static final int PORT_ACTIVE = 9;
    public static final int PORT_ERR = 10;
    public static final int LID_CHANGE = 11;
    public static final int PKEY_CHANGE = 12;
    public static final int SM_CHANGE = 13;
    public static final int SRQ_ERR = 14;
    public static final int SRQ_LIMIT_REACHED = 15;
    public static final int QP_LAST_WQE_REACHED = 16;
    public static final int CLIENT_REREGISTER = 17;
    public static final int GID_CHANGE = 18;
    public static final int WQ_FATAL = 19;

    private static final String[] NAMES = {"CQ_ERR", "QP_FATAL", "QP_REQ_ERR", "QP_ACCESS_ERR", "COMM_EST",
        "SQ_DRAINED", "PATH_MIG", "PATH_MIG_ERR", "DEVICE_FATAL", "PORT_ACTIVE", "PORT_ERR", "LID_CHANGE",
        "PKEY_CHANGE", "SM_CHANGE", "SRQ_ERR", "SRQ_LIMIT_REACHED", "QP_LAST_WQE_REACHED", "CLIENT_REREGISTER",
        "GID_CHANGE", "WQ_FATAL"};

    /** Whether the event's element is a port number ({@code verbs.h}: port, LID, P_Key, SM, GID events). */
    public static boolean isPortEvent(int type) {
        return type == PORT_ACTIVE || type == PORT_ERR || type == LID_CHANGE || type == PKEY_CHANGE
                || type == SM_CHANGE || type == CLIENT_REREGISTER || type == GID_CHANGE;
    }

    /** {@code IBV_EVENT_<name>}, or the number for an unknown type. */
    public static String name(int type) {
        return type >= 0 && type < NAMES.length ? "IBV_EVENT_" + NAMES[type]
                : String.format(Locale.ROOT, "event %d", type);
    }

    @Override
    public String toString() {
        return name(type) + (isPortEvent(type) ? " (port " + port + ")" : "");
    }
}
