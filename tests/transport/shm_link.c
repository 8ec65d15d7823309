/* shm_link — two uroce processes of one host over the shared-memory link (issue #16,
 * docs/transport.md "The shared-memory link"), plain verbs.  Run under `uroce run` by
 * nsrun.sh (a uroced of its own); $SHM_LINK_UROCE is the uroce CLI, whose `uroce stat show`
 * says which link carried the traffic.
 *
 *   shm_link ops PATH [rc]
 *        Every opcode, with every byte checked: RC SEND, SEND_WITH_IMM, SEND_WITH_INV (a type
 *        2 window the receiver bound, reported invalidated), RDMA_WRITE (seen after the SEND
 *        that follows it), RDMA_WRITE_WITH_IMM, RDMA_READ, ATOMIC_FETCH_AND_ADD and
 *        ATOMIC_CMP_AND_SWP (the originals returned and the final value); UC SEND,
 *        SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM; UD SEND and SEND_WITH_IMM (the
 *        GRH's source GID, src_qp, IBV_WC_GRH); at sizes 0, 1, MTU - 1, MTU, MTU + 1,
 *        3 MTU + 5, 64 KiB and 1 MiB (UD: up to the MTU).  rc: the RC opcodes only (for a
 *        run under UROCE_FAULT, where UC and UD lose messages by design).
 *        Then each process reads its own line of `uroce stat show`: PATH shm wants the
 *        shared-memory link's packet counters (shm_tx_packets, shm_rx_packets) moving and the
 *        UDP ones (tx_packets, rx_packets) at 0; PATH udp the opposite (the negative
 *        control: UROCE_LINK=udp, or `uroce link set uroce0 loopback udp`).  Under
 *        UROCE_FAULT (and PATH shm) the link's fault counters and its ICRC drops must move
 *        too: corrupted packets were caught by the ICRC and the data is still right.  With
 *        UROCE_SHM_RING_KB=64 (the smallest ring) the requester must have waited for room.
 *        First of all, a 4 KiB WRITE to a target that calls no verb (it waits in read(2)): only
 *        its progress thread can place it and acknowledge, so the link must wake that thread
 *        (its first records arrive before the thread ever slept on this link); the
 *        completion must come within 100 ms.
 *   shm_link stall
 *        Run with UROCE_SHM_RING_KB=64.  The requester stops the responder (SIGSTOP) and,
 *        while it cannot read, sends a 1 MiB UC SEND and 100 UD SENDs of the MTU (both
 *        more than the ring holds), sleeps 20 ms (ten times the longest wait for room),
 *        and lets it go on (SIGCONT).  The link is lossless: every message must arrive,
 *        every byte right, with shm_tx_full 0 and shm_tx_spilled > 0 at the requester (a
 *        ring full past the wait kept the rest in its spill).  Before the spill, the rest
 *        of each batch was dropped there, which UC and UD cannot recover.
 *   shm_link kill
 *        The requester streams 64 KiB RDMA WRITEs to the target and SIGKILLs it in the
 *        middle: the oldest outstanding WRITE must end with RETRY_EXC_ERR within a bound
 *        (local ACK timeout 16.8 ms, retry_cnt 3: 4 timeouts + 250 ms), the rest flushed,
 *        the QP in Error -- never a hang -- and `uroce stat` must show the link reporting
 *        the death (shm_peers_gone 1 within 5 s) with nothing sent over UDP.
 *
 * The parent is the requester, the forked child the responder.  Exit 0 on success; every
 * failure says what.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *who = "?";
#define DIE(...) do { fprintf(stderr, "shm_link %s: FAIL: ", who); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)
#include "rc_pair.h"

#define BUF (4u << 20)                /* per process: [0, 2M) source, [2M, 4M) target */
#define TGT (2u << 20)
#define ATOM (BUF - 64)               /* the atomic word, in the target half */
#define MTU 1024u                     /* rc_pair_connect's path MTU */
#define LIMIT 10000000000ull          /* 10 s for any completion */
#define KILL_TIMEOUT 12               /* 4.096 us * 2^12 = 16.8 ms */
#define GRH 40

enum svc { RC, UC, UD };
enum op { SEND, SEND_IMM, SEND_INV, WRITE, WRITE_IMM, READ, ATOMICS, END, PASSIVE };
static const char *const op_name[] = { "SEND", "SEND_WITH_IMM", "SEND_WITH_INV", "RDMA_WRITE",
				       "RDMA_WRITE_WITH_IMM", "RDMA_READ", "ATOMICS", "END",
				       "RDMA_WRITE to a passive target" };
