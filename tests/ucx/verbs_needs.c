/* verbs_needs.c — what UCX 1.13's rc_verbs and ud_verbs need from the verbs layer
 * (issue #13, ../shared/notes/ucx-mpi.md §1.3-§1.6), one check per item, with the
 * arguments UCX passes (uct_ib_* in UCX v1.13.1: ib_device.c, ib_iface.c, rc_iface.c,
 * rc_verbs_ep.c, ud_iface.c).  Plain verbs on uroce0 (on lo) in one process: two RC QPs
 * connected to each other, two UD QPs.  Run by tests/daemon/nsrun.sh (own daemon).
 *
 *   gid        every index below gid_tbl_len queries with success; empty ones are zero
 *              GIDs; GID[0] is a real GID (UCX's port check reads index 0)
 *   port       ACTIVE, Ethernet, active_width one of 1/2/4/8/16 (else UCX warns "invalid
 *              active width"), active_speed a known IB speed
 *   caps       max_qp_wr >= 4096, max_srq_wr >= 4095, max_cqe >= 4096, max_sge >= 6,
 *              max_qp_init_rd_atom == max_qp_rd_atom >= 1, ATOMIC_HCA, no ODP
 *   cq         ibv_create_cq_ex with comp_mask 0 (UCX tries it first), comp_vector = the
 *              highest CPU (UCX passes the lowest CPU of the worker's mask; rxe accepts
 *              one vector per CPU)
 *   srq        max_wr 4095, max_sge 1; RC QPs with max_recv_wr 0 on it
 *   sizes      rc_verbs' probe QP (1/1 WR, 1/1 SGE, inline 0), its real QP (send_wr 256,
 *              send_sge 5, inline 64: returned cap max_send_sge > 1 and max_inline >= 64),
 *              ud_verbs' QP (256/4096 WR, 6/1 SGE, inline 64); a create that cannot be
 *              satisfied fails with EINVAL, not ENOMEM (UCX then blames ulimit -l)
 *   modify     INIT/RTR/RTS as rc_iface.c does (rq_psn 0, max_dest_rd_atomic and
 *              max_rd_atomic = max_qp_rd_atom, timeout 18, retry 7, rnr_retry 7) with
 *              UCX's RoCE AH: dlid 0xC000, flow_label 0xFFFFFFFF, traffic_class 106,
 *              hop_limit 255
 *   ah         the test AH of uct_ib_device_test_roce_gid_index (flow_label 1)
 *   flush      zero-length RDMA WRITE, num_sge 0, rkey 0, remote_addr 0, INLINE: success
 *   ops        SEND (inline, solicited, an empty SGE at address 0 after the data, as
 *              UCX's am_short posts it) into the SRQ, WRITE, READ, 64-bit fetch-add and
 *              cmp-swap with FENCE, each completion and result checked
 *   rd_order   a READ, then unfenced a WRITE to the same bytes: the READ returns what was
 *              there when it executed (rxe and mlx5 do; Open MPI 4.1's osc ucx
 *              MPI_Get_accumulate(MPI_REPLACE) is a get then a put with no flush between)
 *   ud_sl      UD receive: IBV_WC_GRH, wc.sl = 2 for IPv4 (then the destination address
 *              is the last 4 bytes of the GRH area), 1 for IPv6 (the last 16 bytes): UCX's
 *              UCX_UD_VERBS_ETH_DGID_CHECK drops every datagram otherwise
 *   fds        async_fd and the completion channel's fd: O_NONBLOCK and epoll work
 *   mr         ibv_reg_mr_iova2 with access 0xF | RELAXED_ORDERING
 *
 * Every wait is a busy poll of ibv_poll_cq with a 5 s bound, under a 10 s poll lease
 * (UROCE_POLL_LEASE_US): the progress thread leaves the socket to the polling thread, so
 * the exchanges finish only because ibv_poll_cq advances the engine itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include "check.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_device_attr dattr;
static int gid4 = -1, gid6 = -1;       /* an IPv4-mapped and an IPv6 GID index */
static union ibv_gid gids[256];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Busy-poll @cq for one completion, at most 5 s. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = now() + 5;

	while (now() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
	}
	return 0;
}

static bool v4mapped(const union ibv_gid *g)
{
	static const uint8_t p[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g->raw, p, 12);
}

