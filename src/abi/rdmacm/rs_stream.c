/*
 * rs_stream.c — SOCK_STREAM rsockets over RC, as rdma-core v44's rsocket.c puts them on
 * the wire (rs_proto.h; docs/rsocket.md):
 *
 *   data     RDMA WRITE WITH IMMEDIATE (DATA | length) into the peer's current target
 *            SGE, in chunks of 2 KiB doubling to 64 KiB; inline up to sq_inline bytes
 *   credits  the receiver posts rq_size 0-SGE receives and gives a new credit limit
 *            (SGL | rseq_no + rq_size) when half its buffer is free (writing an rs_sge
 *            for that half into our target SGL) or after rq_size/2 messages
 *   control  0-byte WRITE WITH IMMEDIATE (CTRL | DISCONNECT / SHUTDOWN), at most
 *            RS_QP_CTRL_SIZE in flight; keepalive is a 0-byte plain RDMA WRITE
 *   iomap    rs_iomap entries written into the peer's iomap (IOMAP_SGL | index);
 *            riowrite is a plain RDMA WRITE into the peer's mapped buffer
 *
 * What uroce adds on the receive side (rdma-core trusts its peer): every message is
 * checked against what we advertised — its type, its written length, the receive
 * buffer space and the credits we gave — and a violation, a failed receive, a failed
 * send or a peer that disconnects without saying so resets the socket (RS_ERROR, a
 * TCP errno, QP to ERR and a DREQ), each reason counted (rs_reset_count).  The target
 * SGL and iomap entries the peer writes are used only after the message announcing
 * them has completed (the data is placed before its completion, IBA 9.7.5.1.9?), so
 * a torn entry is never read.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rdmacm_priv.h"
#include "rsocket_priv.h"

#define RS_WR_ID_RECV (1ULL << 63)

_Atomic unsigned long rs_reset_count[RS_RESET_COUNT];

const char *rs_reset_name(enum rs_reset r)
{
	static const char *const names[RS_RESET_COUNT] = {
		[RS_RESET_NONE] = "none",
		[RS_RESET_PEER_GONE] = "peer_gone",
		[RS_RESET_BAD_OPCODE] = "bad_opcode",
		[RS_RESET_BAD_CTRL] = "bad_ctrl",
		[RS_RESET_BAD_LEN] = "bad_len",
		[RS_RESET_DATA_OVERRUN] = "data_overrun",
		[RS_RESET_CREDIT_OVERRUN] = "credit_overrun",
		[RS_RESET_BAD_IOMAP] = "bad_iomap",
		[RS_RESET_NOT_WRITE_IMM] = "not_write_imm",
		[RS_RESET_RECV_ERROR] = "recv_error",
		[RS_RESET_SEND_ERROR] = "send_error",
	};

	return (unsigned)r < RS_RESET_COUNT ? names[r] : "?";
}

#define rs_debug(...) rs_debugf("uroce rsocket", __VA_ARGS__)

/* Whole pages, zeroed: registered memory never shares a page with the heap. */
static void *page_alloc(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	if (page <= 0)
		page = 4096;
	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	if (posix_memalign(&p, (size_t)page, len ? len : (size_t)page))
		return NULL;
	memset(p, 0, len ? len : (size_t)page);
	return p;
}

/* ---- buffers and QP ------------------------------------------------------------------- */

static void set_qp_size(struct rsock *rs)
{
	struct cm_id *cid = cm_id(rs->cm_id);
	uint32_t max = RS_QP_MAX_SIZE;

	if (cid->dev && cid->dev->max_qp_wr > 0 && (uint32_t)cid->dev->max_qp_wr < max)
		max = (uint32_t)cid->dev->max_qp_wr;
	/* Credit and sequence comparisons are 16-bit signed differences. */
	if (max > 0x7FFF)
		max = 0x7FFF;
	if (rs->sq_size > max)
		rs->sq_size = (uint16_t)max;
	else if (rs->sq_size < RS_QP_MIN_SIZE)
		rs->sq_size = RS_QP_MIN_SIZE;
	if (rs->rq_size > max)
		rs->rq_size = (uint16_t)max;
	else if (rs->rq_size < RS_QP_MIN_SIZE)
		rs->rq_size = RS_QP_MIN_SIZE;
}

static int post_recv(struct rsock *rs)
{
	struct ibv_recv_wr wr = { .wr_id = RS_WR_ID_RECV }, *bad;

	/* Everything arrives as RDMA WRITE WITH IMMEDIATE: the receive holds no buffer. */
	return ibv_post_recv(rs->cm_id->qp, &wr, &bad);
}

static int init_bufs(struct rsock *rs)
{
	struct ibv_pd *pd = rs->cm_id->pd;
	size_t tlen;

	rs->rmsg = calloc((size_t)rs->rq_size + 1, sizeof(*rs->rmsg));
	rs->sbuf = page_alloc(rs->sbuf_size + RS_SGE_LEN * RS_QP_CTRL_SIZE);
	if (!rs->rmsg || !rs->sbuf)
		return -ENOMEM;
	rs->smr = ibv_reg_mr(pd, rs->sbuf, rs->sbuf_size + RS_SGE_LEN * RS_QP_CTRL_SIZE,
			     IBV_ACCESS_LOCAL_WRITE);
	if (!rs->smr)
		return errno ? -errno : -ENOMEM;
	tlen = RS_SGE_LEN * RS_SGL_SIZE + (size_t)RS_IOMAP_LEN * rs->target_iomap_size;
	rs->target_buf = page_alloc(tlen);
	if (!rs->target_buf)
		return -ENOMEM;
	rs->target_mr = ibv_reg_mr(pd, rs->target_buf, tlen,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->target_mr)
		return errno ? -errno : -ENOMEM;
	if (rs->target_iomap_size) {
		rs->tiomap = calloc(rs->target_iomap_size, sizeof(*rs->tiomap));
		rs->tiomap_off = calloc(rs->target_iomap_size, sizeof(*rs->tiomap_off));
		rs->tiomap_valid = calloc(rs->target_iomap_size, sizeof(*rs->tiomap_valid));
		if (!rs->tiomap || !rs->tiomap_off || !rs->tiomap_valid)
			return -ENOMEM;
	}
	rs->rbuf = page_alloc(rs->rbuf_size);
	if (!rs->rbuf)
		return -ENOMEM;
	rs->rmr = ibv_reg_mr(pd, rs->rbuf, rs->rbuf_size,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->rmr)
		return errno ? -errno : -ENOMEM;

	rs->sbuf_bytes_avail = rs->sbuf_size;
	rs->sbuf_pos = 0;
	/* The first half is the peer's initial target (data_buf); the second is ours to
	 * hand out with the first credit update. */
	rs->rbuf_free_offset = rs->rbuf_size >> 1;
	rs->rbuf_bytes_avail = rs->rbuf_size >> 1;
	rs->adv_bytes = rs->rbuf_size >> 1;
	rs->rcvd_bytes = 0;
	rs->sqe_avail = rs->sq_size - (int)rs->ctrl_max_seqno;
	rs->rseq_comp = rs->rq_size >> 1;
	rs->credit_limit = rs->rq_size;
	return 0;
}

