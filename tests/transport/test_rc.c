/* test_rc.c — the RC engine end to end between two QPs on the in-memory wire of
 * rc_world.h: every work request type, segmentation, PSN wrap, RNR, retry exhaustion
 * with a bound on the time it takes, remote access errors, and a lossy run
 * (UROCE_FAULT-style drop/dup/reorder/corrupt) whose every byte and atomic is checked. */
#include "rc_world.h"

#include <endian.h>
#include <stdio.h>

#define BUF (4u << 20)

/* Bind io.xmitv in the worlds of test_ops, test_lossy and test_credits (main runs them both
 * ways): the requester builds a message's MIDDLE packets in runs only through it
 * (rc_req.c burst_middle). */
static bool opt_xmitv;

struct mem {
	uint8_t *a, *b;                /* qp[0]'s and qp[1]'s memory */
	struct uroce_mr *ma, *mb;
};

static void mem_init(struct world *w, struct mem *m)
{
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;

	m->a = aligned_alloc(4096, BUF);
	m->b = aligned_alloc(4096, BUF);
	memset(m->a, 0, BUF);
	memset(m->b, 0, BUF);
	CHECK(uroce_mr_reg(w->pd, m->a, BUF, (uintptr_t)m->a, acc, &m->ma) == 0, "reg a");
	CHECK(uroce_mr_reg(w->pd, m->b, BUF, (uintptr_t)m->b, acc, &m->mb) == 0, "reg b");
}

static void mem_fini(struct mem *m)
{
	uroce_mr_dereg(m->ma);
	uroce_mr_dereg(m->mb);
	free(m->a);
	free(m->b);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
}

static int post(struct world *w, int i, enum ibv_wr_opcode op, uint64_t wr_id, struct ibv_sge *sg,
		int nsge, unsigned flags, uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = nsge, .opcode = op,
				  .send_flags = flags };
	struct ibv_send_wr *bad;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	wr.imm_data = htobe32(0xABCD0000u | (uint32_t)wr_id);
	return uroce_qp_post_send(w->qp[i], &wr, &bad);
}

static int post_recv(struct world *w, int i, uint64_t wr_id, struct ibv_sge *sg, int nsge)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = nsge };
	struct ibv_recv_wr *bad;

	if (w->qp[i]->qpx.qp_base.srq)
		return uroce_srq_post_recv(uroce_srq_from_ib(w->qp[i]->qpx.qp_base.srq), &wr, &bad);
	return uroce_qp_post_recv(w->qp[i], &wr, &bad);
}

struct want { int cq; uint32_t n; };
static bool cq_has(struct world *w, void *arg)
{
	struct want *x = arg;
	struct uroce_cq *cq = w->cq[x->cq];

	return cq->r.tail - cq->r.head >= x->n;
}

/* Run until cq[i] holds a completion, then take it. */
static bool wait_wc(struct world *w, int i, struct ibv_wc *wc)
{
	struct want x = { i, 1 };
	int r = world_run(w, cq_has, &x, 3600ull * 1000000000ull);

	if (r) {
		struct uroce_rc *rc = uroce_rc_of(w->qp[0]);
		struct uroce_qp *q = w->qp[0];
		struct uroce_rc_swqe *sw = &rc->swqe[rc->req_idx & (q->sq.size - 1)];

		fprintf(stderr, "stuck: head %u req_idx %u sent_idx %u tail %u req_off %u req_psn %u comp_psn %u "
			"high_psn %u rd_atomic %u rnr_wait %d t_retrans %llu | wqe first %u last %u len %u "
			"read_done %u started %d sent %d done %d\n", q->sq.head, rc->req_idx, rc->sent_idx,
			q->sq.tail, rc->req_off, rc->req_psn, rc->comp_psn, rc->high_psn, rc->rd_atomic,
			rc->rnr_wait, (unsigned long long)rc->t_retrans, sw->first_psn, sw->last_psn, sw->len,
			sw->read_done, sw->started, sw->sent, sw->done);
		{
			struct uroce_rc *r1 = uroce_rc_of(w->qp[1]);

			fprintf(stderr, "  responder: resp_psn %u nak_sent %d opseq %u state %d dup %llu "
				"dup_unknown %llu out_of_seq %llu read_replays %llu\n", r1->resp_psn, r1->nak_sent,
				r1->resp_opseq, w->qp[1]->attr.qp_state, (unsigned long long)r1->st.dup_requests,
				(unsigned long long)r1->st.drops[UROCE_RC_DROP_DUP_UNKNOWN],
				(unsigned long long)r1->st.drops[UROCE_RC_DROP_PSN_OUT_OF_SEQ],
				(unsigned long long)r1->st.read_replays);
		}
		CHECK(0, "world_run: %d waiting for a completion on cq %d", r, i);
		return false;
	}
	return uroce_cq_poll(w->cq[i], 1, wc) == 1;
}

/* ---- every operation, sizes around the MTU, SGE lists ---- */
static void test_ops(uint32_t psn0, enum ibv_mtu mtu)
{
	static const uint32_t sizes[] = { 0, 1, 1023, 1024, 1025, 4096, 65536, 1048576, 3000000 };
	struct world_opts o = { .mtu = mtu, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				.min_rnr_timer = 1, .psn0 = psn0, .xmitv = opt_xmitv };
	struct world w;
	struct mem m;
	struct ibv_wc wc;

	world_init(&w, &o, NULL);
	mem_init(&w, &m);

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint32_t n = sizes[k];
		struct ibv_sge s = { (uintptr_t)m.a, n, m.ma->mr.lkey };
		struct ibv_sge r = { (uintptr_t)m.b, BUF, m.mb->mr.lkey };

		fill(m.a, n, k);
		memset(m.b, 0xEE, n + 16);
		CHECK(post_recv(&w, 1, 100 + k, &r, 1) == 0, "recv");
		CHECK(post(&w, 0, k & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, k, &s, 1, IBV_SEND_SIGNALED,
			   0, 0, 0, 0) == 0, "send %u", n);
		CHECK(wait_wc(&w, 1, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + k &&
		      wc.byte_len == n && wc.opcode == IBV_WC_RECV, "recv wc %u: %d len %u", n, wc.status,
		      wc.byte_len);
		if (k & 1)
			CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == (0xABCD0000u | k),
			      "imm");
		CHECK(memcmp(m.a, m.b, n) == 0 && m.b[n] == 0xEE, "send data %u", n);
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == k &&
		      wc.opcode == IBV_WC_SEND, "send wc %u", n);

		/* WRITE and READ of the same size, at an offset. */
		fill(m.a, n, 77 + k);
		s.length = n;
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 1000 + k, &s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)m.b + 8, m.mb->mr.rkey, 0, 0) == 0, "write");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE,
		      "write wc %u: %d", n, wc.status);
		CHECK(memcmp(m.a, m.b + 8, n) == 0, "write data %u", n);
		fill(m.b + 8, n, 99 + k);
		CHECK(post(&w, 0, IBV_WR_RDMA_READ, 2000 + k, &s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)m.b + 8, m.mb->mr.rkey, 0, 0) == 0, "read");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ &&
		      wc.byte_len == n, "read wc %u: %d", n, wc.status);
		CHECK(memcmp(m.a, m.b + 8, n) == 0, "read data %u", n);
	}

	/* WRITE with immediate consumes a receive WQE and reports the length written. */
	{
		struct ibv_sge s = { (uintptr_t)m.a, 5000, m.ma->mr.lkey };
		struct ibv_sge r = { (uintptr_t)m.b, 16, m.mb->mr.lkey };

		fill(m.a, 5000, 5);
		CHECK(post_recv(&w, 1, 7, &r, 1) == 0, "recv");
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE_WITH_IMM, 8, &s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)m.b + 4096, m.mb->mr.rkey, 0, 0) == 0, "write imm");
		CHECK(wait_wc(&w, 1, &wc) && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == 5000 &&
		      be32toh(wc.imm_data) == 0xABCD0008u, "write imm wc");
		CHECK(memcmp(m.a, m.b + 4096, 5000) == 0, "write imm data");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS, "write imm send wc");
	}

	/* Atomics: fetch-and-add, successful and failed compare-and-swap. */
	{
		uint64_t *t = (uint64_t *)(void *)(m.b + 64);
		uint64_t *res = (uint64_t *)(void *)m.a;
		struct ibv_sge s = { (uintptr_t)m.a, 8, m.ma->mr.lkey };

		*t = 5;
		CHECK(post(&w, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, &s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)t, m.mb->mr.rkey, 3, 0) == 0, "fa");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD &&
		      *res == 5 && *t == 8, "fa result %llu %llu", (unsigned long long)*res,
		      (unsigned long long)*t);
		CHECK(post(&w, 0, IBV_WR_ATOMIC_CMP_AND_SWP, 2, &s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)t, m.mb->mr.rkey, 8, 100) == 0, "cas");
		CHECK(wait_wc(&w, 0, &wc) && wc.opcode == IBV_WC_COMP_SWAP && *res == 8 && *t == 100, "cas ok");
		CHECK(post(&w, 0, IBV_WR_ATOMIC_CMP_AND_SWP, 3, &s, 1, IBV_SEND_SIGNALED,
			   (uintptr_t)t, m.mb->mr.rkey, 1, 200) == 0, "cas");
		CHECK(wait_wc(&w, 0, &wc) && *res == 100 && *t == 100, "cas mismatch leaves the value");
	}

	/* Inline data, unsignaled WQEs (no CQE) followed by a signaled one, an SGE list. */
	{
		char msg[40] = "inline payload, copied at post time....";
		struct ibv_sge s = { (uintptr_t)msg, sizeof(msg), 0 };
		struct ibv_sge r[2] = { { (uintptr_t)m.b, 10, m.mb->mr.lkey },
					{ (uintptr_t)m.b + 1000, 100, m.mb->mr.lkey } };
		struct ibv_sge sl[3] = { { (uintptr_t)m.a, 7, m.ma->mr.lkey },
					 { (uintptr_t)m.a + 100, 13, m.ma->mr.lkey },
					 { (uintptr_t)m.a + 300, 20, m.ma->mr.lkey } };

		CHECK(post_recv(&w, 1, 1, r, 2) == 0, "recv");
		CHECK(post(&w, 0, IBV_WR_SEND, 50, &s, 1, IBV_SEND_INLINE, 0, 0, 0, 0) == 0, "inline");
		memset(msg, 0, sizeof(msg));
		CHECK(wait_wc(&w, 1, &wc) && wc.byte_len == 40, "inline recv");
		CHECK(memcmp(m.b, "inline pay", 10) == 0 && memcmp(m.b + 1000, "load, copied", 12) == 0,
		      "inline data scattered over 2 SGEs");
		fill(m.a, 400, 3);
		CHECK(post_recv(&w, 1, 2, r, 2) == 0, "recv");
		CHECK(post(&w, 0, IBV_WR_SEND, 51, sl, 3, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "sge list");
		CHECK(wait_wc(&w, 1, &wc) && wc.byte_len == 40, "sge recv");
		CHECK(memcmp(m.b, m.a, 7) == 0 && memcmp(m.b + 7, m.a + 100, 3) == 0 &&
		      memcmp(m.b + 1000, m.a + 103, 10) == 0 && memcmp(m.b + 1010, m.a + 300, 20) == 0,
		      "gathered and scattered");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 51, "only the signaled WQE completes");
	}
	mem_fini(&m);
	world_fini(&w);
}