static bool zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static void check_gids(const struct ibv_port_attr *pa)
{
	CHECK(pa->gid_tbl_len > 0 && pa->gid_tbl_len <= 256, "gid_tbl_len %d", pa->gid_tbl_len);
	for (int i = 0; i < pa->gid_tbl_len && i < 256; i++) {
		struct ibv_gid_entry e;
		int ex;

		memset(&gids[i], 0xAA, sizeof(gids[i]));
		CHECK(ibv_query_gid(ctx, 1, i, &gids[i]) == 0, "ibv_query_gid(%d): %s", i, strerror(errno));
		ex = ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0);
		if (ex == ENODATA) {
			/* UCX's GID selection walks every index and gives up at the first failure. */
			CHECK(zero(&gids[i], 16), "empty GID[%d] is not the zero GID", i);
		} else {
			CHECK(ex == 0, "ibv_query_gid_ex(%d) = %d", i, ex);
			CHECK(!zero(&gids[i], 16), "valid GID[%d] reads as zero", i);
			CHECK(e.gid_type == IBV_GID_TYPE_ROCE_V2, "GID[%d] type %u", i, e.gid_type);
			if (v4mapped(&gids[i]) && gid4 < 0)
				gid4 = i;
			if (!v4mapped(&gids[i]) && gid6 < 0)
				gid6 = i;
		}
	}
	/* uct_ib_device_port_check: the GID at UCX_IB_GID_INDEX (0 by default) must be real. */
	CHECK(!zero(&gids[0], 16), "GID[0] is zero: UCX rejects the port");
	CHECK(gid4 >= 0, "no IPv4-mapped GID on uroce0 (lo has 127.0.0.1)");
	CHECK(gid6 >= 0, "no IPv6 GID on uroce0 (lo has ::1)");
}

static void check_port(void)
{
	static const int widths[] = { 1, 2, 4, 8, 16 };
	static const int speeds[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
	struct ibv_port_attr pa;
	bool w = false, s = false;

	CHECK(ibv_query_port(ctx, 1, &pa) == 0, "ibv_query_port");
	CHECK(pa.state == IBV_PORT_ACTIVE, "port state %d", pa.state);
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET, "link layer %d", pa.link_layer);
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		w |= pa.active_width == widths[i];
	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		s |= pa.active_speed == speeds[i];
	CHECK(w, "active_width %u: UCX warns 'invalid active width'", pa.active_width);
	CHECK(s, "active_speed %u is no IB speed", pa.active_speed);
	CHECK(pa.active_mtu >= IBV_MTU_1024 && pa.active_mtu <= IBV_MTU_4096, "active_mtu %d", pa.active_mtu);
	CHECK(pa.max_msg_sz >= (1u << 30), "max_msg_sz %u", pa.max_msg_sz);
	check_gids(&pa);
}

static void check_caps(void)
{
	struct ibv_device_attr_ex x;

	CHECK(ibv_query_device(ctx, &dattr) == 0, "ibv_query_device");
	CHECK(dattr.max_qp_wr >= 4096, "max_qp_wr %d (ud_verbs: recv_wr 4096)", dattr.max_qp_wr);
	CHECK(dattr.max_srq_wr >= 4095, "max_srq_wr %d (rc_verbs RX_QUEUE_LEN 4095)", dattr.max_srq_wr);
	CHECK(dattr.max_cqe >= 4096, "max_cqe %d", dattr.max_cqe);
	CHECK(dattr.max_sge >= 6, "max_sge %d (ud_verbs: send_sge 6)", dattr.max_sge);
	CHECK(dattr.max_qp_rd_atom >= 1, "max_qp_rd_atom %d", dattr.max_qp_rd_atom);
	CHECK(dattr.max_qp_init_rd_atom == dattr.max_qp_rd_atom,
	      "max_qp_init_rd_atom %d != max_qp_rd_atom %d (UCX sets max_rd_atomic = max_qp_rd_atom)",
	      dattr.max_qp_init_rd_atom, dattr.max_qp_rd_atom);
	CHECK(dattr.atomic_cap == IBV_ATOMIC_HCA, "atomic_cap %d", dattr.atomic_cap);
	CHECK(dattr.phys_port_cnt == 1, "phys_port_cnt %d", dattr.phys_port_cnt);
	CHECK(ctx->num_comp_vectors >= 1, "num_comp_vectors %d", ctx->num_comp_vectors);
	/* uct_ib_device_query: comp_mask 0. */
	CHECK(ibv_query_device_ex(ctx, NULL, &x) == 0, "ibv_query_device_ex");
	CHECK(zero(&x.odp_caps, sizeof(x.odp_caps)), "ODP advertised: UCX would register one implicit MR");
}