int rs_create_ep(struct rsock *rs)
{
	struct rdma_cm_id *id = rs->cm_id;
	struct ibv_qp_init_attr attr;
	int ret;

	set_qp_size(rs);
	rs->cq_ch = ibv_create_comp_channel(id->verbs);
	if (!rs->cq_ch)
		return errno ? -errno : -ENOMEM;
	/* Always non-blocking: sleeping is poll(2) on the fd, then a read that may lose a
	 * race to another thread (rs_wait_event). */
	rs_set_nonblock_fd(rs->cq_ch->fd, true);
	rs->cq = ibv_create_cq(id->verbs, rs->sq_size + rs->rq_size, id, rs->cq_ch, 0);
	if (!rs->cq)
		return errno ? -errno : -ENOMEM;
	/* As rsocket.c: the id holds them, so rdma_destroy_qp destroys them. */
	id->recv_cq_channel = id->send_cq_channel = rs->cq_ch;
	id->recv_cq = id->send_cq = rs->cq;

	memset(&attr, 0, sizeof(attr));
	attr.qp_context = rs;
	attr.send_cq = rs->cq;
	attr.recv_cq = rs->cq;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = rs->sq_size;
	attr.cap.max_recv_wr = rs->rq_size;
	attr.cap.max_send_sge = 2;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(id, NULL, &attr))
		return -errno;
	rs->sq_inline = (uint16_t)(attr.cap.max_inline_data > 0xFFFF ? 0xFFFF :
				   attr.cap.max_inline_data);
	ret = init_bufs(rs);
	if (ret)
		return ret;
	for (int i = 0; i < rs->rq_size; i++) {
		ret = post_recv(rs);
		if (ret)
			return -ret;
	}
	return 0;
}

void rs_format_conn(struct rsock *rs, uint8_t out[RS_CONN_DATA_LEN])
{
	struct rs_conn_h c = {
		.version = RS_PROTO_VERSION,
		.flags = RS_CONN_FLAG_IOMAP | (rs_host_is_be() ? RS_CONN_FLAG_NET : 0),
		.credits = rs->rq_size,
		.iomap_scale = rs_value_to_scale(rs->target_iomap_size),
		.target_sgl = { (uintptr_t)rs->target_buf, rs->target_mr->rkey, RS_SGL_SIZE },
		.data_buf = { (uintptr_t)rs->rbuf, rs->rmr->rkey, rs->rbuf_size >> 1 },
	};

	rs_conn_put(out, &c);
}

int rs_save_conn(struct rsock *rs, const void *data, size_t len)
{
	struct rs_conn_h c;
	int ret = rs_conn_check(data, len, &c);

	if (ret)
		return ret;
	rs->remote_sgl = c.target_sgl;
	rs->remote_sge = 1;
	rs->peer_be = c.flags & RS_CONN_FLAG_NET;
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		rs->remote_iomap.addr = c.target_sgl.addr + (uint64_t)RS_SGE_LEN * c.target_sgl.length;
		rs->remote_iomap.length = rs_scale_to_value(c.iomap_scale);
		rs->remote_iomap.key = c.target_sgl.key;
	}
	rs->tsge[0] = c.data_buf;
	rs->tsge_valid[0] = c.data_buf.length != 0;
	rs->tsge_valid[1] = false;
	rs->target_sge = 0;
	rs->sseq_comp = c.credits;
	return 0;
}

/* ---- resets ------------------------------------------------------------------------------ */

void rs_reset_locked(struct rsock *rs, enum rs_reset why, int err)
{
	if (rs->state != RS_CONNECTED)
		return;
	rs->state = RS_ERROR;
	rs->rd_open = rs->wr_open = false;
	rs->err = err;
	rs->reset_reported = false;
	rs->reset = why;
	rs->need_reset = true;
	rs_reset_count[why]++;
	rs_debug("socket %d reset: %s (%s)", rs->index, rs_reset_name(why), strerror(err));
}

/* QP to ERR (its receives flush: a thread asleep on the CQ wakes) and, unless the peer
 * has already disconnected, a DREQ so that the peer learns of the reset. */
static void reset_peer(struct rsock *rs, bool dreq)
{
	struct cm_id *cid = cm_id(rs->cm_id);

	rs->shutting = true;
	ibv_req_notify_cq(rs->cq, 0);
	cm_qp_modify_err(rs->cm_id);
	if (dreq) {
		struct uroce_cm_cmd cmd;
		struct uroce_cm_reply rep;

		memset(&cmd, 0, sizeof(cmd));
		cm_id_call(cid, UROCE_CM_OP_DISCONNECT, &cmd, &rep);
	}
}

void rs_reset_finish(struct rsock *rs)
{
	bool go, dreq;

	pthread_mutex_lock(&rs->cq_lock);
	go = rs->need_reset;
	dreq = rs->reset != RS_RESET_PEER_GONE;
	rs->need_reset = false;
	pthread_mutex_unlock(&rs->cq_lock);
	if (go)
		reset_peer(rs, dreq);
}

static int send_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return ETIMEDOUT;        /* the peer stopped answering: TCP's retransmit timeout */
	default:
		return ECONNRESET;
	}
}

/* ---- completions ---------------------------------------------------------------------- */

static void refresh_tsge(struct rsock *rs)
{
	bool be = rs_host_is_be();

	for (int i = 0; i < RS_SGL_SIZE; i++) {
		struct rs_sge_h s;

		if (rs->tsge_valid[i])
			continue;
		rs_sge_get(rs->target_buf + i * RS_SGE_LEN, &s, be);
		if (s.length) {
			rs->tsge[i] = s;
			rs->tsge_valid[i] = true;
		}
	}
}

/* A message that counts against our credits (DATA, IOMAP_SGL). */
static bool take_credit(struct rsock *rs)
{
	rs->recv_seq++;
	return (int16_t)(rs->credit_limit - rs->recv_seq) >= 0;
}

