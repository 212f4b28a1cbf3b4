package io.mooncake4j.engine.rdma.verbs;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.MemoryLayout.paddingLayout;
import static java.lang.foreign.MemoryLayout.sequenceLayout;
import static java.lang.foreign.MemoryLayout.structLayout;
import static java.lang.foreign.MemoryLayout.unionLayout;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.foreign.UnionLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Hand-written mirrors of the {@code <infiniband/verbs.h>} structures the bindings touch
 * (rdma-core v44 headers, LP64 Linux). Each layout carries the C declaration above it; members
 * keep their C names. Enums are {@code int}; {@code __be64}/{@code uint64_t} are {@code long}.
 *
 * <p>These layouts are never patched at run time. {@code VerbsLayoutTest} compares
 * {@link #facts()} with the output of {@code native/verbs_layout.c} (compiled by the test build
 * when a C compiler and the verbs headers are present, else a committed x86-64 golden file) and
 * fails on any difference.
 */
final class VerbsLayouts {

    private VerbsLayouts() {}

    private static final boolean AARCH64 = "aarch64".equals(System.getProperty("os.arch"));
    /** {@code sizeof(pthread_mutex_t)} in glibc: 40 on x86-64, 48 on aarch64. */
    static final long PTHREAD_MUTEX_SIZE = AARCH64 ? 48 : 40;
    /** {@code sizeof(pthread_cond_t)} in glibc: 48 on both. */
    static final long PTHREAD_COND_SIZE = 48;

    // struct ibv_device {
    //     struct _ibv_device_ops _ops;          /* two function pointers */
    //     enum ibv_node_type node_type;
    //     enum ibv_transport_type transport_type;
    //     char name[IBV_SYSFS_NAME_MAX];        /* 64 */
    //     char dev_name[IBV_SYSFS_NAME_MAX];
    //     char dev_path[IBV_SYSFS_PATH_MAX];    /* 256 */
    //     char ibdev_path[IBV_SYSFS_PATH_MAX];
    // };
    static final StructLayout IBV_DEVICE = structLayout(
            paddingLayout(2 * ADDRESS.byteSize()),
            JAVA_INT.withName("node_type"),
            JAVA_INT.withName("transport_type"),
            sequenceLayout(64, JAVA_BYTE).withName("name"),
            sequenceLayout(64, JAVA_BYTE).withName("dev_name"),
            sequenceLayout(256, JAVA_BYTE).withName("dev_path"),
            sequenceLayout(256, JAVA_BYTE).withName("ibdev_path"));

    // struct ibv_context_ops {           /* 32 function pointers, frozen ABI */
    //     ... slots 0-10 ...
    //     int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);            /* 11 */
    //     int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);                      /* 12 */
    //     ... slots 13-24 ...
    //     int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr); /* 25 */
    //     int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr); /* 26 */
    //     ... slots 27-31 ...
    // };
    static final StructLayout IBV_CONTEXT_OPS = structLayout(
            paddingLayout(11 * ADDRESS.byteSize()),
            ADDRESS.withName("poll_cq"),
            ADDRESS.withName("req_notify_cq"),
            paddingLayout(12 * ADDRESS.byteSize()),
            ADDRESS.withName("post_send"),
            ADDRESS.withName("post_recv"),
            paddingLayout(5 * ADDRESS.byteSize()));

    // struct ibv_context {
    //     struct ibv_device *device;
    //     struct ibv_context_ops ops;
    //     int cmd_fd;
    //     int async_fd;
    //     int num_comp_vectors;
    //     pthread_mutex_t mutex;
    //     void *abi_compat;
    // };
    static final StructLayout IBV_CONTEXT = structLayout(
            ADDRESS.withName("device"),
            IBV_CONTEXT_OPS.withName("ops"),
            JAVA_INT.withName("cmd_fd"),
            JAVA_INT.withName("async_fd"),
            JAVA_INT.withName("num_comp_vectors"),
            paddingLayout(4),
            paddingLayout(PTHREAD_MUTEX_SIZE),
            ADDRESS.withName("abi_compat"));