/* ---- RNR: NAK with our timer code; recovery; exhaustion ---- */
static void test_rnr(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 2, .min_rnr_timer = 12 };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct uroce_rc_stats st;
	struct ibv_sge s;
	uint64_t t0;

	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	s = (struct ibv_sge){ (uintptr_t)m.a, 100, m.ma->mr.lkey };
	t0 = vnow;
	CHECK(post(&w, 0, IBV_WR_SEND, 1, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
	CHECK(post(&w, 0, IBV_WR_SEND, 2, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR,
	      "RNR_RETRY_EXC_ERR: %d", wc.status);
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR, "flushed");
	uroce_rc_stats(w.qp[0], &st);
	/* rnr_retry = 2: the first try and two retries each got an RNR NAK; code 12 = 640 us. */
	CHECK(st.rnr_naks_rx == 3, "rnr naks %llu", (unsigned long long)st.rnr_naks_rx);
	CHECK(vnow - t0 >= 2 * 640000ull && vnow - t0 < 3 * 640000ull, "waited %llu ns",
	      (unsigned long long)(vnow - t0));
	CHECK(w.qp[0]->attr.qp_state == IBV_QPS_ERR, "QP in error");
	mem_fini(&m);
	world_fini(&w);

	/* rnr_retry = 7 is forever: the receive posted late is used. */
	o.rnr_retry = 7;
	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	s = (struct ibv_sge){ (uintptr_t)m.a, 100, m.ma->mr.lkey };
	CHECK(post(&w, 0, IBV_WR_SEND, 1, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
	for (int i = 0; i < 20; i++) {
		struct want x = { 0, 1 };

		/* advance through 20 RNR rounds: nothing completes */
		CHECK(world_run(&w, cq_has, &x, 640000ull) == -ETIMEDOUT, "no completion while RNR");
	}
	{
		struct ibv_sge r = { (uintptr_t)m.b, 4096, m.mb->mr.lkey };

		CHECK(post_recv(&w, 1, 9, &r, 1) == 0, "recv");
	}
	CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS, "completes after the receive: %d",
	      wc.status);
	CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 9, "received");
	uroce_rc_stats(w.qp[1], &st);
	CHECK(st.rnr_naks_tx >= 20, "rnr naks sent %llu", (unsigned long long)st.rnr_naks_tx);
	mem_fini(&m);
	world_fini(&w);
}

/* ---- dead peer: RETRY_EXC_ERR within (retry_cnt + 1) local ACK timeouts ---- */
static void test_dead_peer(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 3, .rnr_retry = 7 };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct ibv_sge s;
	struct ibv_async_event ev;
	uint64_t t0, per = 4096ull << 14;  /* 67.1 ms */

	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	s = (struct ibv_sge){ (uintptr_t)m.a, 10000, m.ma->mr.lkey };
	w.lost_to = 1u << 1;
	t0 = vnow;
	CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 1, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b,
		   m.mb->mr.rkey, 0, 0) == 0, "write");
	CHECK(post(&w, 0, IBV_WR_SEND, 2, &s, 1, 0, 0, 0, 0, 0) == 0, "send");
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_RETRY_EXC_ERR,
	      "RETRY_EXC_ERR: %d", wc.status);
	/* IBA 9.7.6.1.1: the first attempt and retry_cnt retries each wait one timeout. */
	CHECK(vnow - t0 >= 4 * per && vnow - t0 <= 4 * per + per / 10, "took %llu ns, bound %llu",
	      (unsigned long long)(vnow - t0), (unsigned long long)(4 * per));
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 2 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "unsignaled WQE still completes with the flush error");
	CHECK(w.qp[0]->attr.qp_state == IBV_QPS_ERR, "QP in error");
	CHECK(uroce_async_event_get(w.ctx, &ev) == 0 && ev.event_type == IBV_EVENT_QP_FATAL,
	      "async QP_FATAL");
	mem_fini(&m);
	world_fini(&w);

	/* retry_cnt 7 retries forever, as rxe does (docs/soft-roce-differences.md): far more
	 * timeouts than 7 retries pass without a completion, and the WRITE completes once the
	 * peer is reachable again. */
	{
		struct uroce_rc_stats st;

		o.retry_cnt = 7;
		o.timeout = 10;                       /* 4.2 ms, backed off up to 16x */
		world_init(&w, &o, NULL);
		mem_init(&w, &m);
		s = (struct ibv_sge){ (uintptr_t)m.a, 10000, m.ma->mr.lkey };
		fill(m.a, 10000, 3);
		w.lost_to = 1u << 1;
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 1, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b,
			   m.mb->mr.rkey, 0, 0) == 0, "write");
		for (int i = 0; i < 20; i++) {
			struct want x = { 0, 1 };

			CHECK(world_run(&w, cq_has, &x, 100000000ull) == -ETIMEDOUT,
			      "a completion while the peer is unreachable (retry_cnt 7)");
		}
		uroce_rc_stats(w.qp[0], &st);
		CHECK(st.timeouts >= 16, "%llu timeouts in 2 s (want well over retry_cnt + 1 = 8)",
		      (unsigned long long)st.timeouts);
		w.lost_to = 0;
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS &&
		      !memcmp(m.a, m.b, 10000), "the WRITE completes once the peer is back: %d", wc.status);
		mem_fini(&m);
		world_fini(&w);
	}
}


/* ---- the send window: 512 KiB of payload, 128 to 512 PSNs by path MTU (rc.h
 * uroce_rc_set_mtu).  The peer receives nothing, so no ACK comes: within one local ACK
 * timeout the requester sends exactly one window of a 4 MiB WRITE and stops. ---- */
static void test_window(void)
{
	static const struct { enum ibv_mtu mtu; uint64_t want; } cases[] = {
		{ IBV_MTU_4096, 128 },   /* rxe's 128 PSNs */
		{ IBV_MTU_1024, 512 },   /* a 1500-byte netdev: 512 KiB, not 128 KiB */
		{ IBV_MTU_256, 512 },    /* 2,048 by bytes, held at UROCE_RC_MAX_WINDOW_PSNS */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct world_opts o = { .mtu = cases[i].mtu, .timeout = 14, .retry_cnt = 7,
					.rnr_retry = 7, .xmitv = opt_xmitv };
		struct world w;
		struct mem m;
		struct ibv_sge s;
		struct uroce_rc_stats st;
		struct want x = { 0, 1 };

		world_init(&w, &o, NULL);
		mem_init(&w, &m);
		s = (struct ibv_sge){ (uintptr_t)m.a, BUF, m.ma->mr.lkey };
		w.lost_to = 1u << 1;
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 1, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b,
			   m.mb->mr.rkey, 0, 0) == 0, "write");
		/* 10 ms: well inside the local ACK timeout (67 ms), so nothing is sent again */
		CHECK(world_run(&w, cq_has, &x, 10000000ull) == -ETIMEDOUT, "no completion");
		uroce_rc_stats(w.qp[0], &st);
		CHECK(st.tx_packets == cases[i].want && st.retransmissions == 0,
		      "MTU %u: %llu packets in flight (want %llu), %llu sent again",
		      128u << cases[i].mtu, (unsigned long long)st.tx_packets,
		      (unsigned long long)cases[i].want, (unsigned long long)st.retransmissions);
		w.lost_to = 0;
		mem_fini(&m);
		world_fini(&w);
	}
}

/* ---- fatal NAKs: each case provokes one on a fresh pair of QPs; the request (wr_id 1)
 * completes with the NAK's status after exactly one NAK of that kind from the responder,
 * and both QPs end in Error ---- */
struct nak_case {
	const char *name;
	void (*provoke)(struct world *w, struct mem *m);   /* posts the request */
	enum ibv_wc_status want;
	enum uroce_nak_code nak;
	void (*after)(struct world *w, struct mem *m);     /* more checks, or NULL */
};

static void send_at(struct world *w, enum ibv_wr_opcode op, struct mem *m, uint32_t len, uint64_t raddr,
		    uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)m->a, len, m->ma->mr.lkey };

	CHECK(post(w, 0, op, 1, &s, 1, IBV_SEND_SIGNALED, raddr, rkey, 1, 0) == 0, "post");
}

/* remote access (IBA 9.7.5.2.4) */
static void nak_bad_rkey(struct world *w, struct mem *m)
{
	send_at(w, IBV_WR_RDMA_WRITE, m, 100, (uintptr_t)m->b, m->mb->mr.rkey ^ 0x100);
}

static void nak_out_of_bounds(struct world *w, struct mem *m)
{
	send_at(w, IBV_WR_RDMA_READ, m, 100, (uintptr_t)m->b + BUF - 50, m->mb->mr.rkey);
}

static void nak_no_atomic_access(struct world *w, struct mem *m)
{
	w->qp[1]->attr.qp_access_flags &= ~(unsigned)IBV_ACCESS_REMOTE_ATOMIC;
	send_at(w, IBV_WR_ATOMIC_FETCH_AND_ADD, m, 8, (uintptr_t)m->b, m->mb->mr.rkey);
}

/* invalid request (IBA 9.7.5.1.x) */
static void nak_unaligned_atomic(struct world *w, struct mem *m)
{
	send_at(w, IBV_WR_ATOMIC_FETCH_AND_ADD, m, 8, (uintptr_t)m->b + 4, m->mb->mr.rkey);
}

static void unaligned_not_run(struct world *w, struct mem *m)
{
	(void)w;
	CHECK(!memcmp(m->b, (uint8_t[16]){ 0 }, 16), "the unaligned atomic ran");
}

static void nak_read_depth0(struct world *w, struct mem *m)
{
	w->qp[1]->attr.max_dest_rd_atomic = 0;   /* the responder takes no READ/atomic */
	send_at(w, IBV_WR_RDMA_READ, m, 8, (uintptr_t)m->b, m->mb->mr.rkey);
}

/* remote operational error: the receive WQE's L_Key is bad (IBA 9.7.5.2.x) */
static void nak_bad_recv_lkey(struct world *w, struct mem *m)
{
	struct ibv_sge r = { (uintptr_t)m->b, 4096, m->mb->mr.lkey ^ 0x100 };

	CHECK(post_recv(w, 1, 50, &r, 1) == 0, "recv with a bad lkey");
	send_at(w, IBV_WR_SEND, m, 64, 0, 0);
}

static void recv_loc_prot(struct world *w, struct mem *m)
{
	struct ibv_wc wc;

	(void)m;
	CHECK(wait_wc(w, 1, &wc) && wc.wr_id == 50 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "responder's receive: status %d, want LOC_PROT_ERR", wc.status);
}

static const struct nak_case nak_cases[] = {
	{ "unknown rkey", nak_bad_rkey, IBV_WC_REM_ACCESS_ERR, UROCE_NAK_REMOTE_ACCESS, NULL },
	{ "beyond the region", nak_out_of_bounds, IBV_WC_REM_ACCESS_ERR, UROCE_NAK_REMOTE_ACCESS, NULL },
	{ "no remote atomics on the QP", nak_no_atomic_access, IBV_WC_REM_ACCESS_ERR,
	  UROCE_NAK_REMOTE_ACCESS, NULL },
	{ "atomic target not 8-byte aligned", nak_unaligned_atomic, IBV_WC_REM_INV_REQ_ERR,
	  UROCE_NAK_INVALID_REQ, unaligned_not_run },
	{ "READ to max_dest_rd_atomic 0", nak_read_depth0, IBV_WC_REM_INV_REQ_ERR, UROCE_NAK_INVALID_REQ,
	  NULL },
	{ "receive WQE with a bad lkey", nak_bad_recv_lkey, IBV_WC_REM_OP_ERR, UROCE_NAK_REMOTE_OP,
	  recv_loc_prot },
};

static void test_fatal_naks(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };

	for (size_t k = 0; k < sizeof(nak_cases) / sizeof(nak_cases[0]); k++) {
		const struct nak_case *c = &nak_cases[k];
		struct world w;
		struct mem m;
		struct ibv_wc wc;
		struct uroce_rc_stats st;

		world_init(&w, &o, NULL);
		mem_init(&w, &m);
		c->provoke(&w, &m);
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 1 && wc.status == c->want, "%s: status %d, want %d",
		      c->name, wc.status, c->want);
		if (c->after)
			c->after(&w, &m);
		uroce_rc_stats(w.qp[1], &st);
		CHECK(st.naks_tx[c->nak] == 1, "%s: %llu NAKs of kind %d, want 1", c->name,
		      (unsigned long long)st.naks_tx[c->nak], c->nak);
		CHECK(w.qp[0]->attr.qp_state == IBV_QPS_ERR && w.qp[1]->attr.qp_state == IBV_QPS_ERR,
		      "%s: both QPs in error", c->name);
		mem_fini(&m);
		world_fini(&w);
	}
}