static void handle_recv(struct rsock *rs, const struct ibv_wc *wc)
{
	uint32_t msg, data;

	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_WR_FLUSH_ERR && (rs->shutting || rs->state != RS_CONNECTED))
			return;
		rs_reset_locked(rs, RS_RESET_RECV_ERROR, ECONNRESET);
		return;
	}
	if (rs->state != RS_CONNECTED)
		return;      /* after a DISCONNECT or a reset: nothing more is due */
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		rs_reset_locked(rs, RS_RESET_NOT_WRITE_IMM, ECONNRESET);
		return;
	}
	msg = be32toh(wc->imm_data);
	data = rs_msg_data(msg);
	switch (rs_msg_op(msg)) {
	case RS_OP_DATA:
		if (!data || wc->byte_len != data) {
			rs_reset_locked(rs, RS_RESET_BAD_LEN, ECONNRESET);
			return;
		}
		if (!take_credit(rs)) {
			rs_reset_locked(rs, RS_RESET_CREDIT_OVERRUN, ECONNRESET);
			return;
		}
		if (rs->rcvd_bytes + data > rs->adv_bytes) {
			rs_reset_locked(rs, RS_RESET_DATA_OVERRUN, ECONNRESET);
			return;
		}
		rs->rcvd_bytes += data;
		rs->rmsg[rs->rmsg_tail].len = data;
		if (++rs->rmsg_tail == rs->rq_size + 1)
			rs->rmsg_tail = 0;
		break;
	case RS_OP_SGL:
		if (wc->byte_len != 0 && wc->byte_len != RS_SGE_LEN) {
			rs_reset_locked(rs, RS_RESET_BAD_LEN, ECONNRESET);
			return;
		}
		rs->sseq_comp = (uint16_t)data;
		if (wc->byte_len)
			refresh_tsge(rs);
		break;
	case RS_OP_IOMAP_SGL:
		if (wc->byte_len != RS_IOMAP_LEN) {
			rs_reset_locked(rs, RS_RESET_BAD_LEN, ECONNRESET);
			return;
		}
		if (data >= rs->target_iomap_size) {
			rs_reset_locked(rs, RS_RESET_BAD_IOMAP, ECONNRESET);
			return;
		}
		if (!take_credit(rs)) {
			rs_reset_locked(rs, RS_RESET_CREDIT_OVERRUN, ECONNRESET);
			return;
		}
		rs_iomap_get(rs->target_buf + RS_SGE_LEN * RS_SGL_SIZE + (size_t)RS_IOMAP_LEN * data,
			     &rs->tiomap_off[data], &rs->tiomap[data], rs_host_is_be());
		rs->tiomap_valid[data] = rs->tiomap[data].length != 0;
		break;
	case RS_OP_CTRL:
		if (wc->byte_len) {
			rs_reset_locked(rs, RS_RESET_BAD_LEN, ECONNRESET);
			return;
		}
		switch (data) {
		case RS_CTRL_DISCONNECT:
			rs->peer_closing = true;
			rs->state = RS_DISCONNECTED;
			break;
		case RS_CTRL_SHUTDOWN:
			rs->peer_closing = true;
			if (rs->wr_open)
				rs->rd_open = false;
			else
				rs->state = RS_DISCONNECTED;
			break;
		case RS_CTRL_KEEPALIVE:
			break;
		default:
			rs_reset_locked(rs, RS_RESET_BAD_CTRL, ECONNRESET);
			return;
		}
		break;
	default:
		/* RS_OP_WRITE never leaves the sender; 1, 3 and 5 are reserved. */
		rs_reset_locked(rs, RS_RESET_BAD_OPCODE, ECONNRESET);
		return;
	}
}

static void handle_send(struct rsock *rs, const struct ibv_wc *wc)
{
	uint32_t msg = (uint32_t)wc->wr_id;

	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		rs->ctrl_max_seqno++;
		break;
	case RS_OP_CTRL:
		rs->ctrl_max_seqno++;
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT && rs->state == RS_CONNECTED)
			rs->state = RS_DISCONNECTED;
		break;
	case RS_OP_IOMAP_SGL:
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += RS_IOMAP_LEN;
		break;
	default:
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += rs_msg_data(msg);
		break;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_WR_FLUSH_ERR && rs->shutting)
			return;
		rs_reset_locked(rs, RS_RESET_SEND_ERROR, send_errno(wc->status));
	}
}

/* Drain the CQ (cq_lock held); reposts a receive for each one consumed. */
static void poll_cq_locked(struct rsock *rs)
{
	struct ibv_wc wc[16];
	int n, rcnt = 0;

	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & RS_WR_ID_RECV) {
				if (wc[i].status == IBV_WC_SUCCESS)
					rcnt++;
				handle_recv(rs, &wc[i]);
			} else {
				handle_send(rs, &wc[i]);
			}
		}
	}
	if (rs->state == RS_CONNECTED) {
		while (rcnt--) {
			int ret = post_recv(rs);

			if (ret) {
				rs_reset_locked(rs, RS_RESET_RECV_ERROR, ret > 0 ? ret : ECONNRESET);
				break;
			}
		}
	}
}

/* ---- control messages ------------------------------------------------------------------ */

static int post_msg(struct rsock *rs, uint32_t msg)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(msg);
	/* A 0-byte WRITE: the responder checks no R_Key (IBA 9.7.5.1.6). */
	return ibv_post_send(rs->cm_id->qp, &wr, &bad);
}

static int post_write(struct rsock *rs, struct ibv_sge *sgl, int nsge, uint32_t wr_data,
		      int flags, uint64_t addr, uint32_t rkey, bool imm)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_data;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = flags;
	if (imm)
		wr.imm_data = htobe32(wr_data);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(rs->cm_id->qp, &wr, &bad);
}

static bool ctrl_avail(struct rsock *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

static bool give_credits(struct rsock *rs)
{
	return (rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1) ||
		(int16_t)(rs->rseq_no - rs->rseq_comp) >= 0) &&
	       ctrl_avail(rs) && rs->state == RS_CONNECTED;
}