    // struct ibv_device_attr {
    //     char fw_ver[64]; __be64 node_guid; __be64 sys_image_guid; uint64_t max_mr_size;
    //     uint64_t page_size_cap; uint32_t vendor_id; uint32_t vendor_part_id; uint32_t hw_ver;
    //     int max_qp; int max_qp_wr; unsigned int device_cap_flags; int max_sge; int max_sge_rd;
    //     int max_cq; int max_cqe; int max_mr; int max_pd; int max_qp_rd_atom; int max_ee_rd_atom;
    //     int max_res_rd_atom; int max_qp_init_rd_atom; int max_ee_init_rd_atom;
    //     enum ibv_atomic_cap atomic_cap; int max_ee; int max_rdd; int max_mw; int max_raw_ipv6_qp;
    //     int max_raw_ethy_qp; int max_mcast_grp; int max_mcast_qp_attach;
    //     int max_total_mcast_qp_attach; int max_ah; int max_fmr; int max_map_per_fmr; int max_srq;
    //     int max_srq_wr; int max_srq_sge; uint16_t max_pkeys; uint8_t local_ca_ack_delay;
    //     uint8_t phys_port_cnt;
    // };
    static final StructLayout IBV_DEVICE_ATTR = structLayout(
            sequenceLayout(64, JAVA_BYTE).withName("fw_ver"),
            JAVA_LONG.withName("node_guid"),
            JAVA_LONG.withName("sys_image_guid"),
            JAVA_LONG.withName("max_mr_size"),
            JAVA_LONG.withName("page_size_cap"),
            JAVA_INT.withName("vendor_id"),
            JAVA_INT.withName("vendor_part_id"),
            JAVA_INT.withName("hw_ver"),
            JAVA_INT.withName("max_qp"),
            JAVA_INT.withName("max_qp_wr"),
            JAVA_INT.withName("device_cap_flags"),
            JAVA_INT.withName("max_sge"),
            JAVA_INT.withName("max_sge_rd"),
            JAVA_INT.withName("max_cq"),
            JAVA_INT.withName("max_cqe"),
            JAVA_INT.withName("max_mr"),
            JAVA_INT.withName("max_pd"),
            JAVA_INT.withName("max_qp_rd_atom"),
            JAVA_INT.withName("max_ee_rd_atom"),
            JAVA_INT.withName("max_res_rd_atom"),
            JAVA_INT.withName("max_qp_init_rd_atom"),
            JAVA_INT.withName("max_ee_init_rd_atom"),
            JAVA_INT.withName("atomic_cap"),
            JAVA_INT.withName("max_ee"),
            JAVA_INT.withName("max_rdd"),
            JAVA_INT.withName("max_mw"),
            JAVA_INT.withName("max_raw_ipv6_qp"),
            JAVA_INT.withName("max_raw_ethy_qp"),
            JAVA_INT.withName("max_mcast_grp"),
            JAVA_INT.withName("max_mcast_qp_attach"),
            JAVA_INT.withName("max_total_mcast_qp_attach"),
            JAVA_INT.withName("max_ah"),
            JAVA_INT.withName("max_fmr"),
            JAVA_INT.withName("max_map_per_fmr"),
            JAVA_INT.withName("max_srq"),
            JAVA_INT.withName("max_srq_wr"),
            JAVA_INT.withName("max_srq_sge"),
            JAVA_SHORT.withName("max_pkeys"),
            JAVA_BYTE.withName("local_ca_ack_delay"),
            JAVA_BYTE.withName("phys_port_cnt"),
            paddingLayout(4));

    // struct ibv_port_attr {
    //     enum ibv_port_state state; enum ibv_mtu max_mtu; enum ibv_mtu active_mtu;
    //     int gid_tbl_len; uint32_t port_cap_flags; uint32_t max_msg_sz; uint32_t bad_pkey_cntr;
    //     uint32_t qkey_viol_cntr; uint16_t pkey_tbl_len; uint16_t lid; uint16_t sm_lid;
    //     uint8_t lmc; uint8_t max_vl_num; uint8_t sm_sl; uint8_t subnet_timeout;
    //     uint8_t init_type_reply; uint8_t active_width; uint8_t active_speed; uint8_t phys_state;
    //     uint8_t link_layer; uint8_t flags; uint16_t port_cap_flags2;
    // };
    // The exported ibv_query_port fills the prefix up to 'flags' (_compat_ibv_port_attr).
    static final StructLayout IBV_PORT_ATTR = structLayout(
            JAVA_INT.withName("state"),
            JAVA_INT.withName("max_mtu"),
            JAVA_INT.withName("active_mtu"),
            JAVA_INT.withName("gid_tbl_len"),
            JAVA_INT.withName("port_cap_flags"),
            JAVA_INT.withName("max_msg_sz"),
            JAVA_INT.withName("bad_pkey_cntr"),
            JAVA_INT.withName("qkey_viol_cntr"),
            JAVA_SHORT.withName("pkey_tbl_len"),
            JAVA_SHORT.withName("lid"),
            JAVA_SHORT.withName("sm_lid"),
            JAVA_BYTE.withName("lmc"),
            JAVA_BYTE.withName("max_vl_num"),
            JAVA_BYTE.withName("sm_sl"),
            JAVA_BYTE.withName("subnet_timeout"),
            JAVA_BYTE.withName("init_type_reply"),
            JAVA_BYTE.withName("active_width"),
            JAVA_BYTE.withName("active_speed"),
            JAVA_BYTE.withName("phys_state"),
            JAVA_BYTE.withName("link_layer"),
            JAVA_BYTE.withName("flags"),
            JAVA_SHORT.withName("port_cap_flags2"),
            paddingLayout(2));