/* ---- lossy wire: every byte and every atomic checked ---- */
static void test_lossy(const char *fault, size_t total, unsigned natomics)
{
	struct world_opts o = { .timeout = 10, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 1,
				.psn0 = 0xFFF000, .max_rd_atomic = 8, .xmitv = opt_xmitv };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct uroce_rc_stats s0, s1;
	const uint32_t chunk = getenv("RC_CHUNK") ? (uint32_t)atoi(getenv("RC_CHUNK")) : 256 * 1024;
	size_t moved[3] = { 0, 0, 0 };
	uint64_t *ctr, *cas;

	world_init(&w, &o, fault);
	mem_init(&w, &m);
	for (int op = 0; op < 3; op++) {
		for (size_t done = 0; done < total; done += 4 * chunk) {
			/* 4 messages in flight, each to/from its own quarter of the buffers. */
			for (uint32_t q = 0; q < 4; q++) {
				struct ibv_sge s = { (uintptr_t)m.a + q * chunk, chunk, m.ma->mr.lkey };
				struct ibv_sge r = { (uintptr_t)m.b + q * chunk, chunk, m.mb->mr.lkey };

				fill(op == 2 ? m.b + q * chunk : m.a + q * chunk, chunk,
				     (uint32_t)(done / chunk + q + op * 7919));
				if (op == 0) {
					CHECK(post_recv(&w, 1, q, &r, 1) == 0, "recv");
					CHECK(post(&w, 0, IBV_WR_SEND, q, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
				} else {
					CHECK(post(&w, 0, op == 1 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ, q, &s, 1,
						   IBV_SEND_SIGNALED, r.addr, m.mb->mr.rkey, 0, 0) == 0, "rdma");
				}
			}
			for (uint32_t q = 0; q < 4; q++) {
				CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == q,
				      "op %d wc %u: %d", op, q, wc.status);
				if (op == 0)
					CHECK(wait_wc(&w, 1, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == chunk,
					      "recv wc");
			}
			if (memcmp(m.a, m.b, 4 * chunk) != 0)
				CHECK(0, "op %d: data differs at %zu", op, done);
			else
				moved[op] += 4 * chunk;
		}
	}
	/* Atomics: a counter incremented natomics times, and a CAS chain where each step
	 * only succeeds if no earlier one ran twice. */
	ctr = (uint64_t *)(void *)(m.b + BUF - 64);
	cas = (uint64_t *)(void *)(m.b + BUF - 32);
	*ctr = 0;
	*cas = 0;
	for (unsigned i = 0; i < natomics; i += 8) {
		for (unsigned j = 0; j < 8; j++) {
			struct ibv_sge s = { (uintptr_t)m.a + 8 * j, 8, m.ma->mr.lkey };

			if (j & 1)
				post(&w, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, j, &s, 1, IBV_SEND_SIGNALED,
				     (uintptr_t)ctr, m.mb->mr.rkey, 1, 0);
			else
				post(&w, 0, IBV_WR_ATOMIC_CMP_AND_SWP, j, &s, 1, IBV_SEND_SIGNALED,
				     (uintptr_t)cas, m.mb->mr.rkey, i / 2 + j / 2, i / 2 + j / 2 + 1);
		}
		for (unsigned j = 0; j < 8; j++) {
			uint64_t orig;

			CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS, "atomic wc %d", wc.status);
			memcpy(&orig, m.a + 8 * wc.wr_id, 8);
			if (wc.wr_id & 1)
				CHECK(orig == i / 2 + wc.wr_id / 2, "fetch-add saw %llu at step %u",
				      (unsigned long long)orig, i);
			else
				CHECK(orig == i / 2 + wc.wr_id / 2, "cas saw %llu at step %u",
				      (unsigned long long)orig, i);
		}
	}
	CHECK(*ctr == natomics / 2 && *cas == natomics / 2, "atomics ran once each: %llu %llu",
	      (unsigned long long)*ctr, (unsigned long long)*cas);
	uroce_rc_stats(w.qp[0], &s0);
	uroce_rc_stats(w.qp[1], &s1);
	printf("lossy(%s): moved send %zu write %zu read %zu bytes, %u atomics; wire: dropped %llu, "
	       "dup %llu, reordered %llu, ICRC-rejected %llu; requester: retransmitted %llu, "
	       "timeouts %llu, seq NAKs %llu; responder: duplicates %llu, atomic replays %llu, "
	       "read replays %llu\n", fault ? fault : "none", moved[0], moved[1], moved[2], natomics,
	       (unsigned long long)w.fault_drops, (unsigned long long)w.fault_dups,
	       (unsigned long long)w.fault_reorders, (unsigned long long)w.icrc_drops,
	       (unsigned long long)s0.retransmissions, (unsigned long long)s0.timeouts,
	       (unsigned long long)s0.seq_naks_rx, (unsigned long long)s1.dup_requests,
	       (unsigned long long)s1.atomic_replays, (unsigned long long)s1.read_replays);
	if (fault) {
		CHECK(s0.retransmissions > 0 && w.icrc_drops > 0 && s1.dup_requests > 0,
		      "recovery visible in the counters");
		CHECK(s1.atomic_replays > 0, "some atomic was answered from the replay cache");
	}
	mem_fini(&m);
	world_fini(&w);
}


/* ---- SRQ, the ibv_wr_* API, memory windows: bind, access through the window, Send with
 * Invalidate, access after invalidation ---- */
static void test_srq_wr_mw(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 1,
				.srq_b = true };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct uroce_mw *mw;
	struct ibv_qp_ex *x;
	uint32_t key;

	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	/* SEND into an SRQ. */
	{
		struct ibv_sge s = { (uintptr_t)m.a, 3000, m.ma->mr.lkey };
		struct ibv_sge r = { (uintptr_t)m.b, 4096, m.mb->mr.lkey };

		fill(m.a, 3000, 1);
		CHECK(post_recv(&w, 1, 5, &r, 1) == 0, "srq recv");
		CHECK(post(&w, 0, IBV_WR_SEND, 1, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 5 && wc.byte_len == 3000 && !memcmp(m.a, m.b, 3000),
		      "received through the SRQ");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS, "send wc");
	}
	/* The ibv_wr_* API: two WRs in one batch. */
	w.qp[0]->is_qp_ex = true;
	w.qp[0]->send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV;
	uroce_qp_ex_init_ops(w.qp[0]);
	x = &w.qp[0]->qpx;
	fill(m.a, 2000, 9);
	x->wr_start(x);
	x->wr_id = 70;
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_rdma_write(x, m.mb->mr.rkey, (uintptr_t)m.b + 100000);
	x->wr_set_sge(x, m.ma->mr.lkey, (uintptr_t)m.a, 2000);
	x->wr_id = 71;
	x->wr_rdma_write(x, m.mb->mr.rkey, (uintptr_t)m.b + 200000);
	x->wr_set_sge(x, m.ma->mr.lkey, (uintptr_t)m.a + 1000, 1000);
	CHECK(x->wr_complete(x) == 0, "wr_complete");
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 70 && wc.status == IBV_WC_SUCCESS, "wr api 1");
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 71 && wc.status == IBV_WC_SUCCESS, "wr api 2");
	CHECK(!memcmp(m.b + 100000, m.a, 2000) && !memcmp(m.b + 200000, m.a + 1000, 1000), "wr api data");

	/* A type 2 window over 8 KiB of qp[1]'s memory, bound through qp[1]'s send queue. */
	CHECK(uroce_mw_alloc(w.pd, IBV_MW_TYPE_2, &mw) == 0, "mw alloc");
	key = (mw->mw.rkey & ~0xFFu) | ((mw->mw.rkey + 0x42) & 0xFFu);
	{
		struct ibv_send_wr wr = { .wr_id = 80, .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.bind_mw.mw = &mw->mw;
		wr.bind_mw.rkey = key;
		wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ &m.mb->mr, (uintptr_t)m.b + 8192, 8192,
								  IBV_ACCESS_REMOTE_WRITE };
		CHECK(uroce_qp_post_send(w.qp[1], &wr, &bad) == 0, "bind post");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 80 && wc.opcode == IBV_WC_BIND_MW &&
		      wc.status == IBV_WC_SUCCESS, "bind wc %d", wc.status);
		CHECK(mw->mw.rkey == key && mw->bound_mr == m.mb, "bound with the new key");
	}
	{
		struct ibv_sge s = { (uintptr_t)m.a, 100, m.ma->mr.lkey };
		struct ibv_sge r = { (uintptr_t)m.b, 4096, m.mb->mr.lkey };
		struct ibv_send_wr wr = { .wr_id = 81, .sg_list = &s, .num_sge = 1,
					  .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED }, *bad;

		fill(m.a, 100, 4);
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 90, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b + 8192 + 50,
			   key, 0, 0) == 0, "write through the window");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(m.b + 8242, m.a, 100),
		      "window write: %d", wc.status);
		/* Send with Invalidate: the receive reports the key, the window is unbound. */
		CHECK(post_recv(&w, 1, 6, &r, 1) == 0, "recv");
		wr.invalidate_rkey = key;
		CHECK(uroce_qp_post_send(w.qp[0], &wr, &bad) == 0, "send inv");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 6 && (wc.wc_flags & IBV_WC_WITH_INV) &&
		      wc.invalidated_rkey == key, "recv with invalidate");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 81 && wc.status == IBV_WC_SUCCESS, "send inv wc");
		CHECK(mw->bound_mr == NULL, "window invalidated");
		/* The invalidated key is refused. */
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 91, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b + 8192,
			   key, 0, 0) == 0, "write");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 91 && wc.status == IBV_WC_REM_ACCESS_ERR,
		      "invalidated window: %d", wc.status);
	}
	uroce_mw_dealloc(mw);
	mem_fini(&m);
	world_fini(&w);
}


static bool sq_drained(struct world *w, void *arg)
{
	struct uroce_qp *q = arg;

	(void)w;
	return q->sq.head == q->sq.tail;
}

/* ---- LOCAL_INV of a type 2 window; a type 1 window bound with ibv_bind_mw ---- */
static void test_local_inv_mw1(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct ibv_sge s;
	struct uroce_mw *mw;
	uint32_t key;

	/* LOCAL_INV through qp[1]'s send queue (IBA 10.6.7.2.4): the window is unbound and its
	 * key no longer admits a WRITE. */
	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	s = (struct ibv_sge){ (uintptr_t)m.a, 100, m.ma->mr.lkey };
	fill(m.a, 100, 7);
	CHECK(uroce_mw_alloc(w.pd, IBV_MW_TYPE_2, &mw) == 0, "mw alloc");
	key = (mw->mw.rkey & ~0xFFu) | ((mw->mw.rkey + 0x17) & 0xFFu);
	{
		struct ibv_send_wr wr = { .wr_id = 80, .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.bind_mw.mw = &mw->mw;
		wr.bind_mw.rkey = key;
		wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ &m.mb->mr, (uintptr_t)m.b, 4096,
								  IBV_ACCESS_REMOTE_WRITE };
		CHECK(uroce_qp_post_send(w.qp[1], &wr, &bad) == 0, "bind post");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 80 && wc.status == IBV_WC_SUCCESS, "bind wc");
	}
	CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 90, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b, key, 0, 0) == 0,
	      "write");
	CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(m.b, m.a, 100),
	      "write through the bound window: %d", wc.status);
	{
		struct ibv_send_wr wr = { .wr_id = 81, .opcode = IBV_WR_LOCAL_INV,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.invalidate_rkey = key;
		CHECK(uroce_qp_post_send(w.qp[1], &wr, &bad) == 0, "local_inv post");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 81 && wc.opcode == IBV_WC_LOCAL_INV &&
		      wc.status == IBV_WC_SUCCESS, "local_inv wc: %d", wc.status);
		CHECK(mw->bound_mr == NULL, "window unbound by LOCAL_INV");
	}
	CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 91, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b, key, 0, 0) == 0,
	      "write");
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 91 && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "write through an invalidated window: %d", wc.status);
	uroce_mw_dealloc(mw);
	mem_fini(&m);
	world_fini(&w);

	/* A type 1 window, bound by ibv_bind_mw (IBA 10.6.7.1): the call returns the new key in
	 * mw->rkey, the bind completes on qp[1]'s CQ, the new key admits a WRITE inside the
	 * window and the old one no longer resolves. */
	world_init(&w, &o, NULL);
	uroce_context_set_ops(w.ctx);
	mem_init(&w, &m);
	s = (struct ibv_sge){ (uintptr_t)m.a, 100, m.ma->mr.lkey };
	fill(m.a, 100, 8);
	{
		struct ibv_mw *m1 = ibv_alloc_mw(&w.pd->pd, IBV_MW_TYPE_1);
		struct ibv_mw_bind b = { .wr_id = 82, .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = { &m.mb->mr, (uintptr_t)m.b + 16384, 4096,
							IBV_ACCESS_REMOTE_WRITE } };
		uint32_t old;

		CHECK(m1 != NULL, "type 1 mw alloc");
		if (!m1)
			goto out;
		old = m1->rkey;
		/* A bind that cannot be posted (qp[1]'s send queue is full of unsignaled WRITEs)
		 * fails and leaves the window its key. */
		{
			struct ibv_sge s1 = { (uintptr_t)m.b, 8, m.mb->mr.lkey };
			int n = 0;

			while (n < 1000 && post(&w, 1, IBV_WR_RDMA_WRITE, 200, &s1, 1, 0, (uintptr_t)m.a + 4096,
						m.ma->mr.rkey, 0, 0) == 0)
				n++;
			CHECK(n > 0 && n < 1000, "%d WRITEs filled the send queue", n);
			CHECK(ibv_bind_mw(&w.qp[1]->qpx.qp_base, m1, &b) != 0, "a bind on a full send queue");
			CHECK(m1->rkey == old, "the failed bind changed the key");
			CHECK(world_run(&w, sq_drained, w.qp[1], 3600ull * 1000000000ull) == 0, "drain");
		}
		CHECK(ibv_bind_mw(&w.qp[1]->qpx.qp_base, m1, &b) == 0, "ibv_bind_mw");
		CHECK(m1->rkey != old, "a new key");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 82 && wc.opcode == IBV_WC_BIND_MW &&
		      wc.status == IBV_WC_SUCCESS, "type 1 bind wc: %d", wc.status);
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 92, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b + 16384 + 10,
			   m1->rkey, 0, 0) == 0, "write");
		CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(m.b + 16394, m.a, 100),
		      "write through the type 1 window: %d", wc.status);
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 93, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b + 16384,
			   old, 0, 0) == 0, "write");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 93 && wc.status == IBV_WC_REM_ACCESS_ERR,
		      "the window's old key: %d", wc.status);
		ibv_dealloc_mw(m1);
	}
