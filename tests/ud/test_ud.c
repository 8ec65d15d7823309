/* test_ud.c — the UD and UC engines (src/transport/ud.c, uc.c) on an in-memory wire.
 *
 *  golden   Soft-RoCE's own packets (tests/data): ud_pingpong.pcap's SEND_ONLY+DETH (Q_Key
 *           0x11111111) and rdma_cm_udaddy.pcap's are accepted by uroce's UD responder: the
 *           completion names the DETH's source QPN, has IBV_WC_GRH, and the GRH area holds
 *           the capture's IPv4 header in its last 20 bytes; uc_pingpong.pcap's 3000-byte
 *           SEND_FIRST/MIDDLE/LAST messages complete whole.
 *  bad      wrong Q_Key, no receive WQE, a receive buffer too short (LOC_LEN_ERR), a UD send
 *           longer than the MTU (completed, not sent), UC out of sequence (message lost,
 *           next FIRST resynchronises, the held receive WQE reused): counted, no crash.
 *  sqe      a send WR with a bad L_Key / an SGE past its MR: LOC_PROT_ERR, the QP enters
 *           SQ Error, later WRs flushed, receives still work, SQE -> RTS recovers (UD, UC);
 *           a controlled Q_Key (bit 31) refused as a QP attribute without privilege.
 *  loss     under seeded drop: UD loses exactly the dropped datagrams; UC loses exactly
 *           the messages one of whose packets was dropped (per-packet decisions recorded).
 */
#include "transport/rc_world.h"

#include <stdio.h>

#include "net/frame.h"
#include "net/pcap_io.h"
#include "transport/uc.h"
#include "transport/ud.h"

#ifndef UROCE_TEST_DATA
#define UROCE_TEST_DATA "tests/data"
#endif

static int failures;
#undef CHECK
#define CHECK(c, ...) do { if (!(c)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* ---- the wire: packets captured from the requesters, delivered by hand ---- */
#define MAXQ 8192
struct qpkt { uint8_t buf[4200]; size_t len; uint32_t msg; bool dropped; };
static struct qpkt *wire;
static unsigned nwire;
static uint32_t cur_msg;

static void wire_put(const uint8_t *pkt, size_t len)
{
	if (nwire >= MAXQ)
		abort();
	memcpy(wire[nwire].buf, pkt, len);
	wire[nwire].len = len;
	wire[nwire].msg = cur_msg;
	wire[nwire].dropped = false;
	nwire++;
}

static int ud_xmit(struct uroce_qp *qp, const struct uroce_ah *ah, uint8_t *pkt, size_t len)
{
	(void)qp;
	(void)ah;
	wire_put(pkt, len);
	return 1;
}

static int uc_xmit(void *arg, struct uroce_qp *qp, uint8_t *pkt, size_t len)
{
	(void)arg;
	(void)qp;
	wire_put(pkt, len);
	return 1;
}

static struct uroce_rxpkt rx_from(const uint8_t *buf, size_t len, const uint8_t ip4[20])
{
	struct uroce_rxpkt r;

	memset(&r, 0, sizeof(r));
	if (uroce_pkt_validate(buf, len, &(struct uroce_rx_ctx){ 0 }, &r.pkt) != UROCE_RX_OK)
		abort();
	r.buf = buf;
	r.len = len;
	r.src.gid[10] = r.src.gid[11] = 0xFF;
	memcpy(&r.src.gid[12], ip4 + 12, 4);
	r.dgid[10] = r.dgid[11] = 0xFF;
	memcpy(&r.dgid[12], ip4 + 16, 4);
	/* What netio reports of the IP header: TOS, TTL, and the Identification the ICRC check
	 * recovered (the GRH area is built from these, uroce_ud_grh_area). */
	r.pkt.ip_id = uroce_get_be16(ip4 + 4);
	r.pkt.icrc_status = r.pkt.ip_id ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK;
	r.traffic_class = ip4[1];
	r.hop_limit = ip4[8];
	return r;
}

static void deliver(struct uroce_qp *qp, const struct uroce_rxpkt *r)
{
	pthread_mutex_lock(&qp->lock);
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
		uroce_ud_input(qp, r);
	else
		uroce_uc_input(qp, &r->pkt);
	uroce_rc_unlock_qp(qp);
}

static const uint8_t ip4_a[20] = { 0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2 };

static void set_type(struct world *w, enum ibv_qp_type t)
{
	for (int i = 0; i < 2; i++) {
		w->qp[i]->qpx.qp_base.qp_type = t;
		w->qp[i]->attr.qkey = 0x11111111;
		if (t == IBV_QPT_UC) {
			struct uroce_rc_io io = { .xmit = uc_xmit };

			uroce_rc_attach(w->qp[i], &io);
			uroce_rc_to_rts(w->qp[i]);
		} else {
			uroce_rc_set_mtu(uroce_rc_of(w->qp[i]), 1024);
		}
	}
	uroce_ud_xmit = ud_xmit;
}