    // union ibv_gid {
    //     uint8_t raw[16];
    //     struct { __be64 subnet_prefix; __be64 interface_id; } global;
    // };
    static final UnionLayout IBV_GID = unionLayout(
            sequenceLayout(16, JAVA_BYTE).withName("raw"),
            structLayout(
                    JAVA_LONG.withName("subnet_prefix"),
                    JAVA_LONG.withName("interface_id")).withName("global"));

    // struct ibv_gid_entry {
    //     union ibv_gid gid; uint32_t gid_index; uint32_t port_num;
    //     uint32_t gid_type;   /* enum ibv_gid_type */
    //     uint32_t ndev_ifindex;
    // };
    static final StructLayout IBV_GID_ENTRY = structLayout(
            IBV_GID.withName("gid"),
            JAVA_INT.withName("gid_index"),
            JAVA_INT.withName("port_num"),
            JAVA_INT.withName("gid_type"),
            JAVA_INT.withName("ndev_ifindex"));

    // struct ibv_pd { struct ibv_context *context; uint32_t handle; };
    static final StructLayout IBV_PD = structLayout(
            ADDRESS.withName("context"),
            JAVA_INT.withName("handle"),
            paddingLayout(4));

    // struct ibv_mr {
    //     struct ibv_context *context; struct ibv_pd *pd; void *addr; size_t length;
    //     uint32_t handle; uint32_t lkey; uint32_t rkey;
    // };
    static final StructLayout IBV_MR = structLayout(
            ADDRESS.withName("context"),
            ADDRESS.withName("pd"),
            ADDRESS.withName("addr"),
            JAVA_LONG.withName("length"),
            JAVA_INT.withName("handle"),
            JAVA_INT.withName("lkey"),
            JAVA_INT.withName("rkey"),
            paddingLayout(4));

    // struct ibv_cq {
    //     struct ibv_context *context; struct ibv_comp_channel *channel; void *cq_context;
    //     uint32_t handle; int cqe; pthread_mutex_t mutex; pthread_cond_t cond;
    //     uint32_t comp_events_completed; uint32_t async_events_completed;
    // };
    static final StructLayout IBV_CQ = structLayout(
            ADDRESS.withName("context"),
            ADDRESS.withName("channel"),
            ADDRESS.withName("cq_context"),
            JAVA_INT.withName("handle"),
            JAVA_INT.withName("cqe"),
            paddingLayout(PTHREAD_MUTEX_SIZE),
            paddingLayout(PTHREAD_COND_SIZE),
            JAVA_INT.withName("comp_events_completed"),
            JAVA_INT.withName("async_events_completed"));

    // struct ibv_qp {
    //     struct ibv_context *context; void *qp_context; struct ibv_pd *pd;
    //     struct ibv_cq *send_cq; struct ibv_cq *recv_cq; struct ibv_srq *srq;
    //     uint32_t handle; uint32_t qp_num; enum ibv_qp_state state; enum ibv_qp_type qp_type;
    //     pthread_mutex_t mutex; pthread_cond_t cond; uint32_t events_completed;
    // };
    static final StructLayout IBV_QP = structLayout(
            ADDRESS.withName("context"),
            ADDRESS.withName("qp_context"),
            ADDRESS.withName("pd"),
            ADDRESS.withName("send_cq"),
            ADDRESS.withName("recv_cq"),
            ADDRESS.withName("srq"),
            JAVA_INT.withName("handle"),
            JAVA_INT.withName("qp_num"),
            JAVA_INT.withName("state"),
            JAVA_INT.withName("qp_type"),
            paddingLayout(PTHREAD_MUTEX_SIZE),
            paddingLayout(PTHREAD_COND_SIZE),
            JAVA_INT.withName("events_completed"),
            paddingLayout(4));