#define PASSIVE_LIMIT_NS 100000000ull   /* its ACK within 100 ms */
static const char *const svc_name[] = { "RC", "UC", "UD" };

struct node {
	int sock;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_qp *qp[3];
	struct ibv_ah *ah;
	struct ibv_mw *mw;
	struct peer me[3], other[3];
};

/* What the requester tells the responder before each operation. */
struct cmd {
	uint32_t op, svc, size, seed, imm;
};

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static void check(const uint8_t *p, size_t n, uint32_t seed, const char *what)
{
	uint8_t *want = malloc(n ? n : 1);

	fill(want, n, seed);
	for (size_t i = 0; i < n; i++)
		if (p[i] != want[i])
			DIE("%s: byte %zu of %zu is %02x, want %02x", what, i, n, p[i], want[i]);
	free(want);
}

static struct ibv_qp *make_qp(struct node *n, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_qp_attr a = { 0 };
	struct ibv_qp *qp;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	qa.send_cq = n->scq;
	qa.recv_cq = n->rcq;
	qa.qp_type = t;
	qa.cap.max_send_wr = 256;
	qa.cap.max_recv_wr = 256;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = ibv_create_qp(n->pd, &qa);
	if (!qp)
		DIE("create %s qp: %s", t == IBV_QPT_UD ? "UD" : t == IBV_QPT_UC ? "UC" : "RC", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (t == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (t == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ |
							       IBV_ACCESS_REMOTE_ATOMIC : 0);
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(qp, &a, mask))
		DIE("to init: %s", strerror(errno));
	return qp;
}

static void setup(struct node *n, bool kill_mode)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (!list || !list[0])
		DIE("no device");
	n->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!n->ctx)
		DIE("open device");
	n->pd = ibv_alloc_pd(n->ctx);
	n->scq = ibv_create_cq(n->ctx, 1024, NULL, NULL, 0);
	n->rcq = ibv_create_cq(n->ctx, 1024, NULL, NULL, 0);
	n->buf = aligned_alloc(4096, BUF);
	if (!n->buf)
		DIE("alloc");
	memset(n->buf, 0, BUF);
	n->mr = ibv_reg_mr(n->pd, n->buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	if (!n->pd || !n->scq || !n->rcq || !n->mr)
		DIE("pd/cq/mr");
	for (int s = RC; s <= UD; s++) {
		if (kill_mode && s != RC)
			break;
		n->qp[s] = make_qp(n, s == RC ? IBV_QPT_RC : s == UC ? IBV_QPT_UC : IBV_QPT_UD);
		if (ibv_query_gid(n->ctx, 1, 0, &n->me[s].gid))
			DIE("gid");
		n->me[s].qpn = n->qp[s]->qp_num;
		n->me[s].psn = (uint32_t)((now_ns() + (uint64_t)s * 77) & 0xFFFFFF);
		n->me[s].rkey = n->mr->rkey;
		n->me[s].addr = (uintptr_t)n->buf;
	}
}