static struct uroce_mr *buf_mr(struct world *w, uint8_t *buf, size_t len)
{
	struct uroce_mr *mr;

	if (uroce_mr_reg(w->pd, buf, len, (uintptr_t)buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr))
		abort();
	return mr;
}

static void post_recv(struct uroce_qp *qp, uint64_t id, uint8_t *buf, uint32_t len, struct uroce_mr *mr)
{
	struct ibv_sge sg = { (uintptr_t)buf, len, mr->mr.lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1 }, *bad;

	if (uroce_qp_post_recv(qp, &wr, &bad))
		abort();
}

static int poll1(struct uroce_cq *cq, struct ibv_wc *wc)
{
	return uroce_cq_poll(cq, 1, wc);
}

/* ------------------------------------------------------------ golden */

struct cap { struct { uint8_t buf[2048]; size_t len; uint8_t ip[20]; } p[64]; unsigned n; };

static int collect(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame,
		   size_t len, int linktype)
{
	struct cap *c = arg;
	struct uroce_frame f;
	struct uroce_pkt p;

	(void)idx;
	(void)ts;
	if (uroce_pcap_frame(frame, len, linktype, &f) || f.dport != UROCE_UDP_PORT ||
	    f.family != AF_INET || c->n >= 64 || f.payload_len > 2048 || f.ip_len != 20)
		return 0;
	if (uroce_pkt_validate(f.payload, f.payload_len, &(struct uroce_rx_ctx){ 0 }, &p) != UROCE_RX_OK)
		return 0;
	memcpy(c->p[c->n].buf, f.payload, f.payload_len);
	c->p[c->n].len = f.payload_len;
	memcpy(c->p[c->n].ip, f.ip, 20);
	c->n++;
	return 0;
}

static void load(const char *file, struct cap *c)
{
	char path[512], err[128];

	snprintf(path, sizeof(path), "%s/%s", UROCE_TEST_DATA, file);
	memset(c, 0, sizeof(*c));
	CHECK(uroce_pcap_foreach(path, collect, c, err, sizeof(err)) == 0, "%s: %s", file, err);
}

static void golden_ud(const char *file, uint32_t want_qkey, unsigned want_min)
{
	static struct cap c;
	static uint8_t buf[4096];
	struct world w;
	struct uroce_mr *mr;
	unsigned got = 0;

	load(file, &c);
	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, IBV_QPT_UD);
	mr = buf_mr(&w, buf, sizeof(buf));
	for (unsigned i = 0; i < c.n; i++) {
		struct uroce_rxpkt r = rx_from(c.p[i].buf, c.p[i].len, c.p[i].ip);
		struct uroce_qp *qp = w.qp[1];
		struct ibv_wc wc;

		if (uroce_opcode_transport(r.pkt.bth.opcode) != UROCE_TRANSPORT_UD || r.pkt.bth.dqpn == 1)
			continue;   /* QP1 (MADs) is the daemon's */
		if (want_qkey)
			CHECK(r.pkt.deth.qkey == want_qkey, "%s #%u: Q_Key 0x%08x", file, i, r.pkt.deth.qkey);
		qp->qpx.qp_base.qp_num = r.pkt.bth.dqpn;
		qp->attr.qkey = r.pkt.deth.qkey;
		memset(buf, 0xEE, sizeof(buf));
		post_recv(qp, i, buf, sizeof(buf), mr);
		deliver(qp, &r);
		CHECK(poll1(w.cq[1], &wc) == 1, "%s #%u: no completion", file, i);
		CHECK(wc.status == IBV_WC_SUCCESS, "%s #%u: status %d", file, i, wc.status);
		CHECK(wc.byte_len == 40 + r.pkt.payload_len, "%s #%u: byte_len %u", file, i, wc.byte_len);
		CHECK(wc.src_qp == r.pkt.deth.srcqp, "%s #%u: src_qp 0x%x, DETH 0x%x", file, i, wc.src_qp,
		      r.pkt.deth.srcqp);
		CHECK(wc.wc_flags & IBV_WC_GRH, "%s #%u: no IBV_WC_GRH", file, i);
		CHECK(wc.wr_id == i, "%s #%u: wr_id", file, i);
		CHECK(!memcmp(buf + 20, c.p[i].ip, 20), "%s #%u: GRH area is not the IPv4 header", file, i);
		CHECK(!memcmp(buf + 40, r.pkt.payload, r.pkt.payload_len), "%s #%u: payload", file, i);
		got++;
	}
	CHECK(got >= want_min, "%s: %u UD packets accepted, want >= %u", file, got, want_min);
	printf("golden %s: %u UD datagrams accepted\n", file, got);
	uroce_mr_dereg(mr);
	world_fini(&w);
}

