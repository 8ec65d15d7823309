/* test_golden.c — interop sanity against Linux Soft-RoCE (the captures in tests/data).
 *
 * For each capture, the requests the client sent to rxe's responder are fed, in capture
 * order, to uroce's responder; what uroce answers is compared with what rxe answered, key
 * fields only: opcode, PSN, AckReq, AETH syndrome (ACK credits / RNR timer code / NAK
 * code), MSN, payload length.  That covers where the spec leaves room and the captures
 * show rxe's choice: which requests get an ACK (AckReq only, one per message), the MSN an
 * ACK carries, the RNR NAK's timer code and PSN, the NAK code of a bad R_Key, READ
 * response segmentation and its AETHs, atomic ACKs.
 *
 * Adaptations (inputs, not expectations): R_Keys are translated (the first R_Key the
 * capture uses maps to our MR's, any other to a key that does not exist), the responder's
 * memory covers the virtual addresses the capture's RETHs name, and the QP is configured
 * as the capture's command lines say (MTU 1024, receives posted unless the capture is the
 * RNR one, whose server posted none; min_rnr_timer as rxe-verbs-ops set it).
 */
#include "rc_world.h"

#include <stdio.h>

#include "net/frame.h"
#include "net/pcap_io.h"

#ifndef UROCE_TEST_DATA
#define UROCE_TEST_DATA "tests/data"
#endif

#define MAXP 128

struct gpkt {
	uint8_t buf[2048];
	size_t len;
	struct uroce_pkt p;
	uint32_t src;          /* IPv4 source, network order */
};

struct capture {
	struct gpkt pk[MAXP];
	unsigned n;
};

static int collect(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame,
		   size_t len, int linktype)
{
	struct capture *c = arg;
	struct uroce_frame f;
	struct gpkt *g;

	(void)idx;
	(void)ts;
	if (uroce_pcap_frame(frame, len, linktype, &f) || f.dport != UROCE_UDP_PORT ||
	    f.family != AF_INET || c->n >= MAXP || f.payload_len > sizeof(g->buf))
		return 0;
	g = &c->pk[c->n];
	memcpy(g->buf, f.payload, f.payload_len);
	g->len = f.payload_len;
	g->src = f.src.v4.s_addr;
	if (uroce_pkt_validate(g->buf, g->len, &(struct uroce_rx_ctx){ 0 }, &g->p) != UROCE_RX_OK)
		return 0;
	if (uroce_opcode_transport(g->p.bth.opcode) != UROCE_TRANSPORT_RC)
		return 0;
	c->n++;
	return 0;
}

static bool is_req(const struct gpkt *g) { return g->p.op->mask & UROCE_OPF_REQ; }

static void compare(const char *name, const struct uroce_pkt *want, const struct uroce_pkt *got, unsigned i)
{
	CHECK(want->bth.opcode == got->bth.opcode, "%s #%u: opcode %s, uroce %s", name, i,
	      uroce_opcode_name(want->bth.opcode), uroce_opcode_name(got->bth.opcode));
	CHECK(want->bth.psn == got->bth.psn, "%s #%u: PSN %u, uroce %u", name, i, want->bth.psn, got->bth.psn);
	CHECK(want->bth.ackreq == got->bth.ackreq, "%s #%u: AckReq %d, uroce %d", name, i,
	      want->bth.ackreq, got->bth.ackreq);
	CHECK(want->bth.dqpn == got->bth.dqpn, "%s #%u: dest QP", name, i);
	CHECK(want->payload_len == got->payload_len, "%s #%u: payload %u, uroce %u", name, i,
	      want->payload_len, got->payload_len);
	if (want->op->mask & UROCE_OPF_AETH) {
		CHECK(want->aeth.syndrome == got->aeth.syndrome, "%s #%u: syndrome 0x%02x, uroce 0x%02x",
		      name, i, want->aeth.syndrome, got->aeth.syndrome);
		CHECK(want->aeth.msn == got->aeth.msn, "%s #%u: MSN %u, uroce %u", name, i,
		      want->aeth.msn, got->aeth.msn);
	}
}

static unsigned responses_checked;