    // struct ibv_qp_cap {
    //     uint32_t max_send_wr; uint32_t max_recv_wr; uint32_t max_send_sge;
    //     uint32_t max_recv_sge; uint32_t max_inline_data;
    // };
    static final StructLayout IBV_QP_CAP = structLayout(
            JAVA_INT.withName("max_send_wr"),
            JAVA_INT.withName("max_recv_wr"),
            JAVA_INT.withName("max_send_sge"),
            JAVA_INT.withName("max_recv_sge"),
            JAVA_INT.withName("max_inline_data"));

    // struct ibv_qp_init_attr {
    //     void *qp_context; struct ibv_cq *send_cq; struct ibv_cq *recv_cq; struct ibv_srq *srq;
    //     struct ibv_qp_cap cap; enum ibv_qp_type qp_type; int sq_sig_all;
    // };
    static final StructLayout IBV_QP_INIT_ATTR = structLayout(
            ADDRESS.withName("qp_context"),
            ADDRESS.withName("send_cq"),
            ADDRESS.withName("recv_cq"),
            ADDRESS.withName("srq"),
            IBV_QP_CAP.withName("cap"),
            JAVA_INT.withName("qp_type"),
            JAVA_INT.withName("sq_sig_all"),
            paddingLayout(4));

    // struct ibv_global_route {
    //     union ibv_gid dgid; uint32_t flow_label; uint8_t sgid_index; uint8_t hop_limit;
    //     uint8_t traffic_class;
    // };
    static final StructLayout IBV_GLOBAL_ROUTE = structLayout(
            IBV_GID.withName("dgid"),
            JAVA_INT.withName("flow_label"),
            JAVA_BYTE.withName("sgid_index"),
            JAVA_BYTE.withName("hop_limit"),
            JAVA_BYTE.withName("traffic_class"),
            paddingLayout(1));

    // struct ibv_ah_attr {
    //     struct ibv_global_route grh; uint16_t dlid; uint8_t sl; uint8_t src_path_bits;
    //     uint8_t static_rate; uint8_t is_global; uint8_t port_num;
    // };
    static final StructLayout IBV_AH_ATTR = structLayout(
            IBV_GLOBAL_ROUTE.withName("grh"),
            JAVA_SHORT.withName("dlid"),
            JAVA_BYTE.withName("sl"),
            JAVA_BYTE.withName("src_path_bits"),
            JAVA_BYTE.withName("static_rate"),
            JAVA_BYTE.withName("is_global"),
            JAVA_BYTE.withName("port_num"),
            paddingLayout(1));

    // struct ibv_qp_attr {
    //     enum ibv_qp_state qp_state; enum ibv_qp_state cur_qp_state; enum ibv_mtu path_mtu;
    //     enum ibv_mig_state path_mig_state; uint32_t qkey; uint32_t rq_psn; uint32_t sq_psn;
    //     uint32_t dest_qp_num; unsigned int qp_access_flags; struct ibv_qp_cap cap;
    //     struct ibv_ah_attr ah_attr; struct ibv_ah_attr alt_ah_attr; uint16_t pkey_index;
    //     uint16_t alt_pkey_index; uint8_t en_sqd_async_notify; uint8_t sq_draining;
    //     uint8_t max_rd_atomic; uint8_t max_dest_rd_atomic; uint8_t min_rnr_timer;
    //     uint8_t port_num; uint8_t timeout; uint8_t retry_cnt; uint8_t rnr_retry;
    //     uint8_t alt_port_num; uint8_t alt_timeout; uint32_t rate_limit;
    // };
    static final StructLayout IBV_QP_ATTR = structLayout(
            JAVA_INT.withName("qp_state"),
            JAVA_INT.withName("cur_qp_state"),
            JAVA_INT.withName("path_mtu"),
            JAVA_INT.withName("path_mig_state"),
            JAVA_INT.withName("qkey"),
            JAVA_INT.withName("rq_psn"),
            JAVA_INT.withName("sq_psn"),
            JAVA_INT.withName("dest_qp_num"),
            JAVA_INT.withName("qp_access_flags"),
            IBV_QP_CAP.withName("cap"),
            IBV_AH_ATTR.withName("ah_attr"),
            IBV_AH_ATTR.withName("alt_ah_attr"),
            JAVA_SHORT.withName("pkey_index"),
            JAVA_SHORT.withName("alt_pkey_index"),
            JAVA_BYTE.withName("en_sqd_async_notify"),
            JAVA_BYTE.withName("sq_draining"),
            JAVA_BYTE.withName("max_rd_atomic"),
            JAVA_BYTE.withName("max_dest_rd_atomic"),
            JAVA_BYTE.withName("min_rnr_timer"),
            JAVA_BYTE.withName("port_num"),
            JAVA_BYTE.withName("timeout"),
            JAVA_BYTE.withName("retry_cnt"),
            JAVA_BYTE.withName("rnr_retry"),
            JAVA_BYTE.withName("alt_port_num"),
            JAVA_BYTE.withName("alt_timeout"),
            paddingLayout(1),
            JAVA_INT.withName("rate_limit"),
            paddingLayout(4));