static void golden_uc(void)
{
	static struct cap c;
	static uint8_t buf[4096];
	struct world w;
	struct uroce_mr *mr;
	unsigned msgs = 0, pkts = 0;
	uint32_t server = 0, off = 0;
	struct ibv_wc wc;

	load("uc_pingpong.pcap", &c);
	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, IBV_QPT_UC);
	mr = buf_mr(&w, buf, sizeof(buf));
	/* The server's QP is the destination of the first packet; feed what was sent to it. */
	for (unsigned i = 0; i < c.n; i++) {
		struct uroce_rxpkt r = rx_from(c.p[i].buf, c.p[i].len, c.p[i].ip);
		struct uroce_qp *qp = w.qp[1];

		if (!server) {
			server = r.pkt.bth.dqpn;
			qp->qpx.qp_base.qp_num = server;
			uroce_rc_of(qp)->resp_psn = r.pkt.bth.psn;
		}
		if (r.pkt.bth.dqpn != server)
			continue;
		if (r.pkt.op->mask & UROCE_OPF_FIRST) {
			post_recv(qp, msgs, buf, sizeof(buf), mr);
			off = 0;
		}
		deliver(qp, &r);
		CHECK(!memcmp(buf + off, r.pkt.payload, r.pkt.payload_len), "uc #%u: payload placed", i);
		off += r.pkt.payload_len;
		pkts++;
		if (r.pkt.op->mask & UROCE_OPF_LAST) {
			CHECK(poll1(w.cq[1], &wc) == 1, "uc #%u: no completion", i);
			CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 3000 && wc.wr_id == msgs,
			      "uc #%u: status %d len %u", i, wc.status, wc.byte_len);
			msgs++;
		}
	}
	CHECK(msgs == 2 && pkts == 6, "uc_pingpong: %u messages / %u packets to the server", msgs, pkts);
	printf("golden uc_pingpong.pcap: %u messages (%u packets) accepted\n", msgs, pkts);
	uroce_mr_dereg(mr);
	world_fini(&w);
}

/* ------------------------------------------------------------ sends through the engine */

static struct uroce_ah *fake_ah(struct world *w)
{
	struct uroce_ah *ah = calloc(1, sizeof(*ah));

	ah->ah.pd = &w->pd->pd;
	ah->ah.context = &w->ctx->vctx.context;
	ah->attr.is_global = 1;
	return ah;
}