out:
	mem_fini(&m);
	world_fini(&w);
}

/* ---- memory window binds, one case per rule (IBA 10.6.7; the rule table in pd_mr.c): each
 * case binds a window of qp[1]'s memory through the verb the case names, checks what the
 * post returns and the bind's completion, then lets qp[0] use the key it got ---- */
enum bind_via { VIA_POST, VIA_VERB, VIA_WR };
enum bind_mr { MR_OK, MR_NOBIND, MR_NOLW, MR_OTHER_PD, MR_ZB, MR_IOVA, MR_NONE };
enum bind_pre { PRE_NONE, PRE_BOUND, PRE_INVALIDATED };
#define NO_PROBE ((enum ibv_wr_opcode)0xFF)
#define BIND_REGION 65536u           /* the MRs of the cases: m.b + 64 KiB, 64 KiB long */
#define BIND_IOVA (1ull << 40)       /* MR_IOVA's iova */

struct bind_case {
	const char *name;
	enum ibv_mw_type type;
	enum bind_via via;
	int qp;                      /* whose send queue takes the bind */
	bool mw_other_pd;            /* the window (and MR_OTHER_PD's MR) in a second PD */
	enum bind_mr mr;
	int64_t off;                 /* window start - MR start */
	uint64_t len;
	unsigned acc;
	enum bind_pre pre;
	int post_err;                /* what the post returns */
	enum ibv_wc_status wc;       /* the bind's completion, if posted */
	enum ibv_wr_opcode probe;    /* qp[0]'s request through the window, or NO_PROBE */
	uint64_t probe_off;          /* from the window's start */
	bool probe_va;               /* address a zero-based window by its VA anyway */
	bool probe_old;              /* use the key the window had before this bind */
	enum ibv_wc_status probe_wc;
};

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define RA IBV_ACCESS_REMOTE_ATOMIC
#define T1 IBV_MW_TYPE_1
#define T2 IBV_MW_TYPE_2
#define OK IBV_WC_SUCCESS
#define RAE IBV_WC_REM_ACCESS_ERR

static const struct bind_case bind_cases[] = {
	/* rdma-core's tests bind with LOCAL_WRITE | REMOTE_WRITE; a window's rights are its
	 * remote ones, LOCAL_WRITE is ignored */
	{ "type 1, ibv_bind_mw, LOCAL_WRITE|REMOTE_WRITE", T1, VIA_VERB, 1, false, MR_OK, 0, 4096, LW | RW,
	  PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 2, post_send, LOCAL_WRITE|REMOTE_WRITE", T2, VIA_POST, 1, false, MR_OK, 0, 4096, LW | RW,
	  PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 2, ibv_wr_bind_mw, LOCAL_WRITE|REMOTE_WRITE", T2, VIA_WR, 1, false, MR_OK, 0, 4096, LW | RW,
	  PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 1, LOCAL_WRITE|MW_BIND|REMOTE_READ: READ admitted", T1, VIA_VERB, 1, false, MR_OK, 256, 1024,
	  LW | IBV_ACCESS_MW_BIND | RR, PRE_NONE, 0, OK, IBV_WR_RDMA_READ, 64, false, false, OK },
	{ "type 1, REMOTE_READ only: WRITE refused", T1, VIA_VERB, 1, false, MR_OK, 0, 4096, RR, PRE_NONE, 0, OK,
	  IBV_WR_RDMA_WRITE, 8, false, false, RAE },
	{ "type 2, LOCAL_WRITE alone: no remote write", T2, VIA_POST, 1, false, MR_OK, 0, 4096, LW, PRE_NONE, 0,
	  OK, IBV_WR_RDMA_WRITE, 8, false, false, RAE },
	{ "type 2, REMOTE_ATOMIC: fetch-and-add admitted", T2, VIA_POST, 1, false, MR_OK, 0, 4096, LW | RA,
	  PRE_NONE, 0, OK, IBV_WR_ATOMIC_FETCH_AND_ADD, 16, false, false, OK },
	/* the MR's rights (C10-73, C10-74) */
	{ "type 1, MR without MW_BIND", T1, VIA_VERB, 1, false, MR_NOBIND, 0, 4096, RW, PRE_NONE, EINVAL, OK,
	  NO_PROBE, 0, false, false, OK },
	{ "type 2, MR without MW_BIND", T2, VIA_POST, 1, false, MR_NOBIND, 0, 4096, RW, PRE_NONE, EINVAL, OK,
	  NO_PROBE, 0, false, false, OK },
	{ "type 2, REMOTE_WRITE on an MR without LOCAL_WRITE", T2, VIA_POST, 1, false, MR_NOLW, 0, 4096, RW,
	  PRE_NONE, EINVAL, OK, NO_PROBE, 0, false, false, OK },
	{ "type 1, REMOTE_ATOMIC on an MR without LOCAL_WRITE", T1, VIA_VERB, 1, false, MR_NOLW, 0, 4096, RA,
	  PRE_NONE, EINVAL, OK, NO_PROBE, 0, false, false, OK },
	{ "type 2, REMOTE_READ on an MR without LOCAL_WRITE", T2, VIA_POST, 1, false, MR_NOLW, 0, 4096, RR,
	  PRE_NONE, 0, OK, IBV_WR_RDMA_READ, 0, false, false, OK },
	{ "unknown access bit", T2, VIA_POST, 1, false, MR_OK, 0, 4096, RW | (1u << 14), PRE_NONE, EINVAL, OK,
	  NO_PROBE, 0, false, false, OK },
	/* protection domains (IBA 10.6.7, C10-72) */
	{ "type 1, MR of another PD", T1, VIA_VERB, 1, false, MR_OTHER_PD, 0, 4096, RW, PRE_NONE, EPERM, OK,
	  NO_PROBE, 0, false, false, OK },
	{ "type 2, MR of another PD", T2, VIA_POST, 1, false, MR_OTHER_PD, 0, 4096, RW, PRE_NONE, EPERM, OK,
	  NO_PROBE, 0, false, false, OK },
	{ "type 1, window of another PD than the QP", T1, VIA_VERB, 1, true, MR_OTHER_PD, 0, 4096, RW, PRE_NONE,
	  EINVAL, OK, NO_PROBE, 0, false, false, OK },
	{ "type 2, window of another PD than the QP (C10-72)", T2, VIA_POST, 1, true, MR_OTHER_PD, 0, 4096, RW,
	  PRE_NONE, EINVAL, OK, NO_PROBE, 0, false, false, OK },
	/* length: a type 2 window is never unbound by a bind (o10-37.2.40), a type 1 is */
	{ "type 2, zero length", T2, VIA_POST, 1, false, MR_OK, 0, 0, RW, PRE_NONE, EINVAL, OK, NO_PROBE, 0,
	  false, false, OK },
	{ "type 2, no MR", T2, VIA_POST, 1, false, MR_NONE, 0, 0, RW, PRE_NONE, EINVAL, OK, NO_PROBE, 0, false,
	  false, OK },
	{ "type 1, zero length unbinds: the old key is refused", T1, VIA_VERB, 1, false, MR_OK, 0, 0, 0,
	  PRE_BOUND, 0, OK, IBV_WR_RDMA_WRITE, 8, false, true, RAE },
	{ "type 1, zero length unbinds: the new key admits nothing", T1, VIA_VERB, 1, false, MR_OK, 0, 0, 0,
	  PRE_BOUND, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, RAE },
	/* the range (C10-75), in the MR's iova space */
	{ "the whole MR", T2, VIA_POST, 1, false, MR_OK, 0, BIND_REGION, RW, PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE,
	  BIND_REGION - 64, false, false, OK },
	{ "one byte past the MR", T2, VIA_POST, 1, false, MR_OK, 1, BIND_REGION, RW, PRE_NONE, EINVAL, OK,
	  NO_PROBE, 0, false, false, OK },
	{ "starting before the MR", T1, VIA_VERB, 1, false, MR_OK, -1, 2, RW, PRE_NONE, EINVAL, OK, NO_PROBE, 0,
	  false, false, OK },
	{ "a length that wraps", T2, VIA_POST, 1, false, MR_OK, 8, UINT64_MAX - 4, RW, PRE_NONE, EINVAL, OK,
	  NO_PROBE, 0, false, false, OK },
	{ "MR registered at another iova: the window is in iova space", T2, VIA_POST, 1, false, MR_IOVA, 4096,
	  4096, RW, PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 1 on an MR at another iova", T1, VIA_VERB, 1, false, MR_IOVA, 8192, 4096, RW | RR, PRE_NONE, 0,
	  OK, IBV_WR_RDMA_READ, 64, false, false, OK },
	/* zero based: type 2 only (o10-36.2.2) */
	{ "type 1, ZERO_BASED", T1, VIA_VERB, 1, false, MR_OK, 0, 4096, RW | IBV_ACCESS_ZERO_BASED, PRE_NONE,
	  EINVAL, OK, NO_PROBE, 0, false, false, OK },
	{ "type 2, ZERO_BASED: addressed from 0", T2, VIA_POST, 1, false, MR_OK, 4096, 4096,
	  RW | IBV_ACCESS_ZERO_BASED, PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 2, ZERO_BASED: its VA is out of range", T2, VIA_POST, 1, false, MR_OK, 4096, 4096,
	  RW | IBV_ACCESS_ZERO_BASED, PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, true, false, RAE },
	{ "MR registered ZERO_BASED", T2, VIA_POST, 1, false, MR_ZB, 0, 4096, RW, PRE_NONE, EINVAL, OK,
	  NO_PROBE, 0, false, false, OK },
	/* the window's state (o10-37.2.30) and the QP a type 2 window belongs to */
	{ "type 2 bound again", T2, VIA_POST, 1, false, MR_OK, 0, 4096, RW, PRE_BOUND, 0, IBV_WC_MW_BIND_ERR,
	  NO_PROBE, 0, false, false, OK },
	{ "type 2 bound again, ibv_wr_bind_mw", T2, VIA_WR, 1, false, MR_OK, 0, 4096, RW, PRE_BOUND, 0,
	  IBV_WC_MW_BIND_ERR, NO_PROBE, 0, false, false, OK },
	{ "type 2 invalidated, then bound again", T2, VIA_POST, 1, false, MR_OK, 512, 4096, RW, PRE_INVALIDATED,
	  0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 1 bound again: the binding is replaced", T1, VIA_VERB, 1, false, MR_OK, 1024, 4096, RW, PRE_BOUND,
	  0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
	{ "type 2 bound through qp[0]: refused on qp[1] (IBA 10.6.7.2.2)", T2, VIA_POST, 0, false, MR_OK, 0, 4096,
	  RW, PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, RAE },
	{ "type 1 bound through qp[0]: admitted on any QP of its PD", T1, VIA_VERB, 0, false, MR_OK, 0, 4096, RW,
	  PRE_NONE, 0, OK, IBV_WR_RDMA_WRITE, 8, false, false, OK },
};

/* Bind @mw through qp[@qpi] the way @via says; the new key in *key.  The post's errno. */
static int bind_via(struct world *w, int qpi, enum bind_via via, struct uroce_mw *mw,
		    const struct ibv_mw_bind_info *bi, uint64_t wr_id, uint32_t *key)
{
	struct uroce_qp *qp = w->qp[qpi];
	uint32_t nk = (mw->mw.rkey & ~0xFFu) | ((mw->mw.rkey + 0x42) & 0xFFu);

	if (via == VIA_VERB) {
		struct ibv_mw_bind b = { .wr_id = wr_id, .send_flags = IBV_SEND_SIGNALED, .bind_info = *bi };
		int r = ibv_bind_mw(&qp->qpx.qp_base, &mw->mw, &b);

		*key = mw->mw.rkey;
		return r;
	}
	*key = nk;
	if (via == VIA_WR) {
		struct ibv_qp_ex *x = &qp->qpx;

		qp->is_qp_ex = true;
		qp->send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND;
		uroce_qp_ex_init_ops(qp);
		x->wr_start(x);
		x->wr_id = wr_id;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(x, &mw->mw, nk, bi);
		return x->wr_complete(x);
	} else {
		struct ibv_send_wr wr = { .wr_id = wr_id, .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.bind_mw.mw = &mw->mw;
		wr.bind_mw.rkey = nk;
		wr.bind_mw.bind_info = *bi;
		return -uroce_qp_post_send(qp, &wr, &bad);
	}
}

/* qp[0]'s request @op of 64 bytes (8 for an atomic) at @va with @key; its status.  @host is
 * where it lands in qp[1]'s memory, checked on success. */
static enum ibv_wc_status probe_window(struct world *w, struct mem *m, enum ibv_wr_opcode op, uint64_t va,
				       uint32_t key, uint8_t *host)
{
	uint32_t n = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 64;
	struct ibv_sge s = { (uintptr_t)m->a, n, m->ma->mr.lkey };
	struct ibv_wc wc;
	uint64_t v = 5;

	fill(m->a, 64, 21);
	if (op == IBV_WR_RDMA_READ) {
		fill(host, 64, 22);
	} else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		memcpy(host, &v, 8);
		memset(m->a, 0, 8);
	}
	CHECK(post(w, 0, op, 300, &s, 1, IBV_SEND_SIGNALED, va, key, 3, 0) == 0, "probe post");
	if (!wait_wc(w, 0, &wc))
		return IBV_WC_GENERAL_ERR;
	if (wc.status == IBV_WC_SUCCESS) {
		if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			memcpy(&v, host, 8);
			CHECK(v == 8 && !memcmp(m->a, &(uint64_t){ 5 }, 8), "the fetch-and-add's result");
		} else {
			CHECK(!memcmp(m->a, host, n), "the data went through the window");
		}
	}
	return wc.status;
}