    // struct ibv_sge { uint64_t addr; uint32_t length; uint32_t lkey; };
    static final StructLayout IBV_SGE = structLayout(
            JAVA_LONG.withName("addr"),
            JAVA_INT.withName("length"),
            JAVA_INT.withName("lkey"));

    // struct ibv_send_wr {
    //     uint64_t wr_id; struct ibv_send_wr *next; struct ibv_sge *sg_list; int num_sge;
    //     enum ibv_wr_opcode opcode; unsigned int send_flags;
    //     union { __be32 imm_data; uint32_t invalidate_rkey; };
    //     union {
    //         struct { uint64_t remote_addr; uint32_t rkey; } rdma;
    //         struct { uint64_t remote_addr; uint64_t compare_add; uint64_t swap; uint32_t rkey; } atomic;
    //         struct { struct ibv_ah *ah; uint32_t remote_qpn; uint32_t remote_qkey; } ud;
    //     } wr;
    //     union { struct { uint32_t remote_srqn; } xrc; } qp_type;
    //     union { struct { ... } bind_mw; struct { ... } tso; };   /* 48 bytes, unused here */
    // };
    static final StructLayout IBV_SEND_WR = structLayout(
            JAVA_LONG.withName("wr_id"),
            ADDRESS.withName("next"),
            ADDRESS.withName("sg_list"),
            JAVA_INT.withName("num_sge"),
            JAVA_INT.withName("opcode"),
            JAVA_INT.withName("send_flags"),
            unionLayout(
                    JAVA_INT.withName("imm_data"),
                    JAVA_INT.withName("invalidate_rkey")),
            unionLayout(
                    structLayout(
                            JAVA_LONG.withName("remote_addr"),
                            JAVA_INT.withName("rkey"),
                            paddingLayout(4)).withName("rdma"),
                    structLayout(
                            JAVA_LONG.withName("remote_addr"),
                            JAVA_LONG.withName("compare_add"),
                            JAVA_LONG.withName("swap"),
                            JAVA_INT.withName("rkey"),
                            paddingLayout(4)).withName("atomic"),
                    structLayout(
                            ADDRESS.withName("ah"),
                            JAVA_INT.withName("remote_qpn"),
                            JAVA_INT.withName("remote_qkey")).withName("ud")).withName("wr"),
            unionLayout(
                    structLayout(JAVA_INT.withName("remote_srqn")).withName("xrc")).withName("qp_type"),
            paddingLayout(4),
            paddingLayout(48));

    // struct ibv_wc {
    //     uint64_t wr_id; enum ibv_wc_status status; enum ibv_wc_opcode opcode;
    //     uint32_t vendor_err; uint32_t byte_len;
    //     union { __be32 imm_data; uint32_t invalidated_rkey; };
    //     uint32_t qp_num; uint32_t src_qp; unsigned int wc_flags; uint16_t pkey_index;
    //     uint16_t slid; uint8_t sl; uint8_t dlid_path_bits;
    // };
    static final StructLayout IBV_WC = structLayout(
            JAVA_LONG.withName("wr_id"),
            JAVA_INT.withName("status"),
            JAVA_INT.withName("opcode"),
            JAVA_INT.withName("vendor_err"),
            JAVA_INT.withName("byte_len"),
            unionLayout(
                    JAVA_INT.withName("imm_data"),
                    JAVA_INT.withName("invalidated_rkey")),
            JAVA_INT.withName("qp_num"),
            JAVA_INT.withName("src_qp"),
            JAVA_INT.withName("wc_flags"),
            JAVA_SHORT.withName("pkey_index"),
            JAVA_SHORT.withName("slid"),
            JAVA_BYTE.withName("sl"),
            JAVA_BYTE.withName("dlid_path_bits"),
            paddingLayout(2));