static int post_send(struct world *w, struct uroce_ah *ah, uint64_t id, enum ibv_wr_opcode op,
		     uint8_t *buf, uint32_t len, struct uroce_mr *mr, uint32_t qkey,
		     uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = { (uintptr_t)buf, len, mr->mr.lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.imm_data = htobe32((uint32_t)id);
	if (w->qp[0]->qpx.qp_base.qp_type == IBV_QPT_UD) {
		wr.wr.ud.ah = &ah->ah;
		wr.wr.ud.remote_qpn = w->qp[1]->qpx.qp_base.qp_num;
		wr.wr.ud.remote_qkey = qkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return uroce_qp_post_send(w->qp[0], &wr, &bad);
}

static void deliver_wire(struct world *w, struct uroce_fault *f, uint64_t *drops)
{
	for (unsigned i = 0; i < nwire; i++) {
		struct uroce_rxpkt r;

		if (f && (uroce_fault_decide(f, wire[i].len).flags & UROCE_FAULT_DROP)) {
			wire[i].dropped = true;
			(*drops)++;
			continue;
		}
		r = rx_from(wire[i].buf, wire[i].len, ip4_a);
		deliver(w->qp[1], &r);
	}
	nwire = 0;
}

static void bad_input(void)
{
	static uint8_t sbuf[8192], rbuf[8192];
	struct world w;
	struct uroce_mr *smr, *rmr;
	struct uroce_ah *ah;
	struct uroce_rc_stats st;
	struct ibv_wc wc;

	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, IBV_QPT_UD);
	smr = buf_mr(&w, sbuf, sizeof(sbuf));
	rmr = buf_mr(&w, rbuf, sizeof(rbuf));
	ah = fake_ah(&w);

	/* Wrong Q_Key: dropped, counted, no completion; the receive WQE stays posted. */
	post_recv(w.qp[1], 1, rbuf, 2000, rmr);
	CHECK(post_send(&w, ah, 10, IBV_WR_SEND, sbuf, 100, smr, 0x22222222, 0, 0) == 0, "post");
	deliver_wire(&w, NULL, NULL);
	uroce_rc_stats(w.qp[1], &st);
	CHECK(st.drops[UROCE_RC_DROP_QKEY] == 1, "Q_Key drop counted");
	CHECK(poll1(w.cq[1], &wc) == 0, "no completion for a wrong Q_Key");
	CHECK(poll1(w.cq[0], &wc) == 1 && wc.status == IBV_WC_SUCCESS, "sender completes");
	/* WR Q_Key with the controlled bit: the sender's QP Q_Key goes out (IBA 10.2.4). */
	CHECK(post_send(&w, ah, 11, IBV_WR_SEND_WITH_IMM, sbuf, 100, smr, 0x80000000, 0, 0) == 0, "post");
	deliver_wire(&w, NULL, NULL);
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 140 &&
	      (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 11 &&
	      wc.src_qp == w.qp[0]->qpx.qp_base.qp_num, "controlled Q_Key: status %d len %u", wc.status, wc.byte_len);
	poll1(w.cq[0], &wc);
	/* No receive WQE: dropped (UD has no RNR). */
	CHECK(post_send(&w, ah, 12, IBV_WR_SEND, sbuf, 100, smr, 0x11111111, 0, 0) == 0, "post");
	deliver_wire(&w, NULL, NULL);
	uroce_rc_stats(w.qp[1], &st);
	CHECK(st.drops[UROCE_RC_DROP_NO_RWQE] == 1, "no-WQE drop counted");
	poll1(w.cq[0], &wc);
	/* Receive buffer too short for GRH + payload: LOC_LEN_ERR, the QP keeps working. */
	post_recv(w.qp[1], 2, rbuf, 100, rmr);
	CHECK(post_send(&w, ah, 13, IBV_WR_SEND, sbuf, 100, smr, 0x11111111, 0, 0) == 0, "post");
	deliver_wire(&w, NULL, NULL);
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.status == IBV_WC_LOC_LEN_ERR && wc.wr_id == 2, "LOC_LEN_ERR");
	poll1(w.cq[0], &wc);
	/* Longer than the MTU: completed successfully, nothing sent (C10-93.1.1). */
	CHECK(post_send(&w, ah, 14, IBV_WR_SEND, sbuf, 1025, smr, 0x11111111, 0, 0) == 0, "post");
	CHECK(nwire == 0, "a UD send longer than the MTU emits no packet");
	CHECK(poll1(w.cq[0], &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 14, "too long: success");
	uroce_rc_stats(w.qp[0], &st);
	CHECK(st.drops[UROCE_RC_DROP_UD_TOO_LONG] == 1, "too-long send counted");

	/* UC out of sequence: a 3-packet message loses its MIDDLE → no completion; the next
	 * message resynchronises at its FIRST and completes into the same receive WQE. */
	set_type(&w, IBV_QPT_UC);
	for (int i = 0; i < 3000; i++)
		sbuf[i] = (uint8_t)i;
	post_recv(w.qp[1], 3, rbuf, 4000, rmr);
	CHECK(post_send(&w, NULL, 20, IBV_WR_SEND, sbuf, 3000, smr, 0, 0, 0) == 0, "uc post");
	CHECK(nwire == 3, "3 packets for 3000 B at MTU 1024 (got %u)", nwire);
	memmove(&wire[1], &wire[2], sizeof(wire[0]));
	nwire = 2;
	deliver_wire(&w, NULL, NULL);
	CHECK(poll1(w.cq[1], &wc) == 0, "UC: a message that lost a packet does not complete");
	CHECK(post_send(&w, NULL, 21, IBV_WR_SEND, sbuf, 2500, smr, 0, 0, 0) == 0, "uc post");
	deliver_wire(&w, NULL, NULL);
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 && wc.byte_len == 2500,
	      "UC resync: status %d wr_id %llu len %u", wc.status, (unsigned long long)wc.wr_id, wc.byte_len);
	CHECK(!memcmp(rbuf, sbuf, 2500), "UC resync: data");
	uroce_rc_stats(w.qp[1], &st);
	CHECK(st.drops[UROCE_RC_DROP_PSN_OUT_OF_SEQ] >= 1, "UC out-of-sequence counted");
	/* UC WRITE with a bad R_Key: the message is dropped, counted. */
	CHECK(post_send(&w, NULL, 22, IBV_WR_RDMA_WRITE, sbuf, 100, smr, 0, (uintptr_t)rbuf, 0xdead00) == 0, "uc write");
	deliver_wire(&w, NULL, NULL);
	uroce_rc_stats(w.qp[1], &st);
	CHECK(st.drops[UROCE_RC_DROP_UC_RKEY] == 1, "UC bad R_Key counted");
	/* UC WRITE that works: 2500 bytes land. */
	memset(rbuf, 0, 4000);
	CHECK(post_send(&w, NULL, 23, IBV_WR_RDMA_WRITE_WITH_IMM, sbuf, 2500, smr, 0, (uintptr_t)rbuf,
			rmr->mr.rkey) == 0, "uc write");
	post_recv(w.qp[1], 4, rbuf + 5000, 16, rmr);
	deliver_wire(&w, NULL, NULL);
	CHECK(!memcmp(rbuf, sbuf, 2500), "UC WRITE data");
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == 2500 &&
	      be32toh(wc.imm_data) == 23, "UC WRITE_WITH_IMM completion");
	while (poll1(w.cq[0], &wc) == 1)
		;
	free(ah);
	uroce_mr_dereg(smr);
	uroce_mr_dereg(rmr);
	world_fini(&w);
}

/* ------------------------------------------------------------ send-queue errors, Q_Keys */

static enum ibv_qp_state qp_state(struct uroce_qp *qp)
{
	return qp->attr.qp_state;
}

static int to_rts(struct uroce_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };

	return uroce_qp_modify(qp, &a, IBV_QP_STATE);
}