static void run_capture(const char *file, bool post_recvs, uint8_t min_rnr_timer)
{
	static struct capture c;
	char path[512], err[256];
	struct world_opts o = { .mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				.min_rnr_timer = min_rnr_timer };
	struct world w;
	struct uroce_qp *qp;
	uint32_t server = 0, client_qpn = 0, server_qpn = 0, rkey0 = 0;
	uint64_t lo = UINT64_MAX, hi = 0;
	uint8_t *mem = NULL, *rbuf;
	struct uroce_mr *mr = NULL, *rmr;
	unsigned want_i = 0, got = 0;

	c.n = 0;
	snprintf(path, sizeof(path), "%s/%s", UROCE_TEST_DATA, file);
	CHECK(uroce_pcap_foreach(path, collect, &c, err, sizeof(err)) == 0, "%s: %s", file, err);
	for (unsigned i = 0; i < c.n; i++) {
		struct gpkt *g = &c.pk[i];

		if (!is_req(g))
			continue;
		if (!server) {
			server = 1;
			server_qpn = g->p.bth.dqpn;
		}
		if (g->p.op->mask & UROCE_OPF_RETH && g->p.bth.dqpn == server_qpn) {
			if (!rkey0)
				rkey0 = g->p.reth.rkey;
			if (g->p.reth.va < lo)
				lo = g->p.reth.va;
			if (g->p.reth.va + g->p.reth.len > hi)
				hi = g->p.reth.va + g->p.reth.len;
		}
		if (g->p.op->mask & UROCE_OPF_ATMETH && g->p.bth.dqpn == server_qpn) {
			if (!rkey0)
				rkey0 = g->p.atmeth.rkey;
			if (g->p.atmeth.va < lo)
				lo = g->p.atmeth.va;
			if (g->p.atmeth.va + 8 > hi)
				hi = g->p.atmeth.va + 8;
		}
	}
	/* The client's QPN: the destination of the server's responses. */
	for (unsigned i = 0; i < c.n; i++)
		if (!is_req(&c.pk[i]) && c.pk[i].p.bth.dqpn != server_qpn) {
			client_qpn = c.pk[i].p.bth.dqpn;
			break;
		}
	CHECK(server_qpn && client_qpn, "%s: found the QPs", file);

	world_init(&w, &o, NULL);
	qp = w.qp[1];
	qp->qpx.qp_base.qp_num = server_qpn;
	qp->attr.dest_qp_num = client_qpn;
	if (hi > lo) {
		mem = calloc(1, hi - lo);
		CHECK(uroce_mr_reg(w.pd, mem, hi - lo, lo, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, &mr) == 0, "mr");
	}
	rbuf = calloc(1, 65536);
	CHECK(uroce_mr_reg(w.pd, rbuf, 65536, (uintptr_t)rbuf, IBV_ACCESS_LOCAL_WRITE, &rmr) == 0, "rmr");
	for (int i = 0; post_recvs && i < 64; i++) {
		struct ibv_sge s = { (uintptr_t)rbuf, 65536, rmr->mr.lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1 }, *bad;

		uroce_qp_post_recv(qp, &wr, &bad);
	}

	for (unsigned i = 0; i < c.n; i++) {
		struct gpkt *g = &c.pk[i];
		struct uroce_pkt p;

		if (!is_req(g) || g->p.bth.dqpn != server_qpn)
			continue;
		p = g->p;
		if (!got++) {
			struct uroce_rc *rc = uroce_rc_of(qp);

			rc->resp_psn = p.bth.psn;       /* the QP's rq_psn: the capture's first PSN */
		}
		if (p.op->mask & UROCE_OPF_RETH && mr)
			p.reth.rkey = p.reth.rkey == rkey0 ? mr->mr.rkey : mr->mr.rkey ^ 0x100;
		if (p.op->mask & UROCE_OPF_ATMETH && mr)
			p.atmeth.rkey = p.atmeth.rkey == rkey0 ? mr->mr.rkey : mr->mr.rkey ^ 0x100;
		pthread_mutex_lock(&qp->lock);
		pthread_mutex_lock(&qp->sq.lock);
		uroce_rc_input(qp, &p);
		pthread_mutex_unlock(&qp->sq.lock);
		uroce_rc_unlock_qp(qp);
		/* Compare everything uroce sent with rxe's next responses to this QP pair. */
		while (w.head) {
			struct wpkt *x = w.head;
			struct uroce_pkt mine;

			w.head = x->next;
			if (!w.head)
				w.tail = NULL;
			CHECK(uroce_pkt_validate(x->buf, x->len, &(struct uroce_rx_ctx){ .mtu = 1024 }, &mine) ==
			      UROCE_RX_OK, "%s: uroce's packet validates", file);
			while (want_i < c.n && (is_req(&c.pk[want_i]) || c.pk[want_i].p.bth.dqpn != client_qpn))
				want_i++;
			if (want_i >= c.n) {
				CHECK(0, "%s: uroce sent %s beyond the capture's responses", file,
				      uroce_opcode_name(mine.bth.opcode));
			} else {
				compare(file, &c.pk[want_i].p, &mine, want_i);
				responses_checked++;
				want_i++;
			}
			free(x);
		}
	}
	while (want_i < c.n && (is_req(&c.pk[want_i]) || c.pk[want_i].p.bth.dqpn != client_qpn))
		want_i++;
	CHECK(want_i >= c.n, "%s: rxe sent a response uroce did not (#%u %s)", file, want_i,
	      want_i < c.n ? uroce_opcode_name(c.pk[want_i].p.bth.opcode) : "");
	if (mr)
		uroce_mr_dereg(mr);
	uroce_mr_dereg(rmr);
	free(mem);
	free(rbuf);
	world_fini(&w);
}

int main(void)
{
	/* Server-side behaviour only: requests from the client, responses from the server.
	 * (pingpong captures also hold the server's own requests; those go the other way.) */
	run_capture("rc_pingpong_small.pcap", true, 12);
	run_capture("rc_pingpong_multi.pcap", true, 12);
	run_capture("srq_pingpong.pcap", true, 12);
	run_capture("rdma_write.pcap", true, 12);
	run_capture("rdma_read.pcap", true, 12);
	run_capture("atomic_fetch_add.pcap", true, 12);
	run_capture("atomic_cmp_swap.pcap", true, 12);
	run_capture("verbs_ops_64.pcap", true, 12);
	run_capture("verbs_ops_3000.pcap", true, 12);
	run_capture("nak_rnr.pcap", false, 12);
	run_capture("nak_remote_access.pcap", true, 12);
	printf("%u responses compared with rxe's\n", responses_checked);
	return check_summary();
}