    // struct ibv_async_event {
    //     union { struct ibv_cq *cq; struct ibv_qp *qp; struct ibv_srq *srq; struct ibv_wq *wq;
    //             int port_num; } element;
    //     enum ibv_event_type event_type;
    // };
    static final StructLayout IBV_ASYNC_EVENT = structLayout(
            unionLayout(
                    ADDRESS.withName("cq"),
                    ADDRESS.withName("qp"),
                    ADDRESS.withName("srq"),
                    ADDRESS.withName("wq"),
                    JAVA_INT.withName("port_num")).withName("element"),
            JAVA_INT.withName("event_type"),
            paddingLayout(4));

    // ---- offsets used by the bindings (computed from the layouts above) ----

    static final long DEVICE_NAME = off(IBV_DEVICE, "name");
    static final long DEVICE_IBDEV_PATH = off(IBV_DEVICE, "ibdev_path");
    static final long CONTEXT_DEVICE = off(IBV_CONTEXT, "device");
    static final long CONTEXT_OPS_POLL_CQ = off(IBV_CONTEXT, "ops", "poll_cq");
    static final long CONTEXT_OPS_REQ_NOTIFY_CQ = off(IBV_CONTEXT, "ops", "req_notify_cq");
    static final long CONTEXT_OPS_POST_SEND = off(IBV_CONTEXT, "ops", "post_send");
    static final long CONTEXT_OPS_POST_RECV = off(IBV_CONTEXT, "ops", "post_recv");
    static final long CONTEXT_NUM_COMP_VECTORS = off(IBV_CONTEXT, "num_comp_vectors");
    static final long CONTEXT_ASYNC_FD = off(IBV_CONTEXT, "async_fd");
    static final long ASYNC_EVENT_PORT_NUM = off(IBV_ASYNC_EVENT, "element", "port_num");
    static final long ASYNC_EVENT_TYPE = off(IBV_ASYNC_EVENT, "event_type");

    static final long MR_ADDR = off(IBV_MR, "addr");
    static final long MR_LENGTH = off(IBV_MR, "length");
    static final long MR_LKEY = off(IBV_MR, "lkey");
    static final long MR_RKEY = off(IBV_MR, "rkey");
    static final long CQ_CONTEXT = off(IBV_CQ, "context");
    static final long CQ_CQE = off(IBV_CQ, "cqe");
    static final long QP_CONTEXT = off(IBV_QP, "context");
    static final long QP_QP_NUM = off(IBV_QP, "qp_num");
    static final long QP_STATE = off(IBV_QP, "state");

    static final long QP_INIT_SEND_CQ = off(IBV_QP_INIT_ATTR, "send_cq");
    static final long QP_INIT_RECV_CQ = off(IBV_QP_INIT_ATTR, "recv_cq");
    static final long QP_INIT_CAP_MAX_SEND_WR = off(IBV_QP_INIT_ATTR, "cap", "max_send_wr");
    static final long QP_INIT_CAP_MAX_RECV_WR = off(IBV_QP_INIT_ATTR, "cap", "max_recv_wr");
    static final long QP_INIT_CAP_MAX_SEND_SGE = off(IBV_QP_INIT_ATTR, "cap", "max_send_sge");
    static final long QP_INIT_CAP_MAX_RECV_SGE = off(IBV_QP_INIT_ATTR, "cap", "max_recv_sge");
    static final long QP_INIT_CAP_MAX_INLINE_DATA = off(IBV_QP_INIT_ATTR, "cap", "max_inline_data");
    static final long QP_INIT_QP_TYPE = off(IBV_QP_INIT_ATTR, "qp_type");
    static final long QP_INIT_SQ_SIG_ALL = off(IBV_QP_INIT_ATTR, "sq_sig_all");