static void check_fds(struct ibv_comp_channel *ch)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };

	CHECK(ep >= 0, "epoll_create1");
	CHECK(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0, "async_fd O_NONBLOCK");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ctx->async_fd, &ev) == 0, "epoll async_fd: %s", strerror(errno));
	CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0, "channel fd O_NONBLOCK");
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev) == 0, "epoll channel fd: %s", strerror(errno));
	close(ep);
}

static struct ibv_cq *cq_ex(struct ibv_comp_channel *ch, int cqe, uint32_t vector)
{
	struct ibv_cq_init_attr_ex a = { .cqe = (uint32_t)cqe, .channel = ch, .comp_vector = vector };
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &a);

	CHECK(cq != NULL, "ibv_create_cq_ex(cqe %d, vector %u, comp_mask 0): %s", cqe, vector, strerror(errno));
	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

/* The AH UCX builds for RoCE (uct_ib_iface_fill_ah_attr_from_gid_lid). */
static void ucx_ah(struct ibv_ah_attr *ah, int sgid, const union ibv_gid *dgid, uint32_t flow)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = 1;
	ah->dlid = 0xC000;                 /* UCT_IB_ROCE_UDP_SRC_PORT_BASE | path */
	ah->sl = 0;
	ah->is_global = 1;
	ah->grh.dgid = *dgid;
	ah->grh.sgid_index = (uint8_t)sgid;
	ah->grh.hop_limit = 255;
	ah->grh.traffic_class = 106;       /* UCT_IB_DEFAULT_ROCEV2_DSCP << 2 */
	ah->grh.flow_label = flow;
}