static void send_credits(struct rsock *rs)
{
	uint32_t limit = (uint32_t)rs->rseq_no + rs->rq_size;
	int ret;

	rs->ctrl_seqno++;
	rs->rseq_comp = rs->rseq_no + (rs->rq_size >> 1);
	if (rs->rbuf_bytes_avail >= (rs->rbuf_size >> 1)) {
		struct rs_sge_h s = {
			.addr = (uintptr_t)&rs->rbuf[rs->rbuf_free_offset],
			.key = rs->rmr->rkey,
			.length = rs->rbuf_size >> 1,
		};
		uint8_t inl[RS_SGE_LEN];
		struct ibv_sge sge;
		int flags;

		/* In the reader's byte order (rs_proto.h). */
		if (rs->sq_inline >= RS_SGE_LEN) {
			rs_sge_put(inl, &s, rs->peer_be);
			sge.addr = (uintptr_t)inl;
			sge.lkey = 0;
			flags = IBV_SEND_INLINE;
		} else {
			uint8_t *slot = rs->sbuf + rs->sbuf_size +
					RS_SGE_LEN * (rs->ctrl_seqno & (RS_QP_CTRL_SIZE - 1));

			rs_sge_put(slot, &s, rs->peer_be);
			sge.addr = (uintptr_t)slot;
			sge.lkey = rs->smr->lkey;
			flags = 0;
		}
		sge.length = RS_SGE_LEN;
		ret = post_write(rs, &sge, 1, rs_msg(RS_OP_SGL, limit), flags,
				 rs->remote_sgl.addr + (uint64_t)rs->remote_sge * RS_SGE_LEN,
				 rs->remote_sgl.key, true);
		rs->rbuf_bytes_avail -= rs->rbuf_size >> 1;
		rs->adv_bytes += rs->rbuf_size >> 1;
		rs->rbuf_free_offset += rs->rbuf_size >> 1;
		if (rs->rbuf_free_offset >= rs->rbuf_size)
			rs->rbuf_free_offset = 0;
		if (++rs->remote_sge == (int)rs->remote_sgl.length)
			rs->remote_sge = 0;
	} else {
		ret = post_msg(rs, rs_msg(RS_OP_SGL, limit));
	}
	rs->credit_limit = (uint16_t)limit;
	if (ret)
		rs_reset_locked(rs, RS_RESET_SEND_ERROR, ECONNRESET);
}

static void update_credits(struct rsock *rs)
{
	if (give_credits(rs))
		send_credits(rs);
}

/* ---- tests for the waits ------------------------------------------------------------------ */

bool rs_can_send(struct rsock *rs)
{
	return rs->sqe_avail > 0 && rs->sbuf_bytes_avail >= RS_SNDLOWAT &&
	       rs->sseq_no != rs->sseq_comp && rs->tsge_valid[rs->target_sge] &&
	       rs->tsge[rs->target_sge].length != 0;
}

static bool writable(struct rsock *rs)
{
	return rs->state == RS_CONNECTED && rs->wr_open;
}

static bool readable(struct rsock *rs)
{
	return rs->state == RS_CONNECTED && rs->rd_open;
}

bool rs_conn_can_send(struct rsock *rs)
{
	return rs_can_send(rs) || !writable(rs);
}

bool rs_have_rdata(struct rsock *rs)
{
	return rs->rmsg_head != rs->rmsg_tail;
}

bool rs_conn_have_rdata(struct rsock *rs)
{
	return rs_have_rdata(rs) || !readable(rs);
}

static bool conn_can_send_ctrl(struct rsock *rs)
{
	return ctrl_avail(rs) || rs->state != RS_CONNECTED;
}

bool rs_all_sends_done(struct rsock *rs)
{
	return ((int)rs->ctrl_max_seqno - (int)rs->ctrl_seqno) + rs->sqe_avail == rs->sq_size ||
	       rs->state != RS_CONNECTED;
}

bool rs_is_cq_armed(struct rsock *rs)
{
	return atomic_load(&rs->cq_armed);
}

bool rs_poll_all(struct rsock *rs)
{
	(void)rs;
	return true;
}

/* ---- waiting ------------------------------------------------------------------------------ */

static void ack_events(struct rsock *rs, bool all)
{
	if (rs->unack_cqe && (all || rs->unack_cqe >= (unsigned)rs->sq_size + rs->rq_size)) {
		ibv_ack_cq_events(rs->cq, rs->unack_cqe);
		rs->unack_cqe = 0;
	}
}

/* One completion event (cq_wait_lock held): 1 taken, 0 none (yet), -errno. */
static int get_event(struct rsock *rs, int timeout_ms)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!atomic_load(&rs->cq_armed))
		return 1;        /* another thread took it: the CQ is worth polling */
	if (timeout_ms) {
		struct pollfd p = { .fd = rs->cq_ch->fd, .events = POLLIN };
		int r = poll(&p, 1, timeout_ms);

		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
	}
	if (ibv_get_cq_event(rs->cq_ch, &cq, &ctx)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -errno;
	}
	atomic_store(&rs->cq_armed, 0);
	rs->unack_cqe++;
	ack_events(rs, false);
	return 1;
}

void rs_take_cq_event(struct rsock *rs)
{
	pthread_mutex_lock(&rs->cq_wait_lock);
	get_event(rs, 0);
	pthread_mutex_unlock(&rs->cq_wait_lock);
}

static int64_t now_ms(void)
{
	return (int64_t)(rs_now_us() / 1000);
}

/*
 * Process completions until test(rs): 0; -EWOULDBLOCK (timeout_ms 0), -ETIMEDOUT (the
 * bound ran out), -EINTR, -errno.  timeout_ms < 0 waits for ever.  As rsocket.c: poll,
 * arm the CQ, poll again, then sleep on the channel (one thread at a time; the others
 * wait for it on cq_wait_lock and then poll again).
 */
static int process_cq_to(struct rsock *rs, int timeout_ms, bool (*test)(struct rsock *rs))
{
	int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
	int ret = 0;

	pthread_mutex_lock(&rs->cq_lock);
	for (;;) {
		update_credits(rs);
		poll_cq_locked(rs);
		if (test(rs)) {
			ret = 0;
			break;
		}
		if (!timeout_ms) {
			ret = -EWOULDBLOCK;
			break;
		}
		if (!atomic_load(&rs->cq_armed)) {
			ibv_req_notify_cq(rs->cq, 0);
			atomic_store(&rs->cq_armed, 1);
			continue;
		}
		update_credits(rs);
		pthread_mutex_unlock(&rs->cq_lock);
		pthread_mutex_lock(&rs->cq_wait_lock);
		if (timeout_ms > 0) {
			int64_t left = deadline - now_ms();

			ret = left > 0 ? get_event(rs, (int)left) : -ETIMEDOUT;
			if (ret == 0 && now_ms() >= deadline)
				ret = -ETIMEDOUT;
		} else {
			ret = get_event(rs, -1);
		}
		pthread_mutex_unlock(&rs->cq_wait_lock);
		pthread_mutex_lock(&rs->cq_lock);
		if (ret < 0)
			break;
	}
	update_credits(rs);
	pthread_mutex_unlock(&rs->cq_lock);
	rs_reset_finish(rs);
	return ret;
}

int rs_process_cq(struct rsock *rs, bool nonblock, bool (*test)(struct rsock *rs))
{
	int ret = process_cq_to(rs, nonblock ? 0 : -1, test);

	return ret ? cm_err(ret) : 0;
}

/* rsocket.c's rs_get_comp: poll without sleeping for polling_time us, then block. */
int rs_get_comp(struct rsock *rs, bool nonblock, bool (*test)(struct rsock *rs))
{
	uint64_t start = 0;
	int ret;

	do {
		ret = process_cq_to(rs, 0, test);
		if (!ret)
			return 0;
		if (nonblock || ret != -EWOULDBLOCK)
			return cm_err(ret);
		if (!start)
			start = rs_now_us();
	} while (rs_now_us() - start <= rs_polling_time_us);
	return rs_process_cq(rs, false, test);
}

