/*
 * verbs_fake_ops: a test-only stand-in for a libibverbs provider's data-path entry points.
 *
 * It builds a struct ibv_context whose ops.post_send / ops.poll_cq point at the functions below,
 * and ibv_qp / ibv_cq objects that refer to it, so the Java bindings can be driven through the
 * same function-pointer dispatch they use on hardware. post_send walks the work-request chain
 * with the compiler's view of struct ibv_send_wr / ibv_sge and logs what it sees; poll_cq fills
 * struct ibv_wc entries. The Java test compares both sides: a layout or calling mismatch shows.
 *
 * Never shipped; the test build compiles it into target/native/ with
 *   cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -o libverbs_fake_ops.so verbs_fake_ops.c
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

#define MAX_LOG 256

struct logged_wr {
    uint64_t wr_id;
    uint64_t opcode;
    uint64_t send_flags;
    uint64_t num_sge;
    uint64_t sge_addr;
    uint64_t sge_length;
    uint64_t sge_lkey;
    uint64_t remote_addr;
    uint64_t rkey;
    uint64_t qp_num;
};

static struct ibv_context fake_ctx;
static struct ibv_qp fake_qps[4];
static struct ibv_cq fake_cq_obj;
static struct logged_wr log_entries[MAX_LOG];
static int log_count;
static int cq_head;

/* wr_id that makes post_send refuse the request, as a full send queue would. */
#define REFUSE_WR_ID 0xBADull

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
    for (; wr != NULL; wr = wr->next) {
        if (wr->wr_id == REFUSE_WR_ID || log_count == MAX_LOG) {
            *bad_wr = wr;
            return ENOMEM;
        }
        struct logged_wr *e = &log_entries[log_count++];
        e->wr_id = wr->wr_id;
        e->opcode = (uint64_t)wr->opcode;
        e->send_flags = wr->send_flags;
        e->num_sge = (uint64_t)wr->num_sge;
        e->sge_addr = wr->num_sge > 0 ? wr->sg_list[0].addr : 0;
        e->sge_length = wr->num_sge > 0 ? wr->sg_list[0].length : 0;
        e->sge_lkey = wr->num_sge > 0 ? wr->sg_list[0].lkey : 0;
        e->remote_addr = wr->wr.rdma.remote_addr;
        e->rkey = wr->wr.rdma.rkey;
        e->qp_num = qp->qp_num;
    }
    return 0;
}

static int fake_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    int n = 0;
    if (cq != &fake_cq_obj) {
        return -EINVAL;
    }
    while (n < num_entries && cq_head < log_count) {
        struct logged_wr *e = &log_entries[cq_head++];
        memset(&wc[n], 0, sizeof(wc[n]));
        wc[n].wr_id = e->wr_id;
        /* odd wr_ids fail with a remote access error, the rest succeed */
        wc[n].status = (e->wr_id & 1) ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
        wc[n].opcode = e->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
        wc[n].vendor_err = (e->wr_id & 1) ? 0x88 : 0;
        wc[n].byte_len = (uint32_t)e->sge_length;
        wc[n].qp_num = (uint32_t)e->qp_num;
        n++;
    }
    return n;
}

struct ibv_context *fake_context(void)
{
    memset(&fake_ctx, 0, sizeof(fake_ctx));
    fake_ctx.ops.post_send = fake_post_send;
    fake_ctx.ops.poll_cq = fake_poll_cq;
    log_count = 0;
    cq_head = 0;
    return &fake_ctx;
}

struct ibv_qp *fake_qp(int index, uint32_t qp_num)
{
    struct ibv_qp *qp = &fake_qps[index & 3];
    memset(qp, 0, sizeof(*qp));
    qp->context = &fake_ctx;
    qp->qp_num = qp_num;
    qp->state = IBV_QPS_RTS;
    qp->qp_type = IBV_QPT_RC;
    return qp;
}

struct ibv_cq *fake_cq(int cqe)
{
    memset(&fake_cq_obj, 0, sizeof(fake_cq_obj));
    fake_cq_obj.context = &fake_ctx;
    fake_cq_obj.cqe = cqe;
    return &fake_cq_obj;
}

int fake_logged(void)
{
    return log_count;
}

/* field: 0 wr_id, 1 opcode, 2 send_flags, 3 num_sge, 4 sge addr, 5 sge length, 6 sge lkey,
 *        7 remote_addr, 8 rkey, 9 qp_num */
uint64_t fake_log_field(int i, int field)
{
    if (i < 0 || i >= log_count) {
        return UINT64_MAX;
    }
    const struct logged_wr *e = &log_entries[i];
    switch (field) {
    case 0: return e->wr_id;
    case 1: return e->opcode;
    case 2: return e->send_flags;
    case 3: return e->num_sge;
    case 4: return e->sge_addr;
    case 5: return e->sge_length;
    case 6: return e->sge_lkey;
    case 7: return e->remote_addr;
    case 8: return e->rkey;
    case 9: return e->qp_num;
    default: return UINT64_MAX;
    }
}