/* A WR whose SGE names a bad L_Key (UD) or runs past its MR (UC) completes with
 * LOC_PROT_ERR; the QP enters SQE (IBA 10.3.1), the WR behind it in the same post and any
 * later post are flushed, the receive side keeps working, and SQE -> RTS recovers. */
static void sq_error(enum ibv_qp_type t)
{
	static uint8_t sbuf[8192], rbuf[8192];
	const char *tn = t == IBV_QPT_UD ? "UD" : "UC";
	struct world w;
	struct uroce_mr *smr, *rmr;
	struct uroce_ah *ah;
	struct ibv_wc wc;
	struct ibv_sge bad_sg, good_sg;
	struct ibv_send_wr wr[2], *bad;
	uint32_t hdr = t == IBV_QPT_UD ? 40 : 0;

	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, t);
	smr = buf_mr(&w, sbuf, 4096);
	rmr = buf_mr(&w, rbuf, sizeof(rbuf));
	ah = fake_ah(&w);

	/* Bad L_Key (UD) / SGE running 1 byte past the MR (UC, a 2-packet WRITE: the first
	 * packet's bytes are fine, the second's are not). */
	if (t == IBV_QPT_UD)
		bad_sg = (struct ibv_sge){ (uintptr_t)sbuf, 100, smr->mr.lkey ^ 0x5a5a00 };
	else
		bad_sg = (struct ibv_sge){ (uintptr_t)sbuf + 4096 - 2000, 2001, smr->mr.lkey };
	good_sg = (struct ibv_sge){ (uintptr_t)sbuf, 100, smr->mr.lkey };
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 2; i++) {
		wr[i].wr_id = 100 + (uint64_t)i;
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].opcode = t == IBV_QPT_UD ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		wr[i].wr.ud.ah = &ah->ah;
		wr[i].wr.ud.remote_qpn = w.qp[1]->qpx.qp_base.qp_num;
		wr[i].wr.ud.remote_qkey = 0x11111111;
		if (t == IBV_QPT_UC) {
			wr[i].wr.rdma.remote_addr = (uintptr_t)rbuf;
			wr[i].wr.rdma.rkey = rmr->mr.rkey;
		}
	}
	wr[0].sg_list = &bad_sg;
	wr[1].sg_list = &good_sg;
	wr[0].next = &wr[1];
	CHECK(uroce_qp_post_send(w.qp[0], &wr[0], &bad) == 0, "%s: post of the bad WR", tn);
	CHECK(poll1(w.cq[0], &wc) == 1 && wc.wr_id == 100 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "%s: bad SGE: wr_id %llu status %d", tn, (unsigned long long)wc.wr_id, wc.status);
	CHECK(poll1(w.cq[0], &wc) == 1 && wc.wr_id == 101 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "%s: the WR behind it is flushed: wr_id %llu status %d", tn, (unsigned long long)wc.wr_id,
	      wc.status);
	CHECK(qp_state(w.qp[0]) == IBV_QPS_SQE && w.qp[0]->qpx.qp_base.state == IBV_QPS_SQE,
	      "%s: QP in SQE (state %d)", tn, qp_state(w.qp[0]));
	/* UC: packets of the failed WRITE that went out are abandoned by the responder. */
	deliver_wire(&w, NULL, NULL);
	/* A post in SQE is flushed at once. */
	wr[1].next = NULL;
	CHECK(uroce_qp_post_send(w.qp[0], &wr[1], &bad) == 0, "%s: post in SQE", tn);
	CHECK(nwire == 0, "%s: nothing sent in SQE", tn);
	CHECK(poll1(w.cq[0], &wc) == 1 && wc.wr_id == 101 && wc.status == IBV_WC_WR_FLUSH_ERR,
	      "%s: post in SQE flushed (status %d)", tn, wc.status);
	CHECK(poll1(w.cq[0], &wc) == 0, "%s: nothing more", tn);
	/* The receive side of the QP in SQE still works (UD: IBA 10.3.1 lists SQE among the
	 * receiving states; UC likewise). */
	post_recv(w.qp[0], 7, rbuf + 4096, 2000, rmr);
	{
		struct ibv_sge sg = { (uintptr_t)rbuf + 6500, 64, rmr->mr.lkey };
		struct ibv_send_wr back = { .wr_id = 200, .sg_list = &sg, .num_sge = 1,
					    .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *b;
		uint32_t i;

		back.wr.ud.ah = &ah->ah;
		back.wr.ud.remote_qpn = w.qp[0]->qpx.qp_base.qp_num;
		back.wr.ud.remote_qkey = 0x11111111;
		CHECK(uroce_qp_post_send(w.qp[1], &back, &b) == 0, "%s: reverse post", tn);
		for (i = 0; i < nwire; i++) {
			struct uroce_rxpkt r = rx_from(wire[i].buf, wire[i].len, ip4_a);

			deliver(w.qp[0], &r);
		}
		nwire = 0;
		CHECK(poll1(w.cq[0], &wc) == 1 && wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS &&
		      wc.byte_len == hdr + 64, "%s: a QP in SQE receives (wr_id %llu status %d)", tn,
		      (unsigned long long)wc.wr_id, wc.status);
		while (poll1(w.cq[1], &wc) == 1)
			;
	}
	/* Recovery: SQE -> RTS, then a good WR goes through. */
	CHECK(to_rts(w.qp[0]) == 0 && qp_state(w.qp[0]) == IBV_QPS_RTS, "%s: SQE -> RTS", tn);
	memset(sbuf, 0xA5, 100);
	wr[1].opcode = IBV_WR_SEND;   /* UC too: a SEND, which completes a receive WQE */
	post_recv(w.qp[1], 8, rbuf, 2000, rmr);
	CHECK(uroce_qp_post_send(w.qp[0], &wr[1], &bad) == 0, "%s: post after recovery", tn);
	CHECK(poll1(w.cq[0], &wc) == 1 && wc.wr_id == 101 && wc.status == IBV_WC_SUCCESS,
	      "%s: send after recovery: status %d", tn, wc.status);
	deliver_wire(&w, NULL, NULL);
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.wr_id == 8 && wc.status == IBV_WC_SUCCESS &&
	      wc.byte_len == hdr + 100 && rbuf[hdr] == 0xA5 && rbuf[hdr + 99] == 0xA5,
	      "%s: delivered after recovery (wr_id %llu status %d len %u)", tn,
	      (unsigned long long)wc.wr_id, wc.status, wc.byte_len);
	free(ah);
	uroce_mr_dereg(smr);
	uroce_mr_dereg(rmr);
	world_fini(&w);
}