/* ---- errors the calls return ------------------------------------------------------------- */

/* The pending error of a reset, once (then TCP's later answers: EOF / EPIPE). */
static int take_err(struct rsock *rs)
{
	int e = 0;

	pthread_mutex_lock(&rs->cq_lock);
	if (rs->err && !rs->reset_reported) {
		e = rs->err;
		rs->reset_reported = true;
		rs->err = 0;
	}
	pthread_mutex_unlock(&rs->cq_lock);
	return e;
}

/* Why a send cannot go (a state other than CONNECTED and writable). */
static int send_err(struct rsock *rs)
{
	int e;

	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
	case RS_LISTENING:
		return ENOTCONN;
	case RS_CONNECT_ERROR:
		e = take_err(rs);
		return e ? e : ENOTCONN;
	case RS_ERROR:
		e = take_err(rs);
		return e ? e : EPIPE;
	default:
		return EPIPE;            /* shut down for writing, or the peer disconnected */
	}
}

/* ---- sending ------------------------------------------------------------------------------ */

static void copy_from_iov(uint8_t *dst, const struct iovec **iov, size_t *off, size_t len)
{
	while (len) {
		size_t n = (*iov)->iov_len - *off;

		if (n > len)
			n = len;
		memcpy(dst, (const uint8_t *)(*iov)->iov_base + *off, n);
		dst += n;
		len -= n;
		*off += n;
		if (*off == (*iov)->iov_len) {
			(*iov)++;
			*off = 0;
		}
	}
}

/* Room at the end of the send ring. */
static uint32_t sbuf_left(struct rsock *rs)
{
	return rs->sbuf_size - rs->sbuf_pos;
}

/*
 * Post `len` bytes (the next bytes of iov/off) as one message (DATA write to the
 * target SGE, direct write for riowrite, IOMAP entry).  The reservation was made
 * under cq_lock by the caller; here the bytes go into the send ring (or inline) and
 * the WR is posted.
 */
static int post_chunk(struct rsock *rs, const struct iovec **iov, size_t *off, uint32_t len,
		      uint32_t wr_data, uint64_t addr, uint32_t rkey, bool imm)
{
	struct ibv_sge sgl[2];
	int nsge, flags = 0;

	if ((*iov)->iov_len - *off >= len && len <= rs->sq_inline) {
		/* Inline straight from the caller's buffer. */
		sgl[0].addr = (uintptr_t)(*iov)->iov_base + *off;
		sgl[0].length = len;
		sgl[0].lkey = 0;
		nsge = 1;
		flags = IBV_SEND_INLINE;
		*off += len;
		if (*off == (*iov)->iov_len) {
			(*iov)++;
			*off = 0;
		}
	} else if (len <= sbuf_left(rs)) {
		copy_from_iov(rs->sbuf + rs->sbuf_pos, iov, off, len);
		sgl[0].addr = (uintptr_t)rs->sbuf + rs->sbuf_pos;
		sgl[0].length = len;
		sgl[0].lkey = rs->smr->lkey;
		nsge = 1;
		rs->sbuf_pos += len;
		if (rs->sbuf_pos == rs->sbuf_size)
			rs->sbuf_pos = 0;
		if (len <= rs->sq_inline)
			flags = IBV_SEND_INLINE;
	} else {
		uint32_t first = sbuf_left(rs);

		copy_from_iov(rs->sbuf + rs->sbuf_pos, iov, off, first);
		copy_from_iov(rs->sbuf, iov, off, len - first);
		sgl[0].addr = (uintptr_t)rs->sbuf + rs->sbuf_pos;
		sgl[0].length = first;
		sgl[0].lkey = rs->smr->lkey;
		sgl[1].addr = (uintptr_t)rs->sbuf;
		sgl[1].length = len - first;
		sgl[1].lkey = rs->smr->lkey;
		nsge = 2;
		rs->sbuf_pos = len - first;
		if (len <= rs->sq_inline)
			flags = IBV_SEND_INLINE;
	}
	return post_write(rs, sgl, nsge, wr_data, flags, addr, rkey, imm);
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;

	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

static bool nonblocking(struct rsock *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* Wait (cq_lock not held) until a message can be posted: 0, or -errno. */
static int wait_send(struct rsock *rs, int flags)
{
	bool ok;

	pthread_mutex_lock(&rs->cq_lock);
	ok = writable(rs) && rs_can_send(rs);
	pthread_mutex_unlock(&rs->cq_lock);
	if (ok)
		return 0;
	if (rs_get_comp(rs, nonblocking(rs, flags), rs_conn_can_send))
		return -errno;
	pthread_mutex_lock(&rs->cq_lock);
	ok = writable(rs);
	pthread_mutex_unlock(&rs->cq_lock);
	return ok ? 0 : -send_err(rs);
}

static int send_iomaps(struct rsock *rs, int flags);

ssize_t rs_send_stream(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	size_t total = iov_total(iov, iovcnt), left = total, off = 0;
	uint32_t olen = RS_OLAP_START_SIZE;
	int ret = 0;

	if (rs_opening(rs->state)) {
		if (rs_do_connect(rs)) {
			if (errno == EINPROGRESS)
				errno = EAGAIN;
			return -1;
		}
	}
	if (!writable(rs))
		return cm_err(-send_err(rs));
	pthread_mutex_lock(&rs->slock);
	if (rs->iomap_pending) {
		ret = send_iomaps(rs, flags);
		if (ret)
			goto out;
	}
	while (left) {
		uint32_t xfer;
		uint64_t addr;
		uint32_t rkey;
		struct rs_sge_h *t;

		ret = wait_send(rs, flags);
		if (ret)
			break;
		pthread_mutex_lock(&rs->cq_lock);
		if (!writable(rs) || !rs_can_send(rs)) {
			pthread_mutex_unlock(&rs->cq_lock);
			continue;        /* a completion changed things: wait again */
		}
		xfer = olen < left ? olen : (uint32_t)left;
		if (olen < left && olen < RS_MAX_TRANSFER)
			olen <<= 1;
		t = &rs->tsge[rs->target_sge];
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > t->length)
			xfer = t->length;
		/* Take the target before posting: the peer may rewrite the entry once it has
		 * seen this data (rsocket.c's rs_write_data). */
		rs->sseq_no++;
		rs->sqe_avail--;
		rs->sbuf_bytes_avail -= xfer;
		addr = t->addr;
		rkey = t->key;
		t->addr += xfer;
		t->length -= xfer;
		if (!t->length) {
			/* Used up: zero it where the peer writes its replacement, which it does
			 * only after this data has arrived. */
			rs->tsge_valid[rs->target_sge] = false;
			memset(rs->target_buf + rs->target_sge * RS_SGE_LEN + 12, 0, 4);
			if (++rs->target_sge == RS_SGL_SIZE)
				rs->target_sge = 0;
		}
		pthread_mutex_unlock(&rs->cq_lock);
		ret = post_chunk(rs, &iov, &off, xfer, rs_msg(RS_OP_DATA, xfer), addr, rkey, true);
		if (ret) {
			pthread_mutex_lock(&rs->cq_lock);
			rs_reset_locked(rs, RS_RESET_SEND_ERROR, ECONNRESET);
			pthread_mutex_unlock(&rs->cq_lock);
			rs_reset_finish(rs);
			ret = -ECONNRESET;
			break;
		}
		left -= xfer;
	}
out:
	pthread_mutex_unlock(&rs->slock);
	if (ret && left == total)
		return cm_err(ret);
	return (ssize_t)(total - left);
}

/* ---- receiving ---------------------------------------------------------------------------- */

/* Copy up to len bytes of the queued messages (rlock held); consume unless peek. */
static size_t copy_out(struct rsock *rs, uint8_t *buf, size_t len, bool peek)
{
	size_t done = 0;
	int head;
	uint32_t off;

	pthread_mutex_lock(&rs->cq_lock);
	head = rs->rmsg_head;
	off = rs->rbuf_offset;
	while (done < len && head != rs->rmsg_tail) {
		uint32_t n = rs->rmsg[head].len, end = rs->rbuf_size - off;
		bool whole = true;

		if (n > len - done) {
			n = (uint32_t)(len - done);
			whole = false;
		}
		if (n > end) {
			memcpy(buf + done, rs->rbuf + off, end);
			memcpy(buf + done + end, rs->rbuf, n - end);
			off = n - end;
		} else {
			memcpy(buf + done, rs->rbuf + off, n);
			off += n;
			if (off == rs->rbuf_size)
				off = 0;
		}
		done += n;
		if (!peek) {
			rs->rbuf_bytes_avail += n;
			if (whole) {
				rs->rseq_no++;
				if (++rs->rmsg_head == rs->rq_size + 1)
					rs->rmsg_head = 0;
			} else {
				rs->rmsg[head].len -= n;
			}
			rs->rbuf_offset = off;
			head = rs->rmsg_head;
		} else if (whole) {
			if (++head == rs->rq_size + 1)
				head = 0;
		}
	}
	/* Hand back buffer space now rather than at the next empty receive. */
	if (!peek && done)
		update_credits(rs);
	pthread_mutex_unlock(&rs->cq_lock);
	return done;
}

/* Continue to deliver queued data after the peer disconnected, as rsocket.c. */
ssize_t rs_recv_stream(struct rsock *rs, void *buf, size_t len, int flags)
{
	size_t left = len;
	int ret = 0;

	if (rs_opening(rs->state)) {
		if (rs_do_connect(rs)) {
			if (errno == EINPROGRESS)
				errno = EAGAIN;
			return -1;
		}
	}
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
	case RS_LISTENING:
		return cm_err(-ENOTCONN);
	case RS_CONNECT_ERROR: {
		int e = take_err(rs);

		return cm_err(e ? -e : -ENOTCONN);
	}
	default:
		break;
	}
	if (!len)
		return 0;
	pthread_mutex_lock(&rs->rlock);
	do {
		size_t n;
		bool have;

		pthread_mutex_lock(&rs->cq_lock);
		have = rs_have_rdata(rs);
		pthread_mutex_unlock(&rs->cq_lock);
		if (!have) {
			ret = rs_get_comp(rs, nonblocking(rs, flags), rs_conn_have_rdata);
			if (ret) {
				ret = -errno;
				break;
			}
		}
		n = copy_out(rs, (uint8_t *)buf + (len - left), left, flags & MSG_PEEK);
		left -= n;
		rs_reset_finish(rs);
		if (!n)
			break;           /* end of stream (or reset): nothing more will come */
		if (flags & MSG_PEEK)
			break;
	} while (left && (flags & MSG_WAITALL));
	pthread_mutex_unlock(&rs->rlock);
	if (left == len) {
		int e;

		if (ret)
			return cm_err(ret);
		e = rs->state == RS_ERROR ? take_err(rs) : 0;
		if (e)
			return cm_err(-e);
		return 0;
	}
	return (ssize_t)(len - left);
}