static void test_mw_bind_rules(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	const unsigned full = LW | RW | RR | RA | IBV_ACCESS_MW_BIND;

	for (size_t k = 0; k < sizeof(bind_cases) / sizeof(bind_cases[0]); k++) {
		const struct bind_case *c = &bind_cases[k];
		struct world w;
		struct mem m;
		struct uroce_pd *pd2;
		struct uroce_mr *mr = NULL, *pm = NULL;
		struct uroce_mw *mw;
		struct ibv_mw_bind_info bi;
		struct ibv_wc wc;
		uint64_t base;
		uint8_t *region;
		uint32_t old, key = 0;
		int r;

		world_init(&w, &o, NULL);
		uroce_context_set_ops(w.ctx);
		mem_init(&w, &m);
		region = m.b + BIND_REGION;
		CHECK(uroce_pd_alloc(w.ctx, &pd2) == 0, "pd2");
		base = c->mr == MR_IOVA ? BIND_IOVA : (uintptr_t)region;
		if (c->mr != MR_NONE) {
			static const unsigned acc[] = {
				[MR_OK] = LW | RW | RR | RA | IBV_ACCESS_MW_BIND, [MR_NOBIND] = LW | RW | RR | RA,
				[MR_NOLW] = RR | IBV_ACCESS_MW_BIND, [MR_OTHER_PD] = LW | RW | RR | RA | IBV_ACCESS_MW_BIND,
				[MR_ZB] = LW | RW | RR | RA | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED,
				[MR_IOVA] = LW | RW | RR | RA | IBV_ACCESS_MW_BIND,
			};

			CHECK(uroce_mr_reg(c->mr == MR_OTHER_PD ? pd2 : w.pd, region, BIND_REGION, base, acc[c->mr],
					   &mr) == 0, "%s: reg", c->name);
		}
		CHECK(uroce_mw_alloc(c->mw_other_pd ? pd2 : w.pd, c->type, &mw) == 0, "%s: mw", c->name);
		/* The state before: bound through qp[1] (a valid bind of the first 4 KiB), or
		 * bound and invalidated. */
		if (c->pre != PRE_NONE) {
			struct ibv_mw_bind_info pb;

			CHECK(uroce_mr_reg(w.pd, region, BIND_REGION, (uintptr_t)region, full, &pm) == 0, "pre reg");
			pb = (struct ibv_mw_bind_info){ &pm->mr, (uintptr_t)region, 4096, RW };
			CHECK(bind_via(&w, 1, c->type == T1 ? VIA_VERB : VIA_POST, mw, &pb, 1, &key) == 0 &&
			      wait_wc(&w, 1, &wc) && wc.status == OK, "%s: the first bind", c->name);
			if (c->type == T2)
				mw->mw.rkey = key;   /* the consumer's record of the key (rdma-core does not) */
			if (c->pre == PRE_INVALIDATED) {
				struct ibv_send_wr wr = { .wr_id = 2, .opcode = IBV_WR_LOCAL_INV,
							  .send_flags = IBV_SEND_SIGNALED }, *bad;

				wr.invalidate_rkey = key;
				CHECK(uroce_qp_post_send(w.qp[1], &wr, &bad) == 0 && wait_wc(&w, 1, &wc) &&
				      wc.status == OK, "%s: LOCAL_INV", c->name);
			}
		}
		old = mw->mw.rkey;
		bi = (struct ibv_mw_bind_info){ c->mr == MR_NONE ? NULL : &mr->mr, base + (uint64_t)c->off, c->len,
						c->acc };
		r = bind_via(&w, c->qp, c->via, mw, &bi, 10, &key);
		CHECK(r == c->post_err, "%s: the post returned %d, want %d", c->name, r, c->post_err);
		if (r == 0 && c->post_err == 0) {
			CHECK(wait_wc(&w, c->qp, &wc) && wc.wr_id == 10 && wc.opcode == IBV_WC_BIND_MW &&
			      wc.status == c->wc, "%s: the bind completed %d, want %d", c->name, wc.status, c->wc);
			if (c->via == VIA_VERB)
				CHECK(key != old && (key >> 8) == (old >> 8), "%s: ibv_bind_mw's new key %#x (was %#x)",
				      c->name, key, old);
			if (wc.status == OK && c->probe != NO_PROBE) {
				bool zb = c->acc & IBV_ACCESS_ZERO_BASED;
				uint64_t wstart = base + (uint64_t)c->off;
				uint64_t va = (zb && !c->probe_va ? 0 : wstart) + c->probe_off;
				enum ibv_wc_status st = probe_window(&w, &m, c->probe, va, c->probe_old ? old : key,
								     region + c->off + c->probe_off);

				CHECK(st == c->probe_wc, "%s: %s through the window: %d, want %d", c->name,
				      c->probe == IBV_WR_RDMA_WRITE ? "WRITE" : c->probe == IBV_WR_RDMA_READ ? "READ" :
				      "atomic", st, c->probe_wc);
				/* IBA 10.6.7: the bind gave the window a new key; the old one is refused. */
				if (st == OK && old != key)
					CHECK(probe_window(&w, &m, IBV_WR_RDMA_WRITE, va, old, region) == RAE,
					      "%s: the key before the bind still admits a WRITE", c->name);
			}
		}
		uroce_mw_dealloc(mw);
		if (mr)
			CHECK(uroce_mr_dereg(mr) == 0, "%s: dereg", c->name);
		if (pm)
			CHECK(uroce_mr_dereg(pm) == 0, "%s: dereg", c->name);
		mem_fini(&m);
		atomic_store(&pd2->usecnt, 0);
		uroce_pd_dealloc(pd2);
		world_fini(&w);
	}
}

/* ---- ibv_rereg_mr, every combination of CHANGE_TRANSLATION (T), CHANGE_PD (P) and
 * CHANGE_ACCESS (A), end to end: qp[1]'s MR over 64 KiB (old) is reregistered to another
 * 64 KiB (new), a second PD and other rights; qp[0] holds the R_Key it was given before.
 * Each scenario runs on a fresh pair. ---- */
#define RR_LEN 65536u
#define RR_T IBV_REREG_MR_CHANGE_TRANSLATION
#define RR_P IBV_REREG_MR_CHANGE_PD
#define RR_A IBV_REREG_MR_CHANGE_ACCESS

struct rereg_env {
	struct world w;
	struct mem m;
	struct uroce_pd *pd2;
	struct uroce_mr *mr;
	uint8_t *old_buf, *new_buf;
	uint32_t lkey, rkey;           /* as registered: what qp[0] and the receive WQEs hold */
};

static void rereg_env_init(struct rereg_env *e, unsigned access)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };

	world_init(&e->w, &o, NULL);
	mem_init(&e->w, &e->m);
	CHECK(uroce_pd_alloc(e->w.ctx, &e->pd2) == 0, "pd2");
	e->old_buf = e->m.b + (1u << 20);
	e->new_buf = e->m.b + (2u << 20);
	memset(e->old_buf, 0x11, RR_LEN);
	memset(e->new_buf, 0x22, RR_LEN);
	CHECK(uroce_mr_reg(e->w.pd, e->old_buf, RR_LEN, (uintptr_t)e->old_buf, access, &e->mr) == 0, "reg");
	e->lkey = e->mr->mr.lkey;
	e->rkey = e->mr->mr.rkey;
}

static void rereg_env_fini(struct rereg_env *e)
{
	e->w.qp[1]->qpx.qp_base.pd = &e->w.pd->pd;
	CHECK(uroce_mr_dereg(e->mr) == 0, "dereg");
	mem_fini(&e->m);
	atomic_store(&e->pd2->usecnt, 0);
	uroce_pd_dealloc(e->pd2);
	world_fini(&e->w);
}

/* Reregister with this scenario's new values for the flags in @f; checks what changed. */
static int rereg_apply(struct rereg_env *e, int f, unsigned new_access)
{
	unsigned old_access = e->mr->access;
	int r = uroce_mr_rereg(e->mr, f, e->pd2, e->new_buf, RR_LEN, new_access);

	if (r)
		return r;
	/* The keys stay (as rxe and mlx5's in-place rereg): the peer's copy goes on working. */
	CHECK(e->mr->mr.lkey == e->lkey && e->mr->mr.rkey == e->rkey, "rereg %#x changed the keys", f);
	CHECK(e->mr->mr.pd == (f & RR_P ? &e->pd2->pd : &e->w.pd->pd), "rereg %#x: the PD", f);
	CHECK(e->mr->mr.addr == (f & RR_T ? e->new_buf : e->old_buf) && e->mr->mr.length == RR_LEN &&
	      e->mr->iova == (uintptr_t)e->mr->mr.addr, "rereg %#x: the translation", f);
	CHECK(e->mr->access == (f & RR_A ? new_access : old_access), "rereg %#x: the rights", f);
	return 0;
}

static enum ibv_wc_status rr_op(struct rereg_env *e, enum ibv_wr_opcode op, uint64_t va, uint32_t len,
				uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)e->m.a, len, e->m.ma->mr.lkey };
	struct ibv_wc wc;

	CHECK(post(&e->w, 0, op, 400, &s, 1, IBV_SEND_SIGNALED, va, rkey, 1, 0) == 0, "post");
	return wait_wc(&e->w, 0, &wc) ? wc.status : IBV_WC_GENERAL_ERR;
}

/* Remote READ, WRITE and atomic with the R_Key qp[0] was given, after the rereg.  The MR
 * starts with LOCAL_WRITE | REMOTE_READ and gains REMOTE_WRITE and REMOTE_ATOMIC with A.
 * With P, qp[1] stays in the old PD (refused) or, @moved, is a QP of the new one. */
static void rereg_remote(int f, bool moved)
{
	struct rereg_env e;
	bool pd_ok = !(f & RR_P) || moved, can_write = pd_ok && (f & RR_A);
	uint8_t *buf;
	uint64_t va;
	enum ibv_wc_status st;

	rereg_env_init(&e, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(rereg_apply(&e, f, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC) == 0, "rereg %#x", f);
	if (moved)
		e.w.qp[1]->qpx.qp_base.pd = &e.pd2->pd;
	buf = f & RR_T ? e.new_buf : e.old_buf;
	va = (uintptr_t)buf + 100;

	fill(buf + 100, 3000, 5);
	memset(e.m.a, 0, 3000);
	st = rr_op(&e, IBV_WR_RDMA_READ, va, 3000, e.rkey);
	CHECK(st == (pd_ok ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR), "rereg %#x%s: READ %d", f,
	      moved ? " (QP of the new PD)" : "", st);
	if (st != IBV_WC_SUCCESS)
		goto out;
	CHECK(!memcmp(e.m.a, buf + 100, 3000), "rereg %#x: READ from the %s translation", f,
	      f & RR_T ? "new" : "old");

	fill(e.m.a, 3000, 6);
	st = rr_op(&e, IBV_WR_RDMA_WRITE, va, 3000, e.rkey);
	CHECK(st == (can_write ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR), "rereg %#x%s: WRITE %d", f,
	      moved ? " (QP of the new PD)" : "", st);
	if (st != IBV_WC_SUCCESS)
		goto out;
	CHECK(!memcmp(e.m.a, buf + 100, 3000), "rereg %#x: WRITE into the translation", f);
	if (f & RR_T)
		CHECK(e.old_buf[100] == 0x11 && e.old_buf[3099] == 0x11, "rereg %#x: the old memory written", f);

	memset(buf + 4096, 0, 8);
	st = rr_op(&e, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)buf + 4096, 8, e.rkey);
	CHECK(st == IBV_WC_SUCCESS && buf[4096] == 1, "rereg %#x: atomic %d", f, st);
	if (f & RR_T) {
		/* The old translation is gone: its addresses are outside the MR now. */
		st = rr_op(&e, IBV_WR_RDMA_WRITE, (uintptr_t)e.old_buf + 100, 64, e.rkey);
		CHECK(st == IBV_WC_REM_ACCESS_ERR && e.old_buf[100] == 0x11,
		      "rereg %#x: WRITE into the old translation %d", f, st);
	}
out:
	rereg_env_fini(&e);
}