static int to_rts(struct ibv_qp *qp, uint32_t dqpn, int sgid)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = (uint8_t)dattr.max_qp_rd_atom;
	a.min_rnr_timer = 1;
	ucx_ah(&a.ah_attr, sgid, &gids[sgid], 0xFFFFFFFFu);   /* ~(0 * path): masked, not refused */
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)dattr.max_qp_rd_atom;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp *rc_qp(struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
		.cap = { .max_send_wr = 256, .max_recv_wr = 0, .max_send_sge = 5, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	CHECK(qp != NULL, "rc_verbs QP (send_wr 256, send_sge 5, inline 64, SRQ): %s", strerror(errno));
	if (qp) {
		CHECK(ia.cap.max_send_sge > 1, "returned max_send_sge %u (UCX asserts > 1)", ia.cap.max_send_sge);
		CHECK(ia.cap.max_send_sge >= 5, "returned max_send_sge %u", ia.cap.max_send_sge);
		CHECK(ia.cap.max_inline_data >= 64, "returned max_inline_data %u", ia.cap.max_inline_data);
	}
	return qp;
}

static void check_rc(struct ibv_comp_channel *ch)
{
	struct ibv_cq *cq = cq_ex(ch, 4096 + 256, 0), *scq;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4095, .max_sge = 1 } };
	struct ibv_qp_init_attr probe = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr huge = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = (uint32_t)dattr.max_qp_wr + 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	uint64_t *mem = aligned_alloc(4096, 4 * 4096);
	struct ibv_srq *srq;
	struct ibv_qp *a, *b, *q;
	struct ibv_mr *mr;
	struct ibv_wc wc;

	if (!cq || !mem)
		return;
	/* One completion vector per CPU, as rxe: UCX asks for its worker's lowest CPU. */
	scq = cq_ex(NULL, 256, (uint32_t)(ncpu > 1 ? ncpu - 1 : 0));
	if (!scq)
		return;
	CHECK((q = ibv_create_qp(pd, &probe)) != NULL, "rc_verbs' probe QP: %s", strerror(errno));
	if (q)
		ibv_destroy_qp(q);
	errno = 0;
	CHECK(ibv_create_qp(pd, &huge) == NULL && errno != ENOMEM && errno != 0,
	      "QP with max_send_wr > max_qp_wr: errno %d (%s), want a failure other than ENOMEM",
	      errno, strerror(errno));
	errno = 0;
	CHECK(ibv_create_cq(ctx, dattr.max_cqe + 1, NULL, NULL, 0) == NULL && errno != ENOMEM && errno != 0,
	      "CQ with cqe > max_cqe: errno %d (%s)", errno, strerror(errno));
	srq = ibv_create_srq(pd, &sa);
	CHECK(srq != NULL, "ibv_create_srq(4095, 1): %s", strerror(errno));
	if (!srq)
		return;
	memset(mem, 0, 4 * 4096);
	mr = ibv_reg_mr_iova2(pd, mem, 4 * 4096, (uintptr_t)mem, 0xF | IBV_ACCESS_RELAXED_ORDERING);
	CHECK(mr != NULL, "ibv_reg_mr_iova2(access 0xF | RELAXED_ORDERING): %s", strerror(errno));
	if (!mr)
		return;
	a = rc_qp(scq, cq, srq);
	b = rc_qp(scq, cq, srq);
	if (!a || !b)
		return;
	CHECK(to_rts(a, b->qp_num, gid4) == 0, "A: INIT/RTR/RTS with UCX's attributes: %s", strerror(errno));
	CHECK(to_rts(b, a->qp_num, gid4) == 0, "B: INIT/RTR/RTS with UCX's attributes: %s", strerror(errno));

	/* 1: the flush of uct_rc_verbs_ep_flush: a zero-length WRITE, no SGE, rkey 0. */
	{
		struct ibv_send_wr wr = {
			.wr_id = 1, .opcode = IBV_WR_RDMA_WRITE, .num_sge = 0,
			.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = 0, .rkey = 0 },
		}, *bad;

		CHECK(ibv_post_send(a, &wr, &bad) == 0, "post zero-length WRITE");
		CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1,
		      "zero-length WRITE with rkey 0: status %s", ibv_wc_status_str(wc.status));
	}
	/* 2: an inline, solicited SEND into the shared receive queue. */
	{
		struct ibv_sge rs = { .addr = (uintptr_t)&mem[512], .length = 64, .lkey = mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 2, .sg_list = &rs, .num_sge = 1 }, *rbad;
		char msg[40] = "uroce srq send";
		/* uct_rc_verbs_ep_am_short: header and payload as two inline SGEs; an empty
		 * payload is an SGE of length 0 at address 0. */
		struct ibv_sge ss[2] = { { .addr = (uintptr_t)msg, .length = sizeof(msg) }, { 0 } };
		struct ibv_send_wr wr = {
			.wr_id = 3, .opcode = IBV_WR_SEND, .sg_list = ss, .num_sge = 2,
			.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
		}, *bad;

		CHECK(ibv_post_srq_recv(srq, &rw, &rbad) == 0, "post_srq_recv");
		CHECK(ibv_post_send(a, &wr, &bad) == 0, "post SEND");
		msg[0] = 'X';   /* inline: the buffer is the caller's again */
		CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "SEND completion");
		CHECK(poll_one(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 &&
		      wc.byte_len == sizeof(msg) && wc.qp_num == b->qp_num,
		      "SRQ receive: status %s byte_len %u", ibv_wc_status_str(wc.status), wc.byte_len);
		CHECK(!strcmp((char *)&mem[512], "uroce srq send"), "SRQ receive data");
	}
	/* 3: WRITE, READ, fetch-add, cmp-swap (FENCE after the READ). */
	{
		struct ibv_sge s = { .addr = (uintptr_t)&mem[0], .length = 256, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 4, .opcode = IBV_WR_RDMA_WRITE, .sg_list = &s, .num_sge = 1,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)&mem[1024], .rkey = mr->rkey },
		}, *bad;

		for (int i = 0; i < 32; i++)
			mem[i] = 0x1000 + (uint64_t)i;
		CHECK(ibv_post_send(a, &wr, &bad) == 0, "post WRITE");
		CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "WRITE: %s", ibv_wc_status_str(wc.status));
		CHECK(!memcmp(&mem[0], &mem[1024], 256), "WRITE data");
		s.addr = (uintptr_t)&mem[1536];
		wr.wr_id = 5;
		wr.opcode = IBV_WR_RDMA_READ;
		CHECK(ibv_post_send(a, &wr, &bad) == 0, "post READ");
		CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "READ: %s", ibv_wc_status_str(wc.status));
		CHECK(!memcmp(&mem[1536], &mem[1024], 256), "READ data");

		mem[1800] = 40;
		s.addr = (uintptr_t)&mem[1801];
		s.length = 8;
		wr.wr_id = 6;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
		wr.wr.atomic.remote_addr = (uintptr_t)&mem[1800];
		wr.wr.atomic.rkey = mr->rkey;
		wr.wr.atomic.compare_add = 2;
		CHECK(ibv_post_send(a, &wr, &bad) == 0, "post fetch-add");
		CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "fetch-add: %s", ibv_wc_status_str(wc.status));
		CHECK(mem[1801] == 40 && mem[1800] == 42, "fetch-add: old %lu new %lu",
		      (unsigned long)mem[1801], (unsigned long)mem[1800]);
		wr.wr_id = 7;
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.compare_add = 42;
		wr.wr.atomic.swap = 7;
		CHECK(ibv_post_send(a, &wr, &bad) == 0, "post cmp-swap");
		CHECK(poll_one(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS, "cmp-swap: %s", ibv_wc_status_str(wc.status));
		CHECK(mem[1801] == 42 && mem[1800] == 7, "cmp-swap: old %lu new %lu",
		      (unsigned long)mem[1801], (unsigned long)mem[1800]);
	}
	/* 4: a READ and then, unfenced, a WRITE to the same bytes: the READ returns them as
	 * they were when it executed, as rxe and mlx5 do.  Open MPI 4.1's osc ucx relies on it
	 * (MPI_Get_accumulate with MPI_REPLACE is a get then a put, no flush between). */
	for (int round = 0; round < 50; round++) {
		struct ibv_sge rs = { .addr = (uintptr_t)&mem[1600], .length = 128, .lkey = mr->lkey };
		struct ibv_sge ws = { .addr = (uintptr_t)&mem[1700], .length = 128, .lkey = mr->lkey };
		struct ibv_send_wr w2 = {
			.wr_id = 9, .opcode = IBV_WR_RDMA_WRITE, .sg_list = &ws, .num_sge = 1,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = (uintptr_t)&mem[1300], .rkey = mr->rkey },
		};
		struct ibv_send_wr w1 = {
			.wr_id = 8, .opcode = IBV_WR_RDMA_READ, .sg_list = &rs, .num_sge = 1,
			.send_flags = IBV_SEND_SIGNALED, .next = &w2,
			.wr.rdma = { .remote_addr = (uintptr_t)&mem[1300], .rkey = mr->rkey },
		}, *bad;
		int done = 0, ok = 1;

		for (int i = 0; i < 16; i++) {
			mem[1300 + i] = 100 * (uint64_t)round + (uint64_t)i;   /* before */
			mem[1700 + i] = ~mem[1300 + i];                        /* what the WRITE puts */
			mem[1600 + i] = 0;
		}
		CHECK(ibv_post_send(a, &w1, &bad) == 0, "post READ + WRITE");
		while (done < 2 && poll_one(scq, &wc) == 1) {
			CHECK(wc.status == IBV_WC_SUCCESS, "READ/WRITE: %s", ibv_wc_status_str(wc.status));
			done++;
		}
		CHECK(done == 2, "READ + WRITE: %d completions", done);
		for (int i = 0; i < 16; i++)
			ok &= mem[1600 + i] == 100 * (uint64_t)round + (uint64_t)i;
		CHECK(ok, "round %d: the READ returned data written by the WRITE posted after it", round);
		if (!ok)
			break;
	}
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(cq);
	free(mem);
}