/* Controlled Q_Keys (high-order bit) as a QP attribute need privilege (IBA 10.2.4). */
static void qkey_privilege(void)
{
	struct world w;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .qkey = 0x80010000 };

	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, IBV_QPT_UD);
	setenv("UROCE_PRIVILEGED_QKEY", "0", 1);
	CHECK(uroce_qp_modify(w.qp[0], &a, IBV_QP_STATE | IBV_QP_QKEY) == -EPERM,
	      "controlled Q_Key refused without privilege");
	CHECK(w.qp[0]->attr.qkey == 0x11111111, "refused Q_Key not applied (0x%x)", w.qp[0]->attr.qkey);
	a.qkey = 0x7FFFFFFF;
	CHECK(uroce_qp_modify(w.qp[0], &a, IBV_QP_STATE | IBV_QP_QKEY) == 0 &&
	      w.qp[0]->attr.qkey == 0x7FFFFFFF, "an ordinary Q_Key is accepted");
	setenv("UROCE_PRIVILEGED_QKEY", "1", 1);
	a.qkey = 0x80010000;
	CHECK(uroce_qp_modify(w.qp[0], &a, IBV_QP_STATE | IBV_QP_QKEY) == 0 &&
	      w.qp[0]->attr.qkey == 0x80010000, "controlled Q_Key accepted when privileged");
	unsetenv("UROCE_PRIVILEGED_QKEY");
	world_fini(&w);
}

/* ------------------------------------------------------------ loss */