/* A receive WQE posted before the rereg points into the old translation with the lkey it
 * had: with T (outside the new range) or P (the MR left the QP's PD) the SEND that uses it
 * is a local protection error at qp[1] and a remote operational error at qp[0] (IBA
 * 9.7.5.2.x, as mlx5 answers; rdma-core's test_mr_rereg_addr/_pd); with A alone it works.
 * @after: the receive is posted after the rereg, into the current translation. */
static void rereg_recv(int f, bool after, bool moved)
{
	struct rereg_env e;
	struct ibv_wc wc;
	struct ibv_sge s = { 0, 100, 0 };
	bool fails = after ? (f & RR_P) && !moved : (f & RR_T) || ((f & RR_P) && !moved);
	uint8_t *buf;

	rereg_env_init(&e, IBV_ACCESS_LOCAL_WRITE);
	if (!after) {
		struct ibv_sge r = { (uintptr_t)e.old_buf, 4096, e.lkey };

		CHECK(post_recv(&e.w, 1, 60, &r, 1) == 0, "recv");
	}
	CHECK(rereg_apply(&e, f, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0, "rereg %#x", f);
	if (moved)
		e.w.qp[1]->qpx.qp_base.pd = &e.pd2->pd;
	buf = after && (f & RR_T) ? e.new_buf : e.old_buf;
	if (after) {
		struct ibv_sge r = { (uintptr_t)buf, 4096, e.mr->mr.lkey };

		CHECK(post_recv(&e.w, 1, 60, &r, 1) == 0, "recv");
	}
	s = (struct ibv_sge){ (uintptr_t)e.m.a, 100, e.m.ma->mr.lkey };
	fill(e.m.a, 100, 9);
	CHECK(post(&e.w, 0, IBV_WR_SEND, 61, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
	CHECK(wait_wc(&e.w, 0, &wc) && wc.wr_id == 61, "send wc");
	CHECK(wc.status == (fails ? IBV_WC_REM_OP_ERR : IBV_WC_SUCCESS), "rereg %#x, receive posted %s%s: the SEND %d",
	      f, after ? "after" : "before", moved ? ", QP of the new PD" : "", wc.status);
	CHECK(wait_wc(&e.w, 1, &wc) && wc.wr_id == 60 &&
	      wc.status == (fails ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS), "rereg %#x: the receive %d", f, wc.status);
	if (!fails)
		CHECK(!memcmp(buf, e.m.a, 100), "rereg %#x: the data received", f);
	else
		CHECK(e.old_buf[0] == 0x11 && e.new_buf[0] == 0x22, "rereg %#x: a refused receive wrote", f);
	rereg_env_fini(&e);
}

static bool delivered_n(struct world *w, void *arg)
{
	return w->delivered >= *(uint64_t *)arg;
}

/* A WRITE in progress when the MR changes: after its first packet the rereg takes away what
 * the rest needs (T: the range, P: the PD, A: REMOTE_WRITE), so the rest is refused and
 * lands nowhere; with @keep (A only, the rights kept) the WRITE completes. */
static void rereg_mid_write(int f, bool keep)
{
	struct rereg_env e;
	struct ibv_sge s;
	struct ibv_wc wc;
	uint64_t n;
	bool ok = keep;

	rereg_env_init(&e, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	s = (struct ibv_sge){ (uintptr_t)e.m.a, 3000, e.m.ma->mr.lkey };
	fill(e.m.a, 3000, 10);
	n = e.w.delivered + 1;
	CHECK(post(&e.w, 0, IBV_WR_RDMA_WRITE, 70, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)e.old_buf, e.rkey, 0, 0) == 0,
	      "write");
	CHECK(world_run(&e.w, delivered_n, &n, 1000000000ull) == 0, "the first packet");
	CHECK(!memcmp(e.old_buf, e.m.a, 1024) && e.old_buf[1024] == 0x11, "the first packet placed alone");
	CHECK(rereg_apply(&e, f, keep ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
				 : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0, "rereg %#x", f);
	CHECK(wait_wc(&e.w, 0, &wc) && wc.wr_id == 70 &&
	      wc.status == (ok ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR), "rereg %#x%s in the middle of a WRITE: %d",
	      f, keep ? " (rights kept)" : "", wc.status);
	if (ok) {
		CHECK(!memcmp(e.old_buf, e.m.a, 3000), "rereg %#x: the WRITE's data", f);
	} else {
		bool untouched = true;

		for (uint32_t i = 1024; i < 3000; i++)
			untouched &= e.old_buf[i] == 0x11 && e.new_buf[i] == 0x22;
		CHECK(untouched, "rereg %#x: the rest of the WRITE landed after the key lost its rights", f);
	}
	rereg_env_fini(&e);
}

/* An MR with a bound window is not reregistered (IBA 10.6.7): EBUSY, nothing changes and
 * the window keeps working; once the window is invalidated the rereg goes through. */
static void rereg_busy(int f)
{
	struct rereg_env e;
	struct uroce_mw *mw;
	struct ibv_wc wc;
	struct ibv_sge s;
	uint32_t key;

	rereg_env_init(&e, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(uroce_mw_alloc(e.w.pd, IBV_MW_TYPE_2, &mw) == 0, "mw");
	key = (mw->mw.rkey & ~0xFFu) | ((mw->mw.rkey + 1) & 0xFFu);
	{
		struct ibv_send_wr wr = { .wr_id = 80, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.bind_mw.mw = &mw->mw;
		wr.bind_mw.rkey = key;
		wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ &e.mr->mr, (uintptr_t)e.old_buf, 4096,
								  IBV_ACCESS_REMOTE_WRITE };
		CHECK(uroce_qp_post_send(e.w.qp[1], &wr, &bad) == 0 && wait_wc(&e.w, 1, &wc) &&
		      wc.status == IBV_WC_SUCCESS, "bind");
	}
	CHECK(uroce_mr_rereg(e.mr, f, e.pd2, e.new_buf, RR_LEN, IBV_ACCESS_LOCAL_WRITE) == -EBUSY,
	      "rereg %#x with a bound window", f);
	CHECK(e.mr->mr.pd == &e.w.pd->pd && e.mr->mr.addr == e.old_buf && e.mr->mr.lkey == e.lkey &&
	      (e.mr->access & IBV_ACCESS_REMOTE_WRITE), "rereg %#x: a refused rereg changed the MR", f);
	s = (struct ibv_sge){ (uintptr_t)e.m.a, 64, e.m.ma->mr.lkey };
	fill(e.m.a, 64, 11);
	CHECK(post(&e.w, 0, IBV_WR_RDMA_WRITE, 81, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)e.old_buf, key, 0, 0) == 0 &&
	      wait_wc(&e.w, 0, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(e.old_buf, e.m.a, 64),
	      "rereg %#x: the window after the refused rereg", f);
	{
		struct ibv_send_wr wr = { .wr_id = 82, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.invalidate_rkey = key;
		CHECK(uroce_qp_post_send(e.w.qp[1], &wr, &bad) == 0 && wait_wc(&e.w, 1, &wc) &&
		      wc.status == IBV_WC_SUCCESS, "local_inv");
	}
	CHECK(rereg_apply(&e, f, IBV_ACCESS_LOCAL_WRITE) == 0, "rereg %#x after the window's invalidation", f);
	uroce_mw_dealloc(mw);
	rereg_env_fini(&e);
}

static void test_rereg(void)
{
	/* Inputs are checked before anything changes (ib_uverbs_rereg_mr). */
	{
		struct rereg_env e;
		const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;

		rereg_env_init(&e, acc);
		CHECK(uroce_mr_rereg(e.mr, 0, NULL, NULL, 0, 0) == -EINVAL, "no flags");
		CHECK(uroce_mr_rereg(e.mr, 1 << 3, NULL, NULL, 0, 0) == -EINVAL, "an unknown flag");
		CHECK(uroce_mr_rereg(e.mr, RR_T | RR_P | RR_A, NULL, e.new_buf, RR_LEN, acc) == -EINVAL, "no PD");
		CHECK(uroce_mr_rereg(e.mr, RR_T | RR_P | RR_A, e.pd2, e.new_buf, 0, acc) == -EINVAL, "zero length");
		CHECK(uroce_mr_rereg(e.mr, RR_T | RR_P | RR_A, e.pd2, e.new_buf, RR_LEN, IBV_ACCESS_REMOTE_WRITE) ==
		      -EINVAL, "remote write without local write (IBA 10.6.3)");
		CHECK(uroce_mr_rereg(e.mr, RR_T | RR_P | RR_A, e.pd2, e.new_buf, RR_LEN, IBV_ACCESS_ON_DEMAND) ==
		      -EOPNOTSUPP, "on demand");
		CHECK(e.mr->mr.pd == &e.w.pd->pd && e.mr->mr.addr == e.old_buf && e.mr->access == acc &&
		      e.mr->mr.lkey == e.lkey && atomic_load(&e.pd2->usecnt) == 0, "a failed rereg changed the MR");
		rereg_env_fini(&e);
	}
	for (int f = 1; f <= (RR_T | RR_P | RR_A); f++) {
		rereg_remote(f, false);
		rereg_recv(f, false, false);
		rereg_recv(f, true, false);
		if (f & RR_P) {
			rereg_remote(f, true);
			rereg_recv(f, false, true);
			rereg_recv(f, true, true);
		}
		rereg_mid_write(f, false);
		if (f == RR_A)
			rereg_mid_write(f, true);
		rereg_busy(f);
	}
}

/* ---- sq_sig_all, fences, solicited events ---- */
static void test_sig_fence_se(void)
{
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 4 };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct ibv_sge s;

	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	s = (struct ibv_sge){ (uintptr_t)m.a, 64, m.ma->mr.lkey };

	/* sq_sig_all: an unsignaled WRITE completes anyway (IBA 11.2.4.1). */
	w.qp[0]->sq_sig_all = 1;
	CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 10, &s, 1, 0, (uintptr_t)m.b, m.mb->mr.rkey, 0, 0) == 0, "write");
	CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 10 && wc.status == IBV_WC_SUCCESS,
	      "sq_sig_all: the unsignaled WRITE completed");
	w.qp[0]->sq_sig_all = 0;

	/* A fenced WRITE waits for the READ before it (IBA 10.8.3.3); without the fence it
	 * leaves behind the READ at once.  The requester runs inside the post, so right after
	 * posting the WRITE has been started, or not. */
	for (int fence = 0; fence < 2; fence++) {
		struct uroce_rc *rc = uroce_rc_of(w.qp[0]);
		uint32_t widx;

		CHECK(post(&w, 0, IBV_WR_RDMA_READ, 20, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b + 4096,
			   m.mb->mr.rkey, 0, 0) == 0, "read");
		widx = w.qp[0]->sq.tail;
		CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 21, &s, 1,
			   IBV_SEND_SIGNALED | (fence ? IBV_SEND_FENCE : 0), (uintptr_t)m.b + 8192,
			   m.mb->mr.rkey, 0, 0) == 0, "write");
		CHECK(rc->swqe[widx & (w.qp[0]->sq.size - 1)].started == !fence,
		      "%s WRITE behind an outstanding READ: started %d", fence ? "a fenced" : "an unfenced",
		      rc->swqe[widx & (w.qp[0]->sq.size - 1)].started);
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 20 && wc.status == IBV_WC_SUCCESS, "read wc");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 21 && wc.status == IBV_WC_SUCCESS, "write wc");
	}

	/* max_rd_atomic (4 here) READs in flight at most (IBA 9.7.7.2): of 6 posted at once, 4
	 * have started right after the posts; all 6 complete, each with its data. */
	{
		struct uroce_rc *rc = uroce_rc_of(w.qp[0]);
		uint32_t first = w.qp[0]->sq.tail;
		struct ibv_sge rs[6];
		unsigned started = 0;

		fill(m.b + 65536, 6 * 64, 77);
		for (int i = 0; i < 6; i++) {
			rs[i] = (struct ibv_sge){ (uintptr_t)m.a + 65536 + i * 64, 64, m.ma->mr.lkey };
			CHECK(post(&w, 0, IBV_WR_RDMA_READ, 60 + (uint64_t)i, &rs[i], 1, IBV_SEND_SIGNALED,
				   (uintptr_t)m.b + 65536 + i * 64, m.mb->mr.rkey, 0, 0) == 0, "read %d", i);
		}
		for (uint32_t i = 0; i < 6; i++)
			started += rc->swqe[(first + i) & (w.qp[0]->sq.size - 1)].started;
		CHECK(started == 4, "%u of 6 READs started with max_rd_atomic 4", started);
		for (int i = 0; i < 6; i++)
			CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 60 + (uint64_t)i && wc.status == IBV_WC_SUCCESS,
			      "read %d wc", i);
		CHECK(!memcmp(m.a + 65536, m.b + 65536, 6 * 64), "the READs' data");
	}

	/* Solicited events: qp[1]'s CQ armed for solicited completions only is not triggered
	 * by a plain SEND, and is by one with IBV_SEND_SOLICITED (IBA 11.4.2.2; the SE bit). */
	{
		struct ibv_sge r = { (uintptr_t)m.b, 4096, m.mb->mr.lkey };
		struct ibv_send_wr wr = { .wr_id = 31, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		CHECK(uroce_cq_arm(w.cq[1], 1) == 0, "arm solicited");
		CHECK(post_recv(&w, 1, 40, &r, 1) == 0 && post_recv(&w, 1, 41, &r, 1) == 0, "recvs");
		CHECK(uroce_qp_post_send(w.qp[0], &wr, &bad) == 0, "send");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 40, "plain send received");
		CHECK(w.cq[1]->r.arm == UROCE_CQ_ARM_SOLICITED, "a plain SEND fired a solicited-only arm");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 31, "send wc");
		wr.wr_id = 32;
		wr.send_flags |= IBV_SEND_SOLICITED;
		CHECK(uroce_qp_post_send(w.qp[0], &wr, &bad) == 0, "send se");
		CHECK(wait_wc(&w, 1, &wc) && wc.wr_id == 41, "solicited send received");
		CHECK(w.cq[1]->r.arm == UROCE_CQ_DISARMED, "the solicited SEND did not fire the arm");
		CHECK(wait_wc(&w, 0, &wc) && wc.wr_id == 32, "send se wc");
	}
	mem_fini(&m);
	world_fini(&w);
}