static struct ibv_qp *ud_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 256, .max_recv_wr = 4096, .max_send_sge = 6, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1ee7a330 };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	CHECK(qp != NULL, "ud_verbs QP (256/4096 WR, 6/1 SGE, inline 64): %s", strerror(errno));
	if (!qp)
		return NULL;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0, "UD INIT");
	a.qp_state = IBV_QPS_RTR;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "UD RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0, "UD RTS");
	return qp;
}

/* One UD datagram from @src to @dst over GID @g; the receive completion's sl and where
 * the destination address is in the GRH area. */
static void ud_exchange(struct ibv_qp *src, struct ibv_qp *dst, struct ibv_cq *cq, struct ibv_mr *mr,
			uint8_t *buf, int g)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_sge rs = { .addr = (uintptr_t)buf, .length = 40 + 64, .lkey = mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 10, .sg_list = &rs, .num_sge = 1 }, *rbad;
	char msg[16] = "uroce ud";
	struct ibv_sge ss = { .addr = (uintptr_t)msg, .length = sizeof(msg) };
	struct ibv_send_wr wr = {
		.wr_id = 11, .opcode = IBV_WR_SEND, .sg_list = &ss, .num_sge = 1,
		.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int got_send = 0, got_recv = 0;

	ucx_ah(&aa, g, &gids[g], 0xFFFFFFFFu);
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah != NULL, "ibv_create_ah with UCX's RoCE attributes (GID %d): %s", g, strerror(errno));
	if (!ah)
		return;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dst->qp_num;
	wr.wr.ud.remote_qkey = 0x1ee7a330;
	memset(buf, 0, 40 + 64);
	CHECK(ibv_post_recv(dst, &rw, &rbad) == 0, "UD post_recv");
	CHECK(ibv_post_send(src, &wr, &bad) == 0, "UD post_send");
	for (int i = 0; i < 2; i++) {
		if (poll_one(cq, &wc) != 1) {
			CHECK(0, "UD over GID %d: no completion within 5 s", g);
			break;
		}
		if (wc.wr_id == 11) {
			got_send = 1;
			CHECK(wc.status == IBV_WC_SUCCESS, "UD send: %s", ibv_wc_status_str(wc.status));
			continue;
		}
		got_recv = 1;
		CHECK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + sizeof(msg), "UD receive: %s, %u bytes",
		      ibv_wc_status_str(wc.status), wc.byte_len);
		CHECK(wc.wc_flags & IBV_WC_GRH, "UD receive without IBV_WC_GRH");
		CHECK(wc.src_qp == src->qp_num, "src_qp %u", wc.src_qp);
		if (v4mapped(&gids[g])) {
			/* mlx5's L3 header type, which UCX's dgid check takes from sl & 7. */
			CHECK(wc.sl == 2, "IPv4 UD receive: wc.sl %u, want 2", wc.sl);
			CHECK(!memcmp(buf + 36, &gids[g].raw[12], 4), "IPv4 daddr not in the last 4 bytes of the GRH area");
		} else {
			CHECK(wc.sl == 1, "IPv6 UD receive: wc.sl %u, want 1", wc.sl);
			CHECK(!memcmp(buf + 24, gids[g].raw, 16), "IPv6 dgid not in the last 16 bytes of the GRH area");
		}
		CHECK(!strcmp((char *)buf + 40, "uroce ud"), "UD payload");
	}
	CHECK(got_send && got_recv, "UD over GID %d: send %d recv %d", g, got_send, got_recv);
	ibv_destroy_ah(ah);
}