short rs_poll_revents(struct rsock *rs, short events)
{
	short rev = 0;

	pthread_mutex_lock(&rs->cq_lock);
	switch (rs->state) {
	case RS_CONNECTED:
		if ((events & POLLIN) && rs_conn_have_rdata(rs))
			rev |= POLLIN;
		if ((events & POLLOUT) && (rs_can_send(rs) || !rs->wr_open))
			rev |= POLLOUT;
		break;
	case RS_DISCONNECTED:
		/* POLLHUP once the data that came before the peer's DISCONNECT has been read
		 * (rsocket.c sets it at once): until then the socket is readable as a TCP
		 * socket after a FIN is, and programs that treat POLLHUP as the end (rstream's
		 * do_poll) do not lose the last bytes to a DISCONNECT that arrived with them. */
		rev = events & (POLLIN | POLLOUT);
		if (!rs_have_rdata(rs))
			rev |= POLLHUP;
		break;
	case RS_ERROR:
		rev = (events & (POLLIN | POLLOUT)) | POLLERR | POLLHUP;
		break;
	case RS_CONNECT_ERROR:
		rev = (events & (POLLIN | POLLOUT)) | POLLERR;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&rs->cq_lock);
	return rev;
}

/* ---- shutdown ------------------------------------------------------------------------------ */

/*
 * rsocket.c's rshutdown: SHUT_RDWR sends CTRL DISCONNECT, SHUT_WR SHUTDOWN (or
 * DISCONNECT when already closed for reading), SHUT_RD only a DISCONNECT when
 * already closed for writing; then it waits for every send to finish.  uroce bounds
 * both waits by wait_ms (a peer that stopped receiving must not hang a close).
 */