/* ---- one message of 1 GiB (the device advertises max_msg_sz 2 GiB): WRITE, READ, SEND,
 * each checked byte for byte ---- */
static void fill64(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

static void test_huge(size_t len)
{
	struct world_opts o = { .mtu = IBV_MTU_4096, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	struct world w;
	struct uroce_mr *ma, *mb;
	struct ibv_wc wc;
	struct ibv_sge sa, sb;
	uint8_t *a = aligned_alloc(4096, len), *b = aligned_alloc(4096, len);

	CHECK(a && b, "two buffers of %zu bytes", len);
	if (!a || !b)
		return;
	world_init(&w, &o, NULL);
	CHECK(uroce_mr_reg(w.pd, a, len, (uintptr_t)a, acc, &ma) == 0, "reg a");
	CHECK(uroce_mr_reg(w.pd, b, len, (uintptr_t)b, acc, &mb) == 0, "reg b");
	sa = (struct ibv_sge){ (uintptr_t)a, (uint32_t)len, ma->mr.lkey };
	sb = (struct ibv_sge){ (uintptr_t)b, (uint32_t)len, mb->mr.lkey };

	fill64(a, len, 1);
	memset(b, 0, len);
	CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 1, &sa, 1, IBV_SEND_SIGNALED, (uintptr_t)b, mb->mr.rkey, 0, 0) == 0,
	      "write");
	CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(a, b, len),
	      "a %zu-byte WRITE: status %d", len, wc.status);

	fill64(b, len, 2);
	CHECK(post(&w, 0, IBV_WR_RDMA_READ, 2, &sa, 1, IBV_SEND_SIGNALED, (uintptr_t)b, mb->mr.rkey, 0, 0) == 0,
	      "read");
	CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && !memcmp(a, b, len),
	      "a %zu-byte READ: status %d", len, wc.status);

	fill64(a, len, 3);
	CHECK(post_recv(&w, 1, 3, &sb, 1) == 0, "recv");
	CHECK(post(&w, 0, IBV_WR_SEND, 4, &sa, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
	CHECK(wait_wc(&w, 1, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == len && !memcmp(a, b, len),
	      "a %zu-byte SEND received: status %d, %u bytes", len, wc.status, wc.byte_len);
	CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS, "send wc");
	printf("huge: WRITE, READ and SEND of %zu bytes each, every byte checked; %llu packets delivered\n",
	       len, (unsigned long long)w.delivered);
	uroce_mr_dereg(ma);
	uroce_mr_dereg(mb);
	world_fini(&w);
	free(a);
	free(b);
}

/* ---- IBA 9.6.1.1: the P_Key of every received packet, requests and responses ---- */

/* Free every packet queued on the wire; their number, and the headers of the last in *last. */
static unsigned wire_flush(struct world *w, struct uroce_pkt *last)
{
	unsigned n = 0;

	while (w->head) {
		struct wpkt *p = w->head;

		w->head = p->next;
		if (last && uroce_pkt_validate(p->buf, p->len, NULL, last) != UROCE_RX_OK)
			last->bth.opcode = 0xFF;
		free(p);
		n++;
	}
	w->tail = NULL;
	return n;
}

/* Build @p (+ @plen payload bytes) for qp[to], with a good ICRC, and deliver it now through
 * the wire's receive check. */
static void deliver_crafted(struct world *w, int to, struct uroce_pkt *p, const uint8_t *payload,
			    uint32_t plen)
{
	struct wpkt *q = malloc(sizeof(*q) + UROCE_RC_MAX_PKT);
	long n;

	p->bth.dqpn = w->qp[to]->qpx.qp_base.qp_num;
	p->bth.padcnt = (uint8_t)uroce_pad_for(plen);
	p->payload = payload;
	p->payload_len = plen;
	n = uroce_pkt_encode(q->buf, UROCE_RC_MAX_PKT, p);
	CHECK(n > 0, "encode opcode 0x%02x: %ld", p->bth.opcode, n);
	if (n > 0) {
		q->to = to;
		q->len = (size_t)n;
		uroce_icrc_set(&w->addr, q->buf, q->len);
		world_deliver(w, q);
	}
	free(q);
}

static void test_pkey(void)
{
	/* Other partitions (full and limited member), the invalid P_Key in both memberships,
	 * and a neighbour of the default partition. */
	static const uint16_t bad[] = { 0x1234, 0x9234, 0x0000, 0x8000, 0x7FFE, 0xFFFE };
	/* The table's one entry is 0xFFFF, a full member: the default partition matches as a
	 * full and as a limited member (IBA 10.9). */
	static const uint16_t good[] = { 0xFFFF, 0x7FFF };
	struct world_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	struct world w;
	struct mem m;
	struct ibv_sge sa, sb;
	struct ibv_wc wc;
	struct uroce_pkt p, out;
	struct uroce_rc *r0, *r1;
	uint8_t data[64];
	uint16_t k;

	CHECK(uroce_query_pkey(NULL, 1, 0, &k) == 0 && k == 0xFFFF, "the table's entry 0 is 0xFFFF");
	CHECK(uroce_query_pkey(NULL, 1, UROCE_PKEY_TBL_LEN, &k) == -EINVAL, "past the table");
	world_init(&w, &o, NULL);
	mem_init(&w, &m);
	r0 = uroce_rc_of(w.qp[0]);
	r1 = uroce_rc_of(w.qp[1]);
	fill(data, sizeof(data), 9);
	sa = (struct ibv_sge){ (uintptr_t)m.a, sizeof(data), m.ma->mr.lkey };
	sb = (struct ibv_sge){ (uintptr_t)m.b, 4096, m.mb->mr.lkey };

	/* Requests to qp[1]'s responder: a SEND_ONLY with AckReq at the expected PSN. */
	CHECK(post_recv(&w, 1, 1, &sb, 1) == 0, "recv");
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t psn = r1->resp_psn;

		memset(&p, 0, sizeof(p));
		p.bth.opcode = UROCE_OP_RC | UROCE_OP_SEND_ONLY;
		p.bth.ackreq = true;
		p.bth.psn = psn;
		p.bth.pkey = bad[i];
		deliver_crafted(&w, 1, &p, data, sizeof(data));
		CHECK(wire_flush(&w, NULL) == 0, "request with P_Key 0x%04x: no ACK or NAK", bad[i]);
		CHECK(uroce_cq_poll(w.cq[1], 1, &wc) == 0, "request with P_Key 0x%04x: not received", bad[i]);
		CHECK(r1->resp_psn == psn, "request with P_Key 0x%04x: expected PSN still %u (now %u)",
		      bad[i], psn, r1->resp_psn);
		CHECK(r1->st.drops[UROCE_RC_DROP_BAD_PKEY] == i + 1, "request with P_Key 0x%04x: drop %u counted (%llu)",
		      bad[i], i + 1, (unsigned long long)r1->st.drops[UROCE_RC_DROP_BAD_PKEY]);
	}
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint32_t psn = r1->resp_psn;

		if (i)
			CHECK(post_recv(&w, 1, 1 + i, &sb, 1) == 0, "recv");
		memset(&p, 0, sizeof(p));
		p.bth.opcode = UROCE_OP_RC | UROCE_OP_SEND_ONLY;
		p.bth.ackreq = true;
		p.bth.psn = psn;
		p.bth.pkey = good[i];
		deliver_crafted(&w, 1, &p, data, sizeof(data));
		CHECK(wire_flush(&w, &out) == 1 && out.bth.opcode == (UROCE_OP_RC | UROCE_OP_ACK) &&
			      out.bth.psn == psn,
		      "request with P_Key 0x%04x: ACKed (opcode 0x%02x psn %u)", good[i], out.bth.opcode,
		      out.bth.psn);
		CHECK(uroce_cq_poll(w.cq[1], 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
			      wc.byte_len == sizeof(data) && wc.wr_id == 1 + i && !memcmp(m.b, data, sizeof(data)),
		      "request with P_Key 0x%04x: received", good[i]);
	}
	CHECK(r1->st.drops[UROCE_RC_DROP_BAD_PKEY] == sizeof(bad) / sizeof(bad[0]), "no more drops");

	/* Responses to qp[0]'s requester: its SEND is taken off the wire, ACKs are forged. */
	CHECK(post(&w, 0, IBV_WR_SEND, 7, &sa, 1, IBV_SEND_SIGNALED, 0, 0, 0, 0) == 0, "send");
	CHECK(wire_flush(&w, &out) == 1 && out.bth.opcode == (UROCE_OP_RC | UROCE_OP_SEND_ONLY),
	      "the SEND went out");
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.bth.opcode = UROCE_OP_RC | UROCE_OP_ACK;
		p.bth.psn = out.bth.psn;
		p.bth.pkey = bad[i];
		p.aeth.syndrome = 0x1F;               /* ACK, credits invalid */
		p.aeth.msn = 1;
		deliver_crafted(&w, 0, &p, NULL, 0);
		CHECK(uroce_cq_poll(w.cq[0], 1, &wc) == 0, "ACK with P_Key 0x%04x: the SEND not completed",
		      bad[i]);
		CHECK(r0->comp_psn == out.bth.psn, "ACK with P_Key 0x%04x: nothing acknowledged", bad[i]);
		CHECK(r0->st.drops[UROCE_RC_DROP_BAD_PKEY] == i + 1, "ACK with P_Key 0x%04x: drop counted",
		      bad[i]);
	}
	memset(&p, 0, sizeof(p));
	p.bth.opcode = UROCE_OP_RC | UROCE_OP_ACK;
	p.bth.psn = out.bth.psn;
	p.bth.pkey = 0x7FFF;
	p.aeth.syndrome = 0x1F;
	p.aeth.msn = 1;
	deliver_crafted(&w, 0, &p, NULL, 0);
	CHECK(uroce_cq_poll(w.cq[0], 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7,
	      "ACK with P_Key 0x7FFF completes the SEND");
	wire_flush(&w, NULL);
	mem_fini(&m);
	world_fini(&w);
}

/* Credits (rc.h io.credit_take, rc_req.c): a mock budget of 64 KiB, half of one QP's
 * window at MTU 1024, so qp[0] waits for its own ACKs to return credits.  Whatever the
 * messages, losses and state changes, every credit comes back: after WRITEs and READs,
 * under loss (go-backs return and re-reserve), when the application moves a QP with
 * packets in flight to Error (nothing acknowledges them then), and at detach. */
#define CR_BUDGET (64u << 10)
static int64_t cr_free;
static uint64_t cr_refused, cr_over;