static void check_ud(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 4096 + 256, NULL, NULL, 0);
	uint8_t *buf = malloc(4096);
	struct ibv_qp *a, *b;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_mr *mr;

	CHECK(cq != NULL && buf != NULL, "UD CQ");
	if (!cq || !buf)
		return;
	/* uct_ib_device_test_roce_gid_index's probe AH. */
	ucx_ah(&aa, gid4, &gids[gid4], 1);
	aa.grh.traffic_class = 0;
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah != NULL, "UCX's GID probe AH (flow_label 1, dlid 0xC000): %s", strerror(errno));
	if (ah)
		ibv_destroy_ah(ah);
	mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	a = ud_qp(cq);
	b = ud_qp(cq);
	if (!mr || !a || !b)
		return;
	ud_exchange(a, b, cq, mr, buf, gid4);
	if (gid6 >= 0)
		ud_exchange(a, b, cq, mr, buf, gid6);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_comp_channel *ch;
	int n = 0;

	/* The progress thread sleeps while this thread busy-polls: ibv_poll_cq must do the work. */
	setenv("UROCE_POLL_LEASE_US", "10000000", 1);
	CHECK(ibv_fork_init() == 0, "ibv_fork_init");
	list = ibv_get_device_list(&n);
	CHECK(list && n >= 1, "no device");
	if (!list || n < 1)
		return check_summary();
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	CHECK(ctx != NULL, "ibv_open_device");
	if (!ctx)
		return check_summary();
	pd = ibv_alloc_pd(ctx);
	ch = ibv_create_comp_channel(ctx);
	CHECK(pd && ch, "PD and channel");
	if (!pd || !ch)
		return check_summary();
	check_caps();
	check_port();
	check_fds(ch);
	if (gid4 >= 0) {
		check_rc(ch);
		check_ud();
	}
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return check_summary();
}