int rs_shutdown_stream(struct rsock *rs, int how, int wait_ms)
{
	int ctrl = -1, ret = 0;
	bool disc;

	pthread_mutex_lock(&rs->cq_lock);
	if (rs->state == RS_CONNECTED) {
		if (how == SHUT_RDWR) {
			ctrl = RS_CTRL_DISCONNECT;
			rs->rd_open = rs->wr_open = false;
		} else if (how == SHUT_WR) {
			rs->wr_open = false;
			ctrl = rs->rd_open ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
		} else {
			rs->rd_open = false;
			if (!rs->wr_open)
				ctrl = RS_CTRL_DISCONNECT;
		}
	}
	pthread_mutex_unlock(&rs->cq_lock);
	if (ctrl >= 0) {
		ret = process_cq_to(rs, wait_ms, conn_can_send_ctrl);
		pthread_mutex_lock(&rs->cq_lock);
		if (!ret && rs->state == RS_CONNECTED && ctrl_avail(rs)) {
			rs->ctrl_seqno++;
			if (post_msg(rs, rs_msg(RS_OP_CTRL, (uint32_t)ctrl)))
				rs_reset_locked(rs, RS_RESET_SEND_ERROR, ECONNRESET);
		}
		pthread_mutex_unlock(&rs->cq_lock);
		if (!ret && rs->state == RS_CONNECTED)
			ret = process_cq_to(rs, wait_ms, rs_all_sends_done);
	}
	pthread_mutex_lock(&rs->cq_lock);
	disc = rs->state == RS_DISCONNECTED;
	if (disc)
		rs->shutting = true;
	pthread_mutex_unlock(&rs->cq_lock);
	if (disc) {
		/* Flush the receives so that anyone asleep on the CQ wakes (rsocket.c). */
		ibv_req_notify_cq(rs->cq, 0);
		cm_qp_modify_err(rs->cm_id);
	}
	rs_reset_finish(rs);
	if (ret == -ETIMEDOUT || ret == -EWOULDBLOCK)
		ret = 0;         /* gave up waiting: the close goes on (the DREQ follows) */
	return ret;
}

/* The service thread's keepalive: a 0-byte RDMA WRITE, which the peer's responder
 * acknowledges without a receive; a dead peer shows as a failed send. */
void rs_send_keepalive(struct rsock *rs)
{
	pthread_mutex_lock(&rs->cq_lock);
	if (ctrl_avail(rs) && rs->state == RS_CONNECTED) {
		rs->ctrl_seqno++;
		if (post_write(rs, NULL, 0, rs_msg(RS_OP_CTRL, RS_CTRL_KEEPALIVE), 0, 0, 0, false))
			rs_reset_locked(rs, RS_RESET_SEND_ERROR, ECONNRESET);
	}
	pthread_mutex_unlock(&rs->cq_lock);
	rs_reset_finish(rs);
}

/* The CM's DISCONNECTED (a DREQ from the peer, or the peer's daemon for a process that
 * died): an orderly end if the peer said DISCONNECT or SHUTDOWN first, a reset
 * otherwise.  Either way the QP goes to ERR so that sleepers wake. */
void rs_cm_disconnected(struct rsock *rs)
{
	bool flush;

	pthread_mutex_lock(&rs->cq_lock);
	poll_cq_locked(rs);      /* what the peer said before it went */
	if (rs->state == RS_CONNECTED) {
		if (rs->peer_closing) {
			rs->state = RS_DISCONNECTED;
		} else {
			rs_reset_locked(rs, RS_RESET_PEER_GONE, ECONNRESET);
			rs->need_reset = false;   /* the CM connection is gone already */
		}
	}
	flush = !rs->shutting && rs->cm_id->qp;
	rs->shutting = true;
	pthread_mutex_unlock(&rs->cq_lock);
	if (flush) {
		ibv_req_notify_cq(rs->cq, 0);
		cm_qp_modify_err(rs->cm_id);
	}
}

/* ---- iomap -------------------------------------------------------------------------------- */

static struct rs_iomap_mr *get_iomap_slot(struct rsock *rs)
{
	if (!rs->remote_iomappings) {
		if (!rs->remote_iomap.length)
			return NULL;
		rs->remote_iomappings = calloc(rs->remote_iomap.length, sizeof(*rs->remote_iomappings));
		if (!rs->remote_iomappings)
			return NULL;
		for (uint32_t i = 0; i < rs->remote_iomap.length; i++)
			rs->remote_iomappings[i].index = (int)i;
	}
	for (uint32_t i = 0; i < rs->remote_iomap.length; i++)
		if (!rs->remote_iomappings[i].mr)
			return &rs->remote_iomappings[i];
	return NULL;
}

static void list_push_tail(struct rs_iomap_mr **head, struct rs_iomap_mr *m)
{
	m->next = NULL;
	while (*head)
		head = &(*head)->next;
	*head = m;
}

static bool list_remove(struct rs_iomap_mr **head, struct rs_iomap_mr *m)
{
	for (; *head; head = &(*head)->next) {
		if (*head == m) {
			*head = m->next;
			m->next = NULL;
			return true;
		}
	}
	return false;
}

/* Send the queued iomap entries (slock held): WRITE WITH IMMEDIATE (IOMAP_SGL | index)
 * of a 24-byte rs_iomap into the peer's iomap, in the peer's byte order. */
static int send_iomaps(struct rsock *rs, int flags)
{
	int ret = 0;

	pthread_mutex_lock(&rs->map_lock);
	while (rs->iomap_queue) {
		struct rs_iomap_mr *m = rs->iomap_queue;
		struct rs_sge_h s;
		uint8_t ent[RS_IOMAP_LEN];
		struct iovec v = { ent, sizeof(ent) };
		const struct iovec *vp = &v;
		size_t off = 0;
		uint64_t addr;

		ret = wait_send(rs, flags);
		if (ret)
			break;
		s.addr = (uintptr_t)m->mr->addr;
		s.key = m->mr->rkey;
		s.length = (uint32_t)m->mr->length;
		rs_iomap_put(ent, m->offset, &s, rs->peer_be);
		pthread_mutex_lock(&rs->cq_lock);
		rs->sseq_no++;
		rs->sqe_avail--;
		rs->sbuf_bytes_avail -= RS_IOMAP_LEN;
		pthread_mutex_unlock(&rs->cq_lock);
		addr = rs->remote_iomap.addr + (uint64_t)m->index * RS_IOMAP_LEN;
		/* post_chunk inlines from `ent` when it may; else the ring holds a copy. */
		ret = post_chunk(rs, &vp, &off, RS_IOMAP_LEN,
				 rs_msg(RS_OP_IOMAP_SGL, (uint32_t)m->index), addr,
				 rs->remote_iomap.key, true);
		rs->iomap_queue = m->next;
		m->queued = false;
		list_push_tail(&rs->iomap_list, m);
		if (ret) {
			ret = -ECONNRESET;
			break;
		}
	}
	rs->iomap_pending = rs->iomap_queue != NULL;
	pthread_mutex_unlock(&rs->map_lock);
	return ret;
}