static void loss(enum ibv_qp_type t, unsigned nmsg)
{
	static uint8_t sbuf[8192], rbuf[8192];
	static bool lost[4096];
	static uint64_t dropped_at[4096];
	static size_t dropped_len[4096];
	uint64_t npk = 0;
	unsigned ndropped = 0;
	struct world w;
	struct uroce_mr *smr, *rmr;
	struct uroce_ah *ah;
	struct uroce_fault f;
	char err[64];
	uint64_t drops = 0, want_lost = 0, got = 0;
	struct ibv_wc wc;
	uint32_t expect = 0;

	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, t);
	smr = buf_mr(&w, sbuf, sizeof(sbuf));
	rmr = buf_mr(&w, rbuf, sizeof(rbuf));
	ah = fake_ah(&w);
	char spec[128], logpath[] = "/tmp/test_ud_fault.XXXXXX";
	int lfd = mkstemp(logpath);

	CHECK(lfd >= 0, "mkstemp");
	close(lfd);
	snprintf(spec, sizeof(spec), "drop=0.05,seed=11,log=%s", logpath);
	CHECK(uroce_fault_parse(&f, spec, err, sizeof(err)) == 0, "fault: %s", err);
	memset(lost, 0, sizeof(lost));
	post_recv(w.qp[1], 0, rbuf, sizeof(rbuf), rmr);
	for (uint32_t m = 0; m < nmsg; m++) {
		uint32_t len = t == IBV_QPT_UD ? 4 + m % 1000 : 4 + (m * 769) % 5000;

		memcpy(sbuf, &m, 4);
		cur_msg = m;
		CHECK(post_send(&w, ah, m, IBV_WR_SEND, sbuf, len, smr, 0x11111111, 0, 0) == 0, "post %u", m);
		while (poll1(w.cq[0], &wc) == 1)
			CHECK(wc.status == IBV_WC_SUCCESS, "send status %d", wc.status);
		for (unsigned i = 0; i < nwire; i++, npk++)
			if (uroce_fault_decide(&f, wire[i].len).flags & UROCE_FAULT_DROP) {
				dropped_at[ndropped] = npk;
				dropped_len[ndropped++] = wire[i].len;
				wire[i].dropped = true;
				lost[m] = true;
				drops++;
			}
		for (unsigned i = 0; i < nwire; i++) {
			struct uroce_rxpkt r;

			if (wire[i].dropped)
				continue;
			r = rx_from(wire[i].buf, wire[i].len, ip4_a);
			deliver(w.qp[1], &r);
		}
		nwire = 0;
		while (poll1(w.cq[1], &wc) == 1) {
			uint32_t id;

			CHECK(wc.status == IBV_WC_SUCCESS, "recv status %d", wc.status);
			memcpy(&id, rbuf + (t == IBV_QPT_UD ? 40 : 0), 4);
			/* Completions arrive in order, for exactly the messages that lost nothing. */
			while (expect < id && lost[expect])
				expect++;
			CHECK(id == expect && !lost[id], "%s: completion for message %u, expected %u",
			      t == IBV_QPT_UD ? "UD" : "UC", id, expect);
			expect = id + 1;
			got++;
			post_recv(w.qp[1], 0, rbuf, sizeof(rbuf), rmr);
		}
	}
	for (uint32_t m = 0; m < nmsg; m++)
		want_lost += lost[m];
	CHECK(got == nmsg - want_lost, "%s: %llu completions, %u messages, %llu lost",
	      t == IBV_QPT_UD ? "UD" : "UC", (unsigned long long)got, nmsg, (unsigned long long)want_lost);
	CHECK(drops > 0, "the fault injector dropped something");
	/* log= (fault.h): one "<index> <len> drop" line per dropped packet, nothing else. */
	{
		FILE *lf = fopen(logpath, "r");
		unsigned long long li;
		size_t ll;
		char what[32];
		unsigned n = 0;

		CHECK(lf != NULL, "fault log %s", logpath);
		while (lf && fscanf(lf, "%llu %zu %31s", &li, &ll, what) == 3) {
			CHECK(n < ndropped && li == dropped_at[n] && ll == dropped_len[n] &&
			      !strcmp(what, "drop"), "log line %u: %llu %zu %s, expected %llu %zu drop", n,
			      li, ll, what, n < ndropped ? (unsigned long long)dropped_at[n] : 0ull,
			      n < ndropped ? dropped_len[n] : 0);
			n++;
		}
		CHECK(n == ndropped, "fault log: %u lines for %u drops", n, ndropped);
		if (lf)
			fclose(lf);
		unlink(logpath);
	}
	printf("loss %s: %u messages, %llu packets dropped, %llu messages lost, %llu completed\n",
	       t == IBV_QPT_UD ? "UD" : "UC", nmsg, (unsigned long long)drops,
	       (unsigned long long)want_lost, (unsigned long long)got);
	free(ah);
	uroce_mr_dereg(smr);
	uroce_mr_dereg(rmr);
	world_fini(&w);
}

/* ------------------------------------------------------------ P_Key (IBA 9.6.1.1) */

static void set_pkey(uint8_t *pkt, uint16_t pkey)
{
	uroce_put_be16(pkt + 2, pkey);        /* BTH bytes 2-3 */
}

/* UD and UC drop a packet whose P_Key does not match the QP's P_Key table entry (0xFFFF,
 * at index 0): counted as BAD_PKEY, no completion, the receive WQE stays posted, a UC
 * message in progress is not disturbed; the default partition as a limited member
 * (0x7FFF) matches the full-member entry. */