static void connect_all(struct node *n, bool kill_mode)
{
	xfer(n->sock, n->me, sizeof(n->me), true);
	xfer(n->sock, n->other, sizeof(n->other), false);
	rc_pair_connect(n->qp[RC], n->other[RC].qpn, n->other[RC].psn, &n->other[RC].gid, n->me[RC].psn,
			kill_mode ? KILL_TIMEOUT : 14, kill_mode ? 3 : 7);
	if (kill_mode)
		return;
	{
		/* UC: Init -> RTR -> RTS with the path MTU, no read/atomic or retry attributes. */
		struct ibv_qp_attr a = { 0 };

		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = n->other[UC].qpn;
		a.rq_psn = n->other[UC].psn;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = n->other[UC].gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		if (ibv_modify_qp(n->qp[UC], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
			DIE("uc to rtr: %s", strerror(errno));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = n->me[UC].psn;
		if (ibv_modify_qp(n->qp[UC], &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			DIE("uc to rts: %s", strerror(errno));
	}
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
		struct ibv_ah_attr ah = { .is_global = 1, .port_num = 1 };

		if (ibv_modify_qp(n->qp[UD], &a, IBV_QP_STATE))
			DIE("ud to rtr: %s", strerror(errno));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = n->me[UD].psn;
		if (ibv_modify_qp(n->qp[UD], &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			DIE("ud to rts: %s", strerror(errno));
		ah.grh.dgid = n->other[UD].gid;
		ah.grh.hop_limit = 1;
		n->ah = ibv_create_ah(n->pd, &ah);
		if (!n->ah)
			DIE("create ah: %s", strerror(errno));
	}
}

static void post_recv(struct node *n, enum svc s, uint64_t id, uint32_t off, uint32_t len)
{
	struct ibv_sge sg = { (uintptr_t)n->buf + off, len, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = len ? 1 : 0 }, *bad;

	if (ibv_post_recv(n->qp[s], &wr, &bad))
		DIE("post_recv: %s", strerror(errno));
}

static void post(struct node *n, enum svc s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	wr->send_flags |= IBV_SEND_SIGNALED;
	if (s == UD) {
		wr->wr.ud.ah = n->ah;
		wr->wr.ud.remote_qpn = n->other[UD].qpn;
		wr->wr.ud.remote_qkey = 0x11111111;
	}
	if (ibv_post_send(n->qp[s], wr, &bad))
		DIE("post_send %s op %d: %s", svc_name[s], wr->opcode, strerror(errno));
}

static struct ibv_wc expect(struct ibv_cq *cq, enum ibv_wc_opcode opc, const char *what)
{
	struct ibv_wc wc;
	uint64_t end = now_ns() + LIMIT;
	int r;

	while ((r = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (now_ns() > end) {
			char cmd[600];

			fprintf(stderr, "shm_link %s: %s: no completion within %llu ms; QPs:\n", who, what,
				(unsigned long long)(LIMIT / 1000000));
			snprintf(cmd, sizeof(cmd), "'%s' stat show qp >&2; '%s' stat show >&2",
				 getenv("SHM_LINK_UROCE"), getenv("SHM_LINK_UROCE"));
			if (system(cmd))
				fprintf(stderr, "(uroce stat failed)\n");
			DIE("%s: no completion within %llu ms", what, (unsigned long long)(LIMIT / 1000000));
		}
	if (r < 0)
		DIE("poll_cq");

	if (wc.status != IBV_WC_SUCCESS)
		DIE("%s: status %s", what, ibv_wc_status_str(wc.status));
	if (wc.opcode != opc)
		DIE("%s: opcode %d, want %d", what, wc.opcode, opc);
	return wc;
}

/* ---------------------------------------------------------------- the requester */

static void requester_op(struct node *n, enum svc s, enum op op, uint32_t size, uint32_t seed)
{
	struct cmd c = { op, s, size, seed, seed ^ 0xA5A5A5A5u };
	struct ibv_sge sg = { (uintptr_t)n->buf, size, n->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = seed, .sg_list = &sg, .num_sge = size ? 1 : 0 };
	char what[96];
	uint32_t rkey = 0, ok;

	snprintf(what, sizeof(what), "%s %s %u bytes", svc_name[s], op_name[op], size);
	fill(n->buf, size, seed);
	xfer(n->sock, &c, sizeof(c), true);
	xfer(n->sock, &rkey, sizeof(rkey), false);   /* ready (SEND_WITH_INV: the window's key) */
	switch (op) {
	case SEND:
	case SEND_IMM:
	case SEND_INV:
		wr.opcode = op == SEND ? IBV_WR_SEND : op == SEND_IMM ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND_WITH_INV;
		if (op == SEND_IMM)
			wr.imm_data = htobe32(c.imm);
		if (op == SEND_INV)
			wr.invalidate_rkey = rkey;
		post(n, s, &wr);
		expect(n->scq, IBV_WC_SEND, what);
		break;
	case WRITE:
	case WRITE_IMM: {
		struct ibv_send_wr note = { .wr_id = 1, .opcode = IBV_WR_SEND };

		wr.opcode = op == WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htobe32(c.imm);
		wr.wr.rdma.remote_addr = n->other[s].addr + TGT;
		wr.wr.rdma.rkey = n->other[s].rkey;
		post(n, s, &wr);
		expect(n->scq, IBV_WC_RDMA_WRITE, what);
		/* A plain WRITE is seen through the SEND after it (IBA 9.5: in order). */
		if (op == WRITE) {
			post(n, s, &note);
			expect(n->scq, IBV_WC_SEND, what);
		}
		break;
	}
	case READ:
		memset(n->buf + TGT, 0, size);
		sg.addr = (uintptr_t)n->buf + TGT;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = n->other[s].addr;
		wr.wr.rdma.rkey = n->other[s].rkey;
		post(n, s, &wr);
		expect(n->scq, IBV_WC_RDMA_READ, what);
		check(n->buf + TGT, size, seed, what);
		break;
	case ATOMICS: {
		/* The target word starts at 100: +5 -> 105; CAS(105 -> 7); CAS(0 -> 9) fails. */
		static const struct { enum ibv_wr_opcode op; uint64_t a, b, orig; } at[] = {
			{ IBV_WR_ATOMIC_FETCH_AND_ADD, 5, 0, 100 },
			{ IBV_WR_ATOMIC_CMP_AND_SWP, 105, 7, 105 },
			{ IBV_WR_ATOMIC_CMP_AND_SWP, 0, 9, 7 },
		};

		for (unsigned i = 0; i < 3; i++) {
			uint64_t *res = (uint64_t *)(void *)(n->buf + TGT);

			*res = 0xDEAD;
			sg.addr = (uintptr_t)res;
			sg.length = 8;
			wr.num_sge = 1;
			wr.opcode = at[i].op;
			wr.wr.atomic.remote_addr = n->other[s].addr + ATOM;
			wr.wr.atomic.rkey = n->other[s].rkey;
			wr.wr.atomic.compare_add = at[i].a;
			wr.wr.atomic.swap = at[i].b;
			post(n, s, &wr);
			expect(n->scq, i ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, what);
			if (*res != at[i].orig)
				DIE("%s: atomic %u returned %llu, want %llu", what, i, (unsigned long long)*res,
				    (unsigned long long)at[i].orig);
		}
		break;
	}
	case PASSIVE: {
		uint64_t t0 = now_ns(), t;

		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = n->other[s].addr + TGT;
		wr.wr.rdma.rkey = n->other[s].rkey;
		post(n, s, &wr);
		expect(n->scq, IBV_WC_RDMA_WRITE, what);
		t = now_ns() - t0;
		printf("shm_link requester: %s acknowledged in %.3f ms\n", what, (double)t / 1e6);
		if (t > PASSIVE_LIMIT_NS)
			DIE("%s: acknowledged after %.1f ms: its progress thread was not woken",
			    what, (double)t / 1e6);
		xfer(n->sock, &ok, sizeof(ok), true);   /* the responder may look now */
		break;
	}
	case END:
		break;
	}
	xfer(n->sock, &ok, sizeof(ok), false);   /* the responder checked its side */
}

/* ---------------------------------------------------------------- the responder */

static void responder(struct node *n)
{
	for (;;) {
		struct cmd c;
		uint32_t rkey = 0, ok = 1, grh = 0;
		char what[96];
		struct ibv_wc wc;

		xfer(n->sock, &c, sizeof(c), false);
		if (c.op == END) {
			xfer(n->sock, &rkey, sizeof(rkey), true);
			xfer(n->sock, &ok, sizeof(ok), true);
			return;
		}
		snprintf(what, sizeof(what), "%s %s %u bytes (responder)", svc_name[c.svc], op_name[c.op], c.size);
		grh = c.svc == UD ? GRH : 0;
		switch (c.op) {
		case SEND:
		case SEND_IMM:
		case SEND_INV:
			memset(n->buf + TGT, 0, c.size + grh);
			post_recv(n, c.svc, c.seed, TGT, c.size + grh);
			if (c.op == SEND_INV) {
				/* A type 2 window over the target, bound through the RC QP. */
				struct ibv_send_wr bw = { .wr_id = 7, .opcode = IBV_WR_BIND_MW,
							  .send_flags = IBV_SEND_SIGNALED }, *bad;

				if (!n->mw && !(n->mw = ibv_alloc_mw(n->pd, IBV_MW_TYPE_2)))
					DIE("alloc_mw: %s", strerror(errno));
				bw.bind_mw.mw = n->mw;
				bw.bind_mw.rkey = ibv_inc_rkey(n->mw->rkey);
				bw.bind_mw.bind_info.mr = n->mr;
				bw.bind_mw.bind_info.addr = (uintptr_t)n->buf + TGT;
				bw.bind_mw.bind_info.length = 4096;
				bw.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
				if (ibv_post_send(n->qp[RC], &bw, &bad))
					DIE("bind_mw: %s", strerror(errno));
				expect(n->scq, IBV_WC_BIND_MW, what);
				rkey = bw.bind_mw.rkey;
			}
			xfer(n->sock, &rkey, sizeof(rkey), true);
			wc = expect(n->rcq, IBV_WC_RECV, what);
			if (wc.byte_len != c.size + grh)
				DIE("%s: byte_len %u, want %u", what, wc.byte_len, c.size + grh);
			if (c.op == SEND_IMM && (!(wc.wc_flags & IBV_WC_WITH_IMM) || be32toh(wc.imm_data) != c.imm))
				DIE("%s: immediate missing or wrong (flags %x imm %x)", what, wc.wc_flags,
				    be32toh(wc.imm_data));
			if (c.op == SEND_INV && (!(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != rkey))
				DIE("%s: not reported invalidated (flags %x key %x, want %x)", what, wc.wc_flags,
				    wc.invalidated_rkey, rkey);
			if (c.svc == UD) {
				const struct ibv_grh *g = (const void *)(n->buf + TGT);

				if (!(wc.wc_flags & IBV_WC_GRH) || wc.src_qp != n->other[UD].qpn)
					DIE("%s: GRH flag %x, src_qp %x (want %x)", what, wc.wc_flags, wc.src_qp,
					    n->other[UD].qpn);
				/* RoCEv2 over IPv4 (A17.4.5.1): the area's last 20 bytes hold the IPv4
				 * header, whose source address is the GID's last 4 bytes; over IPv6 the
				 * GRH's SGID is the GID. */
				const uint8_t *gid = n->other[UD].gid.raw;
				bool v4 = !memcmp(gid, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);

				if (v4 ? memcmp((const uint8_t *)g + 20 + 12, gid + 12, 4) : memcmp(&g->sgid, gid, 16))
					DIE("%s: the GRH area does not name the sender's GID", what);
			}
			check(n->buf + TGT + grh, c.size, c.seed, what);
			break;
		case WRITE:
		case WRITE_IMM:
			memset(n->buf + TGT, 0, c.size);
			post_recv(n, c.svc, c.seed, 0, 0);   /* the notify SEND, or the immediate */
			xfer(n->sock, &rkey, sizeof(rkey), true);
			wc = expect(n->rcq, c.op == WRITE ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM, what);
			if (c.op == WRITE_IMM &&
			    (!(wc.wc_flags & IBV_WC_WITH_IMM) || be32toh(wc.imm_data) != c.imm || wc.byte_len != c.size))
				DIE("%s: immediate or length wrong (flags %x imm %x len %u)", what, wc.wc_flags,
				    be32toh(wc.imm_data), wc.byte_len);
			check(n->buf + TGT, c.size, c.seed, what);
			break;
		case READ:
			fill(n->buf, c.size, c.seed);
			xfer(n->sock, &rkey, sizeof(rkey), true);
			break;
		case ATOMICS:
			*(uint64_t *)(void *)(n->buf + ATOM) = 100;
			xfer(n->sock, &rkey, sizeof(rkey), true);
			break;
		case PASSIVE:
			memset(n->buf + TGT, 0, c.size);
			xfer(n->sock, &rkey, sizeof(rkey), true);
			xfer(n->sock, &ok, sizeof(ok), false);   /* no verbs until the WRITE is done */
			check(n->buf + TGT, c.size, c.seed, what);
			break;
		}
		/* ATOMICS: the final value (7) is checked after END, once the requester's
		 * three atomics are surely done. */
		xfer(n->sock, &ok, sizeof(ok), true);
	}
}

/* ---------------------------------------------------------------- counters */

/* This process's @name in `uroce stat show` (its context line: netio's counters first,
 * then the shm link's, then the transport's totals). */
static long long stat_counter(const char *name)
{
	const char *uroce = getenv("SHM_LINK_UROCE");
	char cmd[512], line[8192], key[64], pidk[32];
	long long v = -1;
	FILE *f;

	if (!uroce)
		DIE("SHM_LINK_UROCE not set");
	snprintf(cmd, sizeof(cmd), "'%s' stat show", uroce);
	snprintf(key, sizeof(key), " %s ", name);
	snprintf(pidk, sizeof(pidk), " pid %d ", (int)getpid());
	f = popen(cmd, "r");
	if (!f)
		DIE("popen %s", cmd);
	while (fgets(line, sizeof(line), f)) {
		char *k;

		if (!strstr(line, pidk) || !(k = strstr(line, key)))
			continue;
		v = strtoll(k + strlen(key), NULL, 10);
	}
	pclose(f);
	if (v < 0)
		DIE("no counter %s for pid %d in `uroce stat show`", name, (int)getpid());
	return v;
}

/* PATH shm: the shm link's counters moved and UDP's did not; udp: the opposite. */
static void check_path(const char *path)
{
	long long shm_tx = stat_counter("shm_tx_packets"), shm_rx = stat_counter("shm_rx_packets");
	long long udp_tx = stat_counter("tx_packets"), udp_rx = stat_counter("rx_packets");
	bool shm = !strcmp(path, "shm");

	printf("shm_link %s: shm_tx_packets %lld shm_rx_packets %lld tx_packets %lld rx_packets %lld\n",
	       who, shm_tx, shm_rx, udp_tx, udp_rx);
	if (shm && (shm_tx <= 0 || shm_rx <= 0 || udp_tx != 0 || udp_rx != 0))
		DIE("the traffic did not take the shm link alone (want shm_* > 0, UDP 0)");
	if (!shm && (udp_tx <= 0 || udp_rx <= 0 || shm_tx != 0 || shm_rx != 0))
		DIE("the traffic did not take UDP alone (want tx/rx_packets > 0, shm_* 0)");
	/* The smallest ring (UROCE_SHM_RING_KB=64) cannot hold a 1 MiB WRITE's window: the
	 * sender must have waited for room, and the data above is still right. */
	if (shm && getenv("UROCE_SHM_RING_KB") && atoi(getenv("UROCE_SHM_RING_KB")) <= 64 &&
	    !strcmp(who, "requester")) {
		long long waits = stat_counter("shm_tx_waits"), full = stat_counter("shm_tx_full");

		printf("shm_link %s: shm_tx_waits %lld shm_tx_full %lld shm_tx_spilled %lld\n", who, waits, full,
		       stat_counter("shm_tx_spilled"));
		if (waits <= 0)
			DIE("a 64 KiB ring never made the sender wait: the full-ring path was not tested");
	}
	/* The link is lossless: a ring that stayed full kept the rest in its spill. */
	if (shm && !getenv("UROCE_FAULT") && stat_counter("shm_tx_full") != 0)
		DIE("shm_tx_full %lld: the link lost packets to a full ring", stat_counter("shm_tx_full"));
	if (shm && getenv("UROCE_FAULT")) {
		long long fd = stat_counter("shm_fault_drop"), fc = stat_counter("shm_fault_corrupt");

		printf("shm_link %s: shm_fault_drop %lld shm_fault_corrupt %lld shm_rx_bad_icrc %lld "
		       "shm_fault_dup %lld shm_fault_reorder %lld\n", who, fd, fc, stat_counter("shm_rx_bad_icrc"),
		       stat_counter("shm_fault_dup"), stat_counter("shm_fault_reorder"));
		if (fd <= 0 || fc <= 0)
			DIE("UROCE_FAULT is set but the shm link injected nothing");
	}
}

/* ---------------------------------------------------------------- modes */

#define STALL_UD 100u
#define STALL_US 20000u

static int run_stall(struct node *n, pid_t child)
{
	uint32_t ok = 1;

	if (!child) {
		/* The responder: receives for the UC SEND at TGT, the UD SENDs after it. */
		post_recv(n, UC, 1, TGT, 1u << 20);
		for (uint32_t i = 0; i < STALL_UD; i++)
			post_recv(n, UD, 100 + i, TGT + (1u << 20) + i * (MTU + GRH), MTU + GRH);
		xfer(n->sock, &ok, sizeof(ok), true);
		{
			struct ibv_wc wc = expect(n->rcq, IBV_WC_RECV, "UC SEND 1 MiB after a stall (responder)");

			if (wc.byte_len != 1u << 20)
				DIE("UC SEND after a stall: byte_len %u", wc.byte_len);
			check(n->buf + TGT, 1u << 20, 77, "UC SEND 1 MiB after a stall (responder)");
		}
		for (uint32_t i = 0; i < STALL_UD; i++) {
			struct ibv_wc wc = expect(n->rcq, IBV_WC_RECV, "UD SEND after a stall (responder)");

			if (wc.wr_id != 100 + i || wc.byte_len != MTU + GRH)
				DIE("UD SEND %u after a stall: wr_id %llu byte_len %u", i,
				    (unsigned long long)wc.wr_id, wc.byte_len);
			check(n->buf + TGT + (1u << 20) + i * (MTU + GRH) + GRH, MTU, 1000 + i,
			      "UD SEND after a stall (responder)");
		}
		xfer(n->sock, &ok, sizeof(ok), true);
		return 0;
	}
	xfer(n->sock, &ok, sizeof(ok), false);
	if (kill(child, SIGSTOP))
		DIE("SIGSTOP: %s", strerror(errno));
	/* kill() returns before the child has stopped: on a loaded CPU its progress thread
	 * went on draining the ring for a while, so the ring never stayed full (1 run in 40
	 * under two busy loops).  Send only once every thread of it is stopped. */
	{
		int st;

		if (waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st))
			DIE("the responder did not stop (waitpid: %s)", strerror(errno));
	}
	{
		struct ibv_sge sg = { (uintptr_t)n->buf, 1u << 20, n->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND };

		fill(n->buf, 1u << 20, 77);
		post(n, UC, &wr);
		expect(n->scq, IBV_WC_SEND, "UC SEND 1 MiB to a stopped responder");
	}
	for (uint32_t i = 0; i < STALL_UD; i++) {
		/* Each from its own buffer: a send completes before the peer read it. */
		uint8_t *b = n->buf + (1u << 20) + i * MTU;
		struct ibv_sge sg = { (uintptr_t)b, MTU, n->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 100 + i, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND };

		fill(b, MTU, 1000 + i);
		post(n, UD, &wr);
		expect(n->scq, IBV_WC_SEND, "UD SEND to a stopped responder");
	}
	usleep(STALL_US);
	if (kill(child, SIGCONT))
		DIE("SIGCONT: %s", strerror(errno));
	xfer(n->sock, &ok, sizeof(ok), false);   /* every message arrived, every byte checked */
	{
		long long full = stat_counter("shm_tx_full"), spilled = stat_counter("shm_tx_spilled");

		printf("shm_link requester: after a %u ms stall: shm_tx_waits %lld shm_tx_full %lld shm_tx_spilled %lld\n",
		       STALL_US / 1000, stat_counter("shm_tx_waits"), full, spilled);
		if (full != 0)
			DIE("shm_tx_full %lld: the link lost packets to the full ring", full);
		if (spilled <= 0)
			DIE("nothing was spilled: the ring never stayed full, the case was not tested");
	}
	return 0;
}

static int run_ops(struct node *n, bool requester, const char *path, bool rc_only)
{
	static const uint32_t sizes[] = { 0, 1, MTU - 1, MTU, MTU + 1, 3 * MTU + 5, 65536, 1u << 20 };
	uint32_t seed = 1;
	struct cmd end = { END, 0, 0, 0, 0 };

	if (!requester) {
		responder(n);
		if (*(uint64_t *)(void *)(n->buf + ATOM) != 7)
			DIE("the atomic word is %llu after the atomics, want 7",
			    (unsigned long long)*(uint64_t *)(void *)(n->buf + ATOM));
	} else {
		requester_op(n, RC, PASSIVE, 4096, seed++);
		for (enum svc s = RC; s <= UD; s++) {
			if (rc_only && s != RC)
				break;
			for (enum op op = SEND; op < END; op++) {
				if (s == UD && op != SEND && op != SEND_IMM)
					continue;
				if (s == UC && (op == SEND_INV || op == READ || op == ATOMICS))
					continue;
				if (op == ATOMICS) {
					requester_op(n, s, op, 8, seed++);
					continue;
				}
				for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
					if (s == UD && sizes[i] > MTU)
						continue;
					requester_op(n, s, op, sizes[i], seed++);
				}
			}
		}
		{
			uint32_t r, ok;

			xfer(n->sock, &end, sizeof(end), true);
			xfer(n->sock, &r, sizeof(r), false);
			xfer(n->sock, &ok, sizeof(ok), false);
		}
		printf("shm_link %s: every opcode done, %u operations, data checked\n", who, seed - 1);
	}
	check_path(path);
	return 0;
}

static int run_kill(struct node *n, pid_t child)
{
	uint32_t posted = 0, done = 0, flushed = 0;
	uint64_t t_kill = 0;
	struct ibv_sge sg = { (uintptr_t)n->buf, 65536, n->mr->lkey };
	long long gone, udp;

	for (;;) {
		struct ibv_send_wr wr = { .wr_id = posted, .sg_list = &sg, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE };
		struct ibv_wc wc;
		int r;

		wr.wr.rdma.remote_addr = n->other[RC].addr + TGT;
		wr.wr.rdma.rkey = n->other[RC].rkey;
		if (posted - done < 16 && (!t_kill || posted - done < 16)) {
			post(n, RC, &wr);
			posted++;
		}
		r = ibv_poll_cq(n->scq, 1, &wc);
		if (r < 0)
			DIE("poll_cq");
		if (t_kill && now_ns() - t_kill > 5 * 16800000ull + 250000000ull)
			DIE("no RETRY_EXC_ERR %llu ms after the kill",
			    (unsigned long long)((now_ns() - t_kill) / 1000000));
		if (!r)
			continue;
		if (wc.status == IBV_WC_SUCCESS) {
			done++;
			if (done == 64 && !t_kill) {
				kill(child, SIGKILL);
				waitpid(child, NULL, 0);
				t_kill = now_ns();
			}
			continue;
		}
		if (!t_kill)
			DIE("WRITE %llu: %s before the kill", (unsigned long long)wc.wr_id,
			    ibv_wc_status_str(wc.status));
		if (wc.status != IBV_WC_RETRY_EXC_ERR)
			DIE("first error after the kill: %s, want RETRY_EXC_ERR", ibv_wc_status_str(wc.status));
		printf("shm_link requester: RETRY_EXC_ERR %.1f ms after the kill\n",
		       (double)(now_ns() - t_kill) / 1e6);
		done++;
		break;
	}
	/* The rest are flushed, and the QP is in Error. */
	while (done < posted) {
		struct ibv_wc wc = rc_pair_wait_wc(n->scq, LIMIT);

		if (wc.status != IBV_WC_WR_FLUSH_ERR)
			DIE("after RETRY_EXC_ERR: %s, want WR_FLUSH_ERR", ibv_wc_status_str(wc.status));
		done++;
		flushed++;
	}
	{
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		if (ibv_query_qp(n->qp[RC], &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_ERR)
			DIE("QP not in Error after RETRY_EXC_ERR");
	}
	/* uroced marks the dead side gone when its connection closes; the survivor lets go of
	 * the link then (shm_peers_gone).  Packets sent after that count as lost to it
	 * (shm_tx_peer_gone), but the retries may all have been sent before uroced noticed. */
	{
		uint64_t end = now_ns() + 5000000000ull;

		while ((gone = stat_counter("shm_peers_gone")) <= 0 && now_ns() < end)
			usleep(10000);
	}
	udp = stat_counter("tx_packets");
	printf("shm_link requester: %u flushed; shm_peers_gone %lld shm_tx_peer_gone %lld tx_packets %lld\n",
	       flushed, gone, stat_counter("shm_tx_peer_gone"), udp);
	if (gone <= 0)
		DIE("the link did not report the death within 5 s (shm_peers_gone 0)");
	if (udp)
		DIE("%lld packets went over UDP", udp);
	return 0;
}

int main(int argc, char **argv)
{
	struct node n = { 0 };
	int sv[2];
	pid_t child;
	bool kill_mode, stall_mode, rc_only;
	const char *path;

	stall_mode = argc == 2 && !strcmp(argv[1], "stall");
	if (!stall_mode &&
	    (argc < 2 || (strcmp(argv[1], "ops") && strcmp(argv[1], "kill")) ||
	     (!strcmp(argv[1], "ops") && (argc < 3 || (strcmp(argv[2], "shm") && strcmp(argv[2], "udp")))))) {
		fprintf(stderr, "usage: shm_link ops shm|udp [rc] | shm_link stall | shm_link kill\n");
		return 2;
	}
	kill_mode = !strcmp(argv[1], "kill");
	path = kill_mode || stall_mode ? "shm" : argv[2];
	rc_only = argc > 3 && !strcmp(argv[3], "rc");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		DIE("socketpair");
	child = fork();
	if (child < 0)
		DIE("fork");
	who = child ? "requester" : "responder";
	n.sock = child ? sv[0] : sv[1];
	close(child ? sv[1] : sv[0]);
	alarm(120);   /* never a hang, whatever breaks */
	setup(&n, kill_mode);
	connect_all(&n, kill_mode);
	if (kill_mode) {
		if (!child) {
			/* The target: keeps its QP open until it is killed. */
			for (;;)
				pause();
		}
		return run_kill(&n, child);
	}
	if (stall_mode)
		run_stall(&n, child);
	else
		run_ops(&n, child != 0, path, rc_only);
	if (child) {
		int status;

		if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			DIE("the responder failed");
		if (stall_mode)
			printf("PASS shm_link stall\n");
		else
			printf("PASS shm_link ops %s%s\n", path, rc_only ? " rc" : "");
	}
	return 0;
}
