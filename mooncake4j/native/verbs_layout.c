/*
 * verbs_layout: prints the ABI facts of <infiniband/verbs.h> that mooncake4j's FFM bindings
 * (io.mooncake4j.engine.rdma.verbs.VerbsLayouts) rely on, one fact per line:
 *
 *   <struct> <sizeof>                       for each struct or union
 *   <struct>.<member path> <offset> <size>  for each member the bindings name
 *
 * Members whose type is itself listed here (ibv_gid, ibv_qp_cap, ibv_global_route, ibv_ah_attr)
 * are printed as one line each: their insides are checked where the type is listed.
 *
 * '#' starts a comment line. The test build compiles this with the system's C compiler and
 * compares its output with the Java layouts; src/test/resources/golden/ holds the x86-64 output
 * for machines without a compiler or the verbs headers.
 *
 * Build: cc -std=c11 -Wall -Wextra -Werror -o verbs_layout verbs_layout.c   (no -libverbs needed)
 */
#include <stddef.h>
#include <stdio.h>
#include <infiniband/verbs.h>

#define SIZE_OF(kind, type) \
    printf("%s %zu\n", #type, sizeof(kind type))
#define MEMBER(kind, type, path) \
    printf("%s.%s %zu %zu\n", #type, #path, offsetof(kind type, path), sizeof(((kind type *)0)->path))

#define S(type) SIZE_OF(struct, type)
#define M(type, path) MEMBER(struct, type, path)

int main(void)
{
#if defined(__x86_64__)
    puts("# arch x86_64");
#elif defined(__aarch64__)
    puts("# arch aarch64");
#else
    puts("# arch other");
#endif
    printf("# pointer %zu\n", sizeof(void *));

    S(ibv_device);
    M(ibv_device, node_type);
    M(ibv_device, transport_type);
    M(ibv_device, name);
    M(ibv_device, dev_name);
    M(ibv_device, dev_path);
    M(ibv_device, ibdev_path);

    S(ibv_context);
    M(ibv_context, device);
    M(ibv_context, ops);
    M(ibv_context, ops.poll_cq);
    M(ibv_context, ops.req_notify_cq);
    M(ibv_context, ops.post_send);
    M(ibv_context, ops.post_recv);
    M(ibv_context, cmd_fd);
    M(ibv_context, async_fd);
    M(ibv_context, num_comp_vectors);
    M(ibv_context, abi_compat);

    S(ibv_device_attr);
    M(ibv_device_attr, fw_ver);
    M(ibv_device_attr, node_guid);
    M(ibv_device_attr, sys_image_guid);
    M(ibv_device_attr, max_mr_size);
    M(ibv_device_attr, page_size_cap);
    M(ibv_device_attr, vendor_id);
    M(ibv_device_attr, vendor_part_id);
    M(ibv_device_attr, hw_ver);
    M(ibv_device_attr, max_qp);
    M(ibv_device_attr, max_qp_wr);
    M(ibv_device_attr, device_cap_flags);
    M(ibv_device_attr, max_sge);
    M(ibv_device_attr, max_sge_rd);
    M(ibv_device_attr, max_cq);
    M(ibv_device_attr, max_cqe);
    M(ibv_device_attr, max_mr);
    M(ibv_device_attr, max_pd);
    M(ibv_device_attr, max_qp_rd_atom);
    M(ibv_device_attr, max_ee_rd_atom);
    M(ibv_device_attr, max_res_rd_atom);
    M(ibv_device_attr, max_qp_init_rd_atom);
    M(ibv_device_attr, max_ee_init_rd_atom);
    M(ibv_device_attr, atomic_cap);
    M(ibv_device_attr, max_ee);
    M(ibv_device_attr, max_rdd);
    M(ibv_device_attr, max_mw);
    M(ibv_device_attr, max_raw_ipv6_qp);
    M(ibv_device_attr, max_raw_ethy_qp);
    M(ibv_device_attr, max_mcast_grp);
    M(ibv_device_attr, max_mcast_qp_attach);
    M(ibv_device_attr, max_total_mcast_qp_attach);
    M(ibv_device_attr, max_ah);
    M(ibv_device_attr, max_fmr);
    M(ibv_device_attr, max_map_per_fmr);
    M(ibv_device_attr, max_srq);
    M(ibv_device_attr, max_srq_wr);
    M(ibv_device_attr, max_srq_sge);
    M(ibv_device_attr, max_pkeys);
    M(ibv_device_attr, local_ca_ack_delay);
    M(ibv_device_attr, phys_port_cnt);

    S(ibv_port_attr);
    M(ibv_port_attr, state);
    M(ibv_port_attr, max_mtu);
    M(ibv_port_attr, active_mtu);
    M(ibv_port_attr, gid_tbl_len);
    M(ibv_port_attr, port_cap_flags);
    M(ibv_port_attr, max_msg_sz);
    M(ibv_port_attr, bad_pkey_cntr);
    M(ibv_port_attr, qkey_viol_cntr);
    M(ibv_port_attr, pkey_tbl_len);
    M(ibv_port_attr, lid);
    M(ibv_port_attr, sm_lid);
    M(ibv_port_attr, lmc);
    M(ibv_port_attr, max_vl_num);
    M(ibv_port_attr, sm_sl);
    M(ibv_port_attr, subnet_timeout);
    M(ibv_port_attr, init_type_reply);
    M(ibv_port_attr, active_width);
    M(ibv_port_attr, active_speed);
    M(ibv_port_attr, phys_state);
    M(ibv_port_attr, link_layer);
    M(ibv_port_attr, flags);
    M(ibv_port_attr, port_cap_flags2);

    SIZE_OF(union, ibv_gid);
    MEMBER(union, ibv_gid, raw);
    MEMBER(union, ibv_gid, global);
    MEMBER(union, ibv_gid, global.subnet_prefix);
    MEMBER(union, ibv_gid, global.interface_id);

    S(ibv_gid_entry);
    M(ibv_gid_entry, gid);
    M(ibv_gid_entry, gid_index);
    M(ibv_gid_entry, port_num);
    M(ibv_gid_entry, gid_type);
    M(ibv_gid_entry, ndev_ifindex);

    S(ibv_pd);
    M(ibv_pd, context);
    M(ibv_pd, handle);

    S(ibv_mr);
    M(ibv_mr, context);
    M(ibv_mr, pd);
    M(ibv_mr, addr);
    M(ibv_mr, length);
    M(ibv_mr, handle);
    M(ibv_mr, lkey);
    M(ibv_mr, rkey);

    S(ibv_cq);
    M(ibv_cq, context);
    M(ibv_cq, channel);
    M(ibv_cq, cq_context);
    M(ibv_cq, handle);
    M(ibv_cq, cqe);
    M(ibv_cq, comp_events_completed);
    M(ibv_cq, async_events_completed);

    S(ibv_qp);
    M(ibv_qp, context);
    M(ibv_qp, qp_context);
    M(ibv_qp, pd);
    M(ibv_qp, send_cq);
    M(ibv_qp, recv_cq);
    M(ibv_qp, srq);
    M(ibv_qp, handle);
    M(ibv_qp, qp_num);
    M(ibv_qp, state);
    M(ibv_qp, qp_type);
    M(ibv_qp, events_completed);

    S(ibv_qp_cap);
    M(ibv_qp_cap, max_send_wr);
    M(ibv_qp_cap, max_recv_wr);
    M(ibv_qp_cap, max_send_sge);
    M(ibv_qp_cap, max_recv_sge);
    M(ibv_qp_cap, max_inline_data);

    S(ibv_qp_init_attr);
    M(ibv_qp_init_attr, qp_context);
    M(ibv_qp_init_attr, send_cq);
    M(ibv_qp_init_attr, recv_cq);
    M(ibv_qp_init_attr, srq);
    M(ibv_qp_init_attr, cap);
    M(ibv_qp_init_attr, qp_type);
    M(ibv_qp_init_attr, sq_sig_all);

    S(ibv_global_route);
    M(ibv_global_route, dgid);
    M(ibv_global_route, flow_label);
    M(ibv_global_route, sgid_index);
    M(ibv_global_route, hop_limit);
    M(ibv_global_route, traffic_class);

    S(ibv_ah_attr);
    M(ibv_ah_attr, grh);
    M(ibv_ah_attr, dlid);
    M(ibv_ah_attr, sl);
    M(ibv_ah_attr, src_path_bits);
    M(ibv_ah_attr, static_rate);
    M(ibv_ah_attr, is_global);
    M(ibv_ah_attr, port_num);

    S(ibv_qp_attr);
    M(ibv_qp_attr, qp_state);
    M(ibv_qp_attr, cur_qp_state);
    M(ibv_qp_attr, path_mtu);
    M(ibv_qp_attr, path_mig_state);
    M(ibv_qp_attr, qkey);
    M(ibv_qp_attr, rq_psn);
    M(ibv_qp_attr, sq_psn);
    M(ibv_qp_attr, dest_qp_num);
    M(ibv_qp_attr, qp_access_flags);
    M(ibv_qp_attr, cap);
    M(ibv_qp_attr, ah_attr);
    M(ibv_qp_attr, alt_ah_attr);
    M(ibv_qp_attr, pkey_index);
    M(ibv_qp_attr, alt_pkey_index);
    M(ibv_qp_attr, en_sqd_async_notify);
    M(ibv_qp_attr, sq_draining);
    M(ibv_qp_attr, max_rd_atomic);
    M(ibv_qp_attr, max_dest_rd_atomic);
    M(ibv_qp_attr, min_rnr_timer);
    M(ibv_qp_attr, port_num);
    M(ibv_qp_attr, timeout);
    M(ibv_qp_attr, retry_cnt);
    M(ibv_qp_attr, rnr_retry);
    M(ibv_qp_attr, alt_port_num);
    M(ibv_qp_attr, alt_timeout);
    M(ibv_qp_attr, rate_limit);

    S(ibv_sge);
    M(ibv_sge, addr);
    M(ibv_sge, length);
    M(ibv_sge, lkey);

    S(ibv_send_wr);
    M(ibv_send_wr, wr_id);
    M(ibv_send_wr, next);
    M(ibv_send_wr, sg_list);
    M(ibv_send_wr, num_sge);
    M(ibv_send_wr, opcode);
    M(ibv_send_wr, send_flags);
    M(ibv_send_wr, imm_data);
    M(ibv_send_wr, invalidate_rkey);
    M(ibv_send_wr, wr);
    M(ibv_send_wr, wr.rdma);
    M(ibv_send_wr, wr.rdma.remote_addr);
    M(ibv_send_wr, wr.rdma.rkey);
    M(ibv_send_wr, wr.atomic);
    M(ibv_send_wr, wr.atomic.remote_addr);
    M(ibv_send_wr, wr.atomic.compare_add);
    M(ibv_send_wr, wr.atomic.swap);
    M(ibv_send_wr, wr.atomic.rkey);
    M(ibv_send_wr, wr.ud);
    M(ibv_send_wr, wr.ud.ah);
    M(ibv_send_wr, wr.ud.remote_qpn);
    M(ibv_send_wr, wr.ud.remote_qkey);
    M(ibv_send_wr, qp_type);
    M(ibv_send_wr, qp_type.xrc);
    M(ibv_send_wr, qp_type.xrc.remote_srqn);

    S(ibv_wc);
    M(ibv_wc, wr_id);
    M(ibv_wc, status);
    M(ibv_wc, opcode);
    M(ibv_wc, vendor_err);
    M(ibv_wc, byte_len);
    M(ibv_wc, imm_data);
    M(ibv_wc, invalidated_rkey);
    M(ibv_wc, qp_num);
    M(ibv_wc, src_qp);
    M(ibv_wc, wc_flags);
    M(ibv_wc, pkey_index);
    M(ibv_wc, slid);
    M(ibv_wc, sl);
    M(ibv_wc, dlid_path_bits);
    S(ibv_async_event);
    M(ibv_async_event, element);
    M(ibv_async_event, element.cq);
    M(ibv_async_event, element.qp);
    M(ibv_async_event, element.srq);
    M(ibv_async_event, element.wq);
    M(ibv_async_event, element.port_num);
    M(ibv_async_event, event_type);

    return 0;
}