static bool mock_take(void *arg, uint32_t bytes)
{
	(void)arg;
	if (cr_free < (int64_t)bytes) {
		cr_refused++;
		return false;
	}
	cr_free -= bytes;
	return true;
}

static void mock_give(void *arg, uint32_t bytes)
{
	(void)arg;
	cr_free += bytes;
	if (cr_free > (int64_t)CR_BUDGET)
		cr_over++;
}

static void credits_world(struct world *w, struct mem *m, const char *fault)
{
	struct world_opts o = { .timeout = 10, .retry_cnt = 7, .rnr_retry = 7, .xmitv = opt_xmitv };

	world_init(w, &o, fault);
	mem_init(w, m);
	cr_free = CR_BUDGET;
	cr_refused = cr_over = 0;
	for (int i = 0; i < 2; i++) {
		struct uroce_rc *rc = uroce_rc_of(w->qp[i]);

		rc->io.credit_take = mock_take;
		rc->io.credit_give = mock_give;
	}
}

static void test_credits(void)
{
	const char *faults[] = { NULL, "drop=0.05,dup=0.02,reorder=0.02,seed=5" };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	struct ibv_sge s;

	for (unsigned f = 0; f < 2; f++) {
		const uint32_t n = 16, len = 64u << 10;
		bool ok = true;

		credits_world(&w, &m, faults[f]);
		fill(m.a, (size_t)n * len, 11 + f);
		fill(m.b + (size_t)n * len, (size_t)4 * len, 21 + f);
		for (uint32_t i = 0; i < n; i++) {
			s = (struct ibv_sge){ (uintptr_t)m.a + (size_t)i * len, len, m.ma->mr.lkey };
			CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, i, &s, 1, IBV_SEND_SIGNALED,
				   (uintptr_t)m.b + (size_t)i * len, m.mb->mr.rkey, 0, 0) == 0, "write %u", i);
		}
		for (uint32_t i = 0; i < 4; i++) {   /* READs reserve their responses */
			s = (struct ibv_sge){ (uintptr_t)m.a + (size_t)(n + i) * len, len, m.ma->mr.lkey };
			CHECK(post(&w, 0, IBV_WR_RDMA_READ, n + i, &s, 1, IBV_SEND_SIGNALED,
				   (uintptr_t)m.b + (size_t)(n + i) * len, m.mb->mr.rkey, 0, 0) == 0,
			      "read %u", i);
		}
		for (uint32_t i = 0; i < n + 4; i++)
			ok &= wait_wc(&w, 0, &wc) && wc.wr_id == i && wc.status == IBV_WC_SUCCESS;
		CHECK(ok, "credits %s: every WRITE and READ completes in order",
		      faults[f] ? faults[f] : "clean");
		CHECK(!memcmp(m.a, m.b, (size_t)(n + 4) * len), "credits %s: the data arrived",
		      faults[f] ? faults[f] : "clean");
		CHECK(cr_refused > 0, "credits %s: the budget held the requester back",
		      faults[f] ? faults[f] : "clean");
		CHECK(cr_free == CR_BUDGET && !cr_over, "credits %s: all returned (%lld of %u free, %llu over)",
		      faults[f] ? faults[f] : "clean", (long long)cr_free, CR_BUDGET,
		      (unsigned long long)cr_over);
		mem_fini(&m);
		world_fini(&w);
	}

	/* Packets in flight that nobody will acknowledge (the peer unreachable), then the
	 * application moves the QP to Error: the credits come back at once, not at detach. */
	credits_world(&w, &m, NULL);
	w.lost_to = 1u << 1;
	s = (struct ibv_sge){ (uintptr_t)m.a, 64u << 10, m.ma->mr.lkey };
	CHECK(post(&w, 0, IBV_WR_RDMA_WRITE, 1, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)m.b,
		   m.mb->mr.rkey, 0, 0) == 0, "write");
	CHECK(cr_free < (int64_t)CR_BUDGET, "credits held for the packets in flight");
	pthread_mutex_lock(&w.qp[0]->lock);
	w.qp[0]->attr.qp_state = IBV_QPS_ERR;     /* what verbs' modify does, then unlocks */
	w.qp[0]->qpx.qp_base.state = IBV_QPS_ERR;
	uroce_rc_unlock_qp(w.qp[0]);
	CHECK(cr_free == CR_BUDGET, "moved to Error: credits returned (%lld of %u free)",
	      (long long)cr_free, CR_BUDGET);
	mem_fini(&m);
	world_fini(&w);
	CHECK(cr_free == CR_BUDGET && !cr_over, "after detach: all returned, none twice");
}

/* ---- MIDDLE packets in runs (rc_req.c burst_middle) are those of the state machine ----
 * The same messages (SEND, SEND with immediate, WRITE, WRITE with immediate; one SGE, and two,
 * which the run does not take) at three MTUs, sizes around the 64-packet AckReq and beyond the
 * 128-PSN window, with UROCE_RC_BURST=0 and =1: every request packet qp[0] sends must be the
 * same, byte for byte and in the same order, and the run must have been taken. */
struct burst_log {
	size_t n, bytes, cap;
	uint8_t *buf;
	size_t *len;
	uint64_t b_base;               /* the target buffer of this run's WRITEs */
};

static void burst_sniff(struct world *w, int to, const uint8_t *buf, size_t len)
{
	struct burst_log *l = w->sniff_arg;

	if (to != 1)
		return;
	if (l->n % 1024 == 0)
		l->len = realloc(l->len, (l->n + 1024) * sizeof(*l->len));
	if (l->bytes + len > l->cap) {
		l->cap = (l->bytes + len) * 2;
		l->buf = realloc(l->buf, l->cap);
	}
	memcpy(l->buf + l->bytes, buf, len);
	/* What differs between the two runs' worlds whatever the packets: the target buffer's
	 * address and R_Key in a WRITE's RETH, and so the ICRC.  Made relative / cleared. */
	if (len >= 28 && (buf[0] == UROCE_OP_WRITE_FIRST || buf[0] == UROCE_OP_WRITE_ONLY ||
			  buf[0] == UROCE_OP_WRITE_ONLY_IMM)) {
		uroce_put_be64(l->buf + l->bytes + 12, uroce_get_be64(buf + 12) - l->b_base);
		uroce_put_be32(l->buf + l->bytes + 20, 0);
	}
	memset(l->buf + l->bytes + len - UROCE_ICRC_LEN, 0, UROCE_ICRC_LEN);
	l->bytes += len;
	l->len[l->n++] = len;
}

static uint64_t burst_run(enum ibv_mtu mtu, bool burst, struct burst_log *l, uint64_t *runs)
{
	struct world_opts o = { .mtu = mtu, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				.min_rnr_timer = 1, .psn0 = 0xFFFFC0, .xmitv = true };
	const uint32_t m_ = 128u << mtu;
	const uint32_t sizes[] = { m_ + 1, 3 * m_, 64 * m_, 70 * m_ + 3, 200 * m_ };
	const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					   IBV_WR_RDMA_WRITE_WITH_IMM };
	struct world w;
	struct mem m;
	struct ibv_wc wc;
	uint64_t id = 0, tx;

	setenv("UROCE_RC_BURST", burst ? "1" : "0", 1);
	world_init(&w, &o, NULL);
	unsetenv("UROCE_RC_BURST");
	mem_init(&w, &m);
	w.sniff = burst_sniff;
	w.sniff_arg = l;
	l->b_base = (uintptr_t)m.b;
	fill(m.a, BUF, 7);
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (unsigned op = 0; op < 4; op++)
			for (int nsge = 1; nsge <= 2; nsge++) {
				uint32_t n = sizes[k];
				struct ibv_sge s[2] = { { (uintptr_t)m.a, n, m.ma->mr.lkey },
							{ (uintptr_t)m.a + n, 0, m.ma->mr.lkey } };
				struct ibv_sge r = { (uintptr_t)m.b, BUF, m.mb->mr.lkey };
				bool recv = ops[op] != IBV_WR_RDMA_WRITE;

				if (nsge == 2) {      /* the same bytes in two pieces */
					s[0].length = n / 2;
					s[1] = (struct ibv_sge){ (uintptr_t)m.a + n / 2, n - n / 2,
								 m.ma->mr.lkey };
				}
				if (recv)
					CHECK(post_recv(&w, 1, id, &r, 1) == 0, "recv");
				CHECK(post(&w, 0, ops[op], id, s, nsge, IBV_SEND_SIGNALED,
					   (uintptr_t)m.b, m.mb->mr.rkey, 0, 0) == 0, "post");
				CHECK(wait_wc(&w, 0, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == id,
				      "burst %d mtu %u: %u bytes, op %d, %d SGEs", burst, m_, n, ops[op], nsge);
				if (recv)
					CHECK(wait_wc(&w, 1, &wc) && wc.status == IBV_WC_SUCCESS, "recv wc");
				CHECK(!memcmp(m.a, m.b, n), "data");
				id++;
			}
	tx = uroce_rc_of(w.qp[0])->st.tx_packets;
	*runs = uroce_rc_of(w.qp[0])->st.tx_runs;
	mem_fini(&m);
	world_fini(&w);
	return tx;
}

static void test_burst(void)
{
	const enum ibv_mtu mtus[] = { IBV_MTU_256, IBV_MTU_1024, IBV_MTU_4096 };

	for (unsigned i = 0; i < 3; i++) {
		struct burst_log a = { 0 }, b = { 0 };
		uint64_t ra, rb, ta = burst_run(mtus[i], false, &a, &ra), tb = burst_run(mtus[i], true, &b, &rb);
		size_t first_diff = SIZE_MAX;

		for (size_t k = 0, off = 0; k < a.n && k < b.n; off += a.len[k], k++)
			if (a.len[k] != b.len[k] || memcmp(a.buf + off, b.buf + off, a.len[k])) {
				first_diff = k;
				fprintf(stderr, "burst: packet #%zu differs (%zu and %zu bytes):\n", k,
					a.len[k], b.len[k]);
				for (size_t j = 0; j < 32 && j < a.len[k] && j < b.len[k]; j++)
					fprintf(stderr, "%02x/%02x%s", a.buf[off + j], b.buf[off + j],
						j % 8 == 7 ? "\n" : " ");
				break;
			}
		CHECK(a.n == b.n && ta == tb && first_diff == SIZE_MAX,
		      "mtu %u: %zu packets by the state machine, %zu in runs; first difference at #%zu",
		      128u << mtus[i], a.n, b.n, first_diff);
		CHECK(a.n > 1000, "mtu %u: %zu packets", 128u << mtus[i], a.n);
		CHECK(ra == 0 && rb > a.n / 4, "mtu %u: %llu of %zu packets built in runs (%llu with "
		      "UROCE_RC_BURST=0)", 128u << mtus[i], (unsigned long long)rb, b.n,
		      (unsigned long long)ra);
		free(a.buf);
		free(a.len);
		free(b.buf);
		free(b.len);
	}
}

int main(int argc, char **argv)
{
	size_t lossy_bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (64u << 20);

	/* "mw": the memory region and window tests alone (ctest transport_rc_mw). */
	if (argc > 1 && !strcmp(argv[1], "mw")) {
		test_srq_wr_mw();
		test_local_inv_mw1();
		test_mw_bind_rules();
		test_rereg();
		return check_summary();
	}
	if (argc > 1 && !strcmp(argv[1], "huge")) {
		test_huge(argc > 2 ? strtoull(argv[2], NULL, 0) : (1u << 30));
		return check_summary();
	}

	test_ops(0, IBV_MTU_1024);
	test_ops(0xFFFFF0, IBV_MTU_4096);     /* PSN wrap inside a message */
	test_ops(0x7FFFFF, IBV_MTU_256);
	test_rnr();
	test_srq_wr_mw();
	test_dead_peer();
	test_fatal_naks();
	test_sig_fence_se();
	test_local_inv_mw1();
	test_mw_bind_rules();
	test_rereg();
	test_pkey();
	test_credits();
	test_window();
	test_lossy(NULL, 4u << 20, 1000);
	test_lossy("drop=0.05,dup=0.02,reorder=0.02,corrupt=0.01,seed=1", lossy_bytes, 20000);
	test_lossy("drop=0.2,dup=0.1,reorder=0.1,corrupt=0.05,seed=2", 8u << 20, 4000);
	test_burst();
	/* Again with io.xmitv, as engine.c binds it: MIDDLE packets in runs, under loss too. */
	opt_xmitv = true;
	test_ops(0, IBV_MTU_1024);
	test_ops(0xFFFFF0, IBV_MTU_4096);
	test_credits();
	test_window();
	test_lossy("drop=0.05,dup=0.02,reorder=0.02,corrupt=0.01,seed=3", 16u << 20, 4000);
	test_lossy("drop=0.2,dup=0.1,reorder=0.1,corrupt=0.05,seed=4", 8u << 20, 4000);
	return check_summary();
}