    static final long QP_ATTR_QP_STATE = off(IBV_QP_ATTR, "qp_state");
    static final long QP_ATTR_PATH_MTU = off(IBV_QP_ATTR, "path_mtu");
    static final long QP_ATTR_RQ_PSN = off(IBV_QP_ATTR, "rq_psn");
    static final long QP_ATTR_SQ_PSN = off(IBV_QP_ATTR, "sq_psn");
    static final long QP_ATTR_DEST_QP_NUM = off(IBV_QP_ATTR, "dest_qp_num");
    static final long QP_ATTR_QP_ACCESS_FLAGS = off(IBV_QP_ATTR, "qp_access_flags");
    static final long QP_ATTR_AH_DGID = off(IBV_QP_ATTR, "ah_attr", "grh", "dgid");
    static final long QP_ATTR_AH_FLOW_LABEL = off(IBV_QP_ATTR, "ah_attr", "grh", "flow_label");
    static final long QP_ATTR_AH_SGID_INDEX = off(IBV_QP_ATTR, "ah_attr", "grh", "sgid_index");
    static final long QP_ATTR_AH_HOP_LIMIT = off(IBV_QP_ATTR, "ah_attr", "grh", "hop_limit");
    static final long QP_ATTR_AH_TRAFFIC_CLASS = off(IBV_QP_ATTR, "ah_attr", "grh", "traffic_class");
    static final long QP_ATTR_AH_DLID = off(IBV_QP_ATTR, "ah_attr", "dlid");
    static final long QP_ATTR_AH_SL = off(IBV_QP_ATTR, "ah_attr", "sl");
    static final long QP_ATTR_AH_SRC_PATH_BITS = off(IBV_QP_ATTR, "ah_attr", "src_path_bits");
    static final long QP_ATTR_AH_STATIC_RATE = off(IBV_QP_ATTR, "ah_attr", "static_rate");
    static final long QP_ATTR_AH_IS_GLOBAL = off(IBV_QP_ATTR, "ah_attr", "is_global");
    static final long QP_ATTR_AH_PORT_NUM = off(IBV_QP_ATTR, "ah_attr", "port_num");
    static final long QP_ATTR_PKEY_INDEX = off(IBV_QP_ATTR, "pkey_index");
    static final long QP_ATTR_MAX_RD_ATOMIC = off(IBV_QP_ATTR, "max_rd_atomic");
    static final long QP_ATTR_MAX_DEST_RD_ATOMIC = off(IBV_QP_ATTR, "max_dest_rd_atomic");
    static final long QP_ATTR_MIN_RNR_TIMER = off(IBV_QP_ATTR, "min_rnr_timer");
    static final long QP_ATTR_PORT_NUM = off(IBV_QP_ATTR, "port_num");
    static final long QP_ATTR_TIMEOUT = off(IBV_QP_ATTR, "timeout");
    static final long QP_ATTR_RETRY_CNT = off(IBV_QP_ATTR, "retry_cnt");
    static final long QP_ATTR_RNR_RETRY = off(IBV_QP_ATTR, "rnr_retry");

    static final long SGE_ADDR = off(IBV_SGE, "addr");
    static final long SGE_LENGTH = off(IBV_SGE, "length");
    static final long SGE_LKEY = off(IBV_SGE, "lkey");

    static final long SEND_WR_WR_ID = off(IBV_SEND_WR, "wr_id");
    static final long SEND_WR_NEXT = off(IBV_SEND_WR, "next");
    static final long SEND_WR_SG_LIST = off(IBV_SEND_WR, "sg_list");
    static final long SEND_WR_NUM_SGE = off(IBV_SEND_WR, "num_sge");
    static final long SEND_WR_OPCODE = off(IBV_SEND_WR, "opcode");
    static final long SEND_WR_SEND_FLAGS = off(IBV_SEND_WR, "send_flags");
    static final long SEND_WR_RDMA_REMOTE_ADDR = off(IBV_SEND_WR, "wr", "rdma", "remote_addr");
    static final long SEND_WR_RDMA_RKEY = off(IBV_SEND_WR, "wr", "rdma", "rkey");

    static final long WC_WR_ID = off(IBV_WC, "wr_id");
    static final long WC_STATUS = off(IBV_WC, "status");
    static final long WC_OPCODE = off(IBV_WC, "opcode");
    static final long WC_VENDOR_ERR = off(IBV_WC, "vendor_err");
    static final long WC_BYTE_LEN = off(IBV_WC, "byte_len");
    static final long WC_QP_NUM = off(IBV_WC, "qp_num");