static void pkey_input(void)
{
	static const uint16_t bad[] = { 0x1234, 0x9234, 0x0000, 0x8000, 0x7FFE };
	static uint8_t sbuf[4096], rbuf[8192];
	struct world w;
	struct uroce_mr *smr, *rmr;
	struct uroce_ah *ah;
	struct uroce_rc_stats st;
	struct ibv_wc wc;
	struct uroce_rxpkt r;
	static struct qpkt keep[3];
	uint8_t bth[12];
	uint32_t psn;

	world_init(&w, &(struct world_opts){ 0 }, NULL);
	set_type(&w, IBV_QPT_UD);
	smr = buf_mr(&w, sbuf, sizeof(sbuf));
	rmr = buf_mr(&w, rbuf, sizeof(rbuf));
	ah = fake_ah(&w);
	for (int i = 0; i < 100; i++)
		sbuf[i] = (uint8_t)(i + 1);

	/* UD */
	post_recv(w.qp[1], 1, rbuf, 2000, rmr);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(post_send(&w, ah, 30 + i, IBV_WR_SEND, sbuf, 100, smr, 0x11111111, 0, 0) == 0, "post");
		CHECK(nwire == 1, "one UD packet");
		set_pkey(wire[0].buf, bad[i]);
		deliver_wire(&w, NULL, NULL);
		uroce_rc_stats(w.qp[1], &st);
		CHECK(st.drops[UROCE_RC_DROP_BAD_PKEY] == i + 1, "UD P_Key 0x%04x: drop counted (%llu)", bad[i],
		      (unsigned long long)st.drops[UROCE_RC_DROP_BAD_PKEY]);
		CHECK(poll1(w.cq[1], &wc) == 0, "UD P_Key 0x%04x: no receive completion", bad[i]);
		CHECK(poll1(w.cq[0], &wc) == 1 && wc.status == IBV_WC_SUCCESS, "sender completes");
	}
	CHECK(post_send(&w, ah, 40, IBV_WR_SEND, sbuf, 100, smr, 0x11111111, 0, 0) == 0, "post");
	set_pkey(wire[0].buf, 0x7FFF);
	deliver_wire(&w, NULL, NULL);
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && wc.byte_len == 140 &&
	      wc.pkey_index == 0 && !memcmp(rbuf + 40, sbuf, 100),
	      "UD P_Key 0x7FFF: received into the WQE the bad ones left (status %d wr_id %llu)", wc.status,
	      (unsigned long long)wc.wr_id);
	poll1(w.cq[0], &wc);

	/* UC: a SEND_ONLY of another partition is dropped without moving the expected PSN. */
	set_type(&w, IBV_QPT_UC);
	memset(rbuf, 0, sizeof(rbuf));
	post_recv(w.qp[1], 2, rbuf, 4000, rmr);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		psn = uroce_rc_of(w.qp[1])->resp_psn;
		CHECK(post_send(&w, NULL, 50 + i, IBV_WR_SEND, sbuf, 100, smr, 0, 0, 0) == 0, "uc post");
		set_pkey(wire[0].buf, bad[i]);
		deliver_wire(&w, NULL, NULL);
		uroce_rc_stats(w.qp[1], &st);
		CHECK(st.drops[UROCE_RC_DROP_BAD_PKEY] == sizeof(bad) / sizeof(bad[0]) + i + 1,
		      "UC P_Key 0x%04x: drop counted", bad[i]);
		CHECK(poll1(w.cq[1], &wc) == 0, "UC P_Key 0x%04x: no completion", bad[i]);
		CHECK(uroce_rc_of(w.qp[1])->resp_psn == psn, "UC P_Key 0x%04x: expected PSN unchanged", bad[i]);
		while (poll1(w.cq[0], &wc) == 1)
			;
		/* The sender's PSN moved on: the responder follows with the next good FIRST/ONLY. */
	}
	/* A message in progress: FIRST arrives, then a packet of another partition with a PSN
	 * far ahead (it would lose the message if it were looked at), then MIDDLE and LAST. */
	for (int i = 0; i < 3000; i++)
		sbuf[i] = (uint8_t)(i * 3);
	CHECK(post_send(&w, NULL, 60, IBV_WR_SEND, sbuf, 3000, smr, 0, 0, 0) == 0, "uc post");
	CHECK(nwire == 3, "3 packets for 3000 B at MTU 1024 (got %u)", nwire);
	memcpy(keep, wire, sizeof(keep));
	nwire = 0;
	r = rx_from(keep[0].buf, keep[0].len, ip4_a);
	deliver(w.qp[1], &r);
	memcpy(bth, keep[2].buf, sizeof(bth));
	psn = (r.pkt.bth.psn + 7) & 0xFFFFFF;
	uroce_put_be32(keep[2].buf + 8, (uroce_get_be32(keep[2].buf + 8) & 0xFF000000u) | psn);
	set_pkey(keep[2].buf, 0x1234);
	r = rx_from(keep[2].buf, keep[2].len, ip4_a);
	deliver(w.qp[1], &r);
	memcpy(keep[2].buf, bth, sizeof(bth));
	for (int k = 1; k < 3; k++) {
		r = rx_from(keep[k].buf, keep[k].len, ip4_a);
		deliver(w.qp[1], &r);
	}
	CHECK(poll1(w.cq[1], &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.byte_len == 3000 &&
	      !memcmp(rbuf, sbuf, 3000),
	      "UC: the message completes around a packet of another partition (status %d wr_id %llu len %u)",
	      wc.status, (unsigned long long)wc.wr_id, wc.byte_len);
	while (poll1(w.cq[0], &wc) == 1)
		;
	free(ah);
	uroce_mr_dereg(smr);
	uroce_mr_dereg(rmr);
	world_fini(&w);
}

int main(void)
{
	wire = calloc(MAXQ, sizeof(*wire));
	golden_ud("ud_pingpong.pcap", 0x11111111, 6);
	golden_ud("rdma_cm_udaddy.pcap", 0, 1);
	golden_uc();
	bad_input();
	pkey_input();
	sq_error(IBV_QPT_UD);
	sq_error(IBV_QPT_UC);
	qkey_privilege();
	loss(IBV_QPT_UD, 3000);
	loss(IBV_QPT_UC, 3000);
	free(wire);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