UROCE_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsock *rs = rs_lookup(socket);
	struct rs_iomap_mr *m;
	int access = IBV_ACCESS_LOCAL_WRITE;

	(void)flags;
	if (!rs)
		return cm_err(-EBADF);
	if (rs->type != SOCK_STREAM || !rs->cm_id || !rs->cm_id->pd ||
	    (prot & ~(PROT_WRITE | PROT_NONE)))
		return cm_err(-EINVAL);
	pthread_mutex_lock(&rs->map_lock);
	if (prot & PROT_WRITE) {
		m = get_iomap_slot(rs);
		access |= IBV_ACCESS_REMOTE_WRITE;
	} else {
		m = calloc(1, sizeof(*m));
		if (m)
			m->index = -1;
	}
	if (!m) {
		pthread_mutex_unlock(&rs->map_lock);
		return cm_err(-ENOMEM);
	}
	m->mr = ibv_reg_mr(rs->cm_id->pd, buf, len, access);
	if (!m->mr) {
		int e = errno ? errno : ENOMEM;

		if (m->index < 0)
			free(m);
		pthread_mutex_unlock(&rs->map_lock);
		return cm_err(-e);
	}
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	m->refcnt = 1;
	if (m->index >= 0) {
		m->queued = true;
		list_push_tail(&rs->iomap_queue, m);
		rs->iomap_pending = true;
	} else {
		list_push_tail(&rs->iomap_list, m);
	}
	pthread_mutex_unlock(&rs->map_lock);
	return offset;
}

static void release_iomap(struct rs_iomap_mr *m)
{
	if (--m->refcnt)
		return;
	ibv_dereg_mr(m->mr);
	m->mr = NULL;
	if (m->index < 0)
		free(m);
}

UROCE_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = rs_lookup(socket);
	struct rs_iomap_mr **lists[2], *m;

	if (!rs)
		return cm_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return cm_err(-EINVAL);
	lists[0] = &rs->iomap_list;
	lists[1] = &rs->iomap_queue;
	pthread_mutex_lock(&rs->map_lock);
	for (int l = 0; l < 2; l++) {
		for (m = *lists[l]; m; m = m->next) {
			if (m->mr && m->mr->addr == buf && m->mr->length == len) {
				list_remove(lists[l], m);
				release_iomap(m);
				rs->iomap_pending = rs->iomap_queue != NULL;
				pthread_mutex_unlock(&rs->map_lock);
				return 0;
			}
		}
	}
	pthread_mutex_unlock(&rs->map_lock);
	return cm_err(-EINVAL);
}

/* The peer's iomap entry that holds `offset` (cq_lock held), -1 if none. */
static int find_iomap(struct rsock *rs, uint64_t offset)
{
	for (int i = 0; i < rs->target_iomap_size; i++) {
		if (rs->tiomap_valid[i] && offset >= rs->tiomap_off[i] &&
		    offset - rs->tiomap_off[i] < rs->tiomap[i].length)
			return i;
	}
	return -1;
}

UROCE_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = rs_lookup(socket);
	struct iovec v = { (void *)buf, count };
	const struct iovec *vp = &v;
	size_t left = count, off = 0;
	uint32_t olen = RS_OLAP_START_SIZE;
	uint64_t pos = (uint64_t)offset;
	int ret = 0;

	if (!rs) {
		errno = EBADF;
		return (size_t)-1;
	}
	if (rs->type != SOCK_STREAM) {
		errno = EINVAL;
		return (size_t)-1;
	}
	if (!writable(rs)) {
		errno = send_err(rs);
		return (size_t)-1;
	}
	pthread_mutex_lock(&rs->slock);
	if (rs->iomap_pending) {
		ret = send_iomaps(rs, flags);
		if (ret)
			goto out;
	}
	while (left) {
		uint32_t xfer;
		uint64_t addr, end;
		uint32_t rkey;
		int i;

		pthread_mutex_lock(&rs->cq_lock);
		i = find_iomap(rs, pos);
		if (i < 0) {
			/* Its IOMAP_SGL may be in the CQ still. */
			poll_cq_locked(rs);
			i = find_iomap(rs, pos);
		}
		pthread_mutex_unlock(&rs->cq_lock);
		if (i < 0)
			break;
		ret = wait_send(rs, flags);
		if (ret)
			break;
		pthread_mutex_lock(&rs->cq_lock);
		if (!writable(rs) || !rs_can_send(rs)) {
			pthread_mutex_unlock(&rs->cq_lock);
			continue;
		}
		xfer = olen < left ? olen : (uint32_t)left;
		if (olen < left && olen < RS_MAX_TRANSFER)
			olen <<= 1;
		end = rs->tiomap_off[i] + rs->tiomap[i].length;
		if (xfer > rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > end - pos)
			xfer = (uint32_t)(end - pos);
		rs->sqe_avail--;
		rs->sbuf_bytes_avail -= xfer;
		addr = rs->tiomap[i].addr + (pos - rs->tiomap_off[i]);
		rkey = rs->tiomap[i].key;
		pthread_mutex_unlock(&rs->cq_lock);
		/* A plain RDMA WRITE: no immediate, no credit (RS_OP_WRITE is the local tag). */
		ret = post_chunk(rs, &vp, &off, xfer, rs_msg(RS_OP_WRITE, xfer), addr, rkey, false);
		if (ret) {
			pthread_mutex_lock(&rs->cq_lock);
			rs_reset_locked(rs, RS_RESET_SEND_ERROR, ECONNRESET);
			pthread_mutex_unlock(&rs->cq_lock);
			rs_reset_finish(rs);
			ret = -ECONNRESET;
			break;
		}
		left -= xfer;
		pos += xfer;
	}
out:
	pthread_mutex_unlock(&rs->slock);
	if (ret && left == count) {
		errno = -ret;
		return (size_t)-1;
	}
	return count - left;
}

/* ---- teardown ---------------------------------------------------------------------------- */

void rs_free_stream(struct rsock *rs)
{
	struct rs_iomap_mr *m;

	while ((m = rs->iomap_list)) {
		rs->iomap_list = m->next;
		m->refcnt = 1;
		release_iomap(m);
	}
	while ((m = rs->iomap_queue)) {
		rs->iomap_queue = m->next;
		m->refcnt = 1;
		release_iomap(m);
	}
	free(rs->remote_iomappings);
	if (rs->cm_id && rs->cm_id->qp) {
		ack_events(rs, true);
		rdma_destroy_qp(rs->cm_id);    /* and the CQ and channel the id holds */
	} else if (rs->cm_id) {
		if (rs->cq)
			ibv_destroy_cq(rs->cq);
		if (rs->cq_ch)
			ibv_destroy_comp_channel(rs->cq_ch);
		rs->cm_id->recv_cq = rs->cm_id->send_cq = NULL;
		rs->cm_id->recv_cq_channel = rs->cm_id->send_cq_channel = NULL;
	}
	rs->cq = NULL;
	rs->cq_ch = NULL;
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->target_mr)
		ibv_dereg_mr(rs->target_mr);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->target_buf);
	free(rs->rmsg);
	free(rs->tiomap);
	free(rs->tiomap_off);
	free(rs->tiomap_valid);
}