    static final long PORT_STATE = off(IBV_PORT_ATTR, "state");
    static final long PORT_MAX_MTU = off(IBV_PORT_ATTR, "max_mtu");
    static final long PORT_ACTIVE_MTU = off(IBV_PORT_ATTR, "active_mtu");
    static final long PORT_GID_TBL_LEN = off(IBV_PORT_ATTR, "gid_tbl_len");
    static final long PORT_LID = off(IBV_PORT_ATTR, "lid");
    static final long PORT_LINK_LAYER = off(IBV_PORT_ATTR, "link_layer");

    static final long GID_ENTRY_GID = off(IBV_GID_ENTRY, "gid");
    static final long GID_ENTRY_GID_INDEX = off(IBV_GID_ENTRY, "gid_index");
    static final long GID_ENTRY_GID_TYPE = off(IBV_GID_ENTRY, "gid_type");
    static final long GID_ENTRY_NDEV_IFINDEX = off(IBV_GID_ENTRY, "ndev_ifindex");

    private static long off(GroupLayout layout, String... path) {
        MemoryLayout.PathElement[] elements = new MemoryLayout.PathElement[path.length];
        for (int i = 0; i < path.length; i++) {
            elements[i] = groupElement(path[i]);
        }
        return layout.byteOffset(elements);
    }

    /** The structures {@link #facts()} describes, by C name, in probe order. */
    static Map<String, GroupLayout> structs() {
        Map<String, GroupLayout> m = new LinkedHashMap<>();
        m.put("ibv_device", IBV_DEVICE);
        m.put("ibv_context", IBV_CONTEXT);
        m.put("ibv_device_attr", IBV_DEVICE_ATTR);
        m.put("ibv_port_attr", IBV_PORT_ATTR);
        m.put("ibv_gid", IBV_GID);
        m.put("ibv_gid_entry", IBV_GID_ENTRY);
        m.put("ibv_pd", IBV_PD);
        m.put("ibv_mr", IBV_MR);
        m.put("ibv_cq", IBV_CQ);
        m.put("ibv_qp", IBV_QP);
        m.put("ibv_qp_cap", IBV_QP_CAP);
        m.put("ibv_qp_init_attr", IBV_QP_INIT_ATTR);
        m.put("ibv_global_route", IBV_GLOBAL_ROUTE);
        m.put("ibv_ah_attr", IBV_AH_ATTR);
        m.put("ibv_qp_attr", IBV_QP_ATTR);
        m.put("ibv_sge", IBV_SGE);
        m.put("ibv_send_wr", IBV_SEND_WR);
        m.put("ibv_wc", IBV_WC);
        m.put("ibv_async_event", IBV_ASYNC_EVENT);
        return m;
    }

    /**
     * The ABI facts these layouts assert, in the probe's format: {@code "<struct> <sizeof>"} and
     * {@code "<struct>.<path> <offset> <size>"} for every named member. Members of anonymous
     * unions are listed without a prefix (as C names them); a member whose type is itself one
     * of {@link #structs()} is one line (its insides are listed under its own name).
     */
    static List<String> facts() {
        Map<String, GroupLayout> structs = structs();
        List<MemoryLayout> leaves = new ArrayList<>();
        for (GroupLayout g : structs.values()) {
            leaves.add(g.withoutName());
        }
        List<String> out = new ArrayList<>();
        for (Map.Entry<String, GroupLayout> e : structs.entrySet()) {
            out.add(e.getKey() + " " + e.getValue().byteSize());
            members(e.getKey(), e.getValue(), 0, leaves, out);
        }
        return out;
    }

    private static void members(String prefix, GroupLayout group, long base, List<MemoryLayout> leaves,
                                List<String> out) {
        long offset = base;
        for (MemoryLayout member : group.memberLayouts()) {
            long at = group instanceof UnionLayout ? base : offset;
            if (member.name().isPresent()) {
                String path = prefix + "." + member.name().get();
                out.add(String.format(Locale.ROOT, "%s %d %d", path, at, member.byteSize()));
                if (member instanceof GroupLayout g && !leaves.contains(g.withoutName())) {
                    members(path, g, at, leaves, out);
                }
            } else if (member instanceof GroupLayout g) {
                members(prefix, g, at, leaves, out); // anonymous union or struct
            }
            offset += member.byteSize();
        }
    }
}
