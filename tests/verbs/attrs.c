/* attrs.c — issue #17 (11): every field of ibv_query_device_ex and ibv_query_port pinned,
 * and the capabilities behind the values checked where a program can see them
 * (docs/verbs.md, "Device and port attributes").  Run by attrs.sh under `uroce run`.
 *
 *   attrs all     the first device (uroce0 on lo, with multicast on and a route for
 *                 224.0.0.0/4): every field; the limits a create verb enforces (max_cqe,
 *                 max_qp_wr, max_sge, max_srq_wr, max_srq_sge: the value works, one more is
 *                 EINVAL); UD_AV_PORT_ENFORCE (an AH or a QP on port 2 is refused);
 *                 multicast: ATTRS_QPS (64, more than rxe's 56 per group) UD QPs attach
 *                 one group and each receives the one datagram sent to it, and one context
 *                 attaches exactly max_mcast_grp groups, the next attach fails;
 *                 BAD_QKEY_CNTR: datagrams with a wrong Q_Key are not received and
 *                 qkey_viol_cntr counts them, equal to `uroce stat`'s drop_qkey of this
 *                 process; BAD_PKEY_CNTR is claimed exactly when `uroce stat` shows a
 *                 drop_bad_pkey counter.
 *   attrs rate DEV WIDTH SPEED
 *                 DEV's port reports active_width WIDTH and active_speed SPEED (a veth:
 *                 10 Gb/s, 1X FDR10 as Soft-RoCE maps it).
 *
 * Environment: ATTRS_MCAST_GRP, the expected max_mcast_grp (attrs.sh sets the namespace's
 * net.ipv4.igmp_max_memberships to it); UROCE, the uroce tool.  Every wait is bounded.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define QKEY 0x11110000u
#define WRONG_QKEY 0x22220000u          /* top bit 0: not the controlled Q_Key (IBA 10.2.5) */
#define MSG 64
#define SLOT (MSG + 40)                 /* UD receives start with the 40-byte GRH area */
#define NQKEY 5                         /* datagrams sent with the wrong Q_Key */
#define MAXQ 96

/* ---- what uroce reports (docs/verbs.md lists why each is what it is) ---- */
#define FLAGS_BASE (IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_UD_AV_PORT_ENFORCE |           \
		    IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |              \
		    IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_MEM_WINDOW | \
		    IBV_DEVICE_MEM_MGT_EXTENSIONS | IBV_DEVICE_MEM_WINDOW_TYPE_2B)

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static _Noreturn void die(const char *m)
{
	fprintf(stderr, "attrs: %s (errno %d %s)\n", m, errno, strerror(errno));
	check_summary();
	exit(1);
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

#define EQ(field, want) CHECK((long long)(field) == (long long)(want), "%s = %lld, want %lld", \
			      #field, (long long)(field), (long long)(want))

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; devs && devs[i] && !ctx; i++)
		if (!name || !strcmp(ibv_get_device_name(devs[i]), name))
			ctx = ibv_open_device(devs[i]);
	if (devs)
		ibv_free_device_list(devs);
	if (!ctx)
		die("no device");
	return ctx;
}

static void pin_device(struct ibv_context *ctx, const struct ibv_device_attr_ex *x, int mcast_grp)
{
	const struct ibv_device_attr *a = &x->orig_attr;
	struct ibv_device_attr plain;

	CHECK(!strncmp(a->fw_ver, "uroce ", 6), "fw_ver [%s]", a->fw_ver);
	CHECK(a->node_guid != 0, "node_guid 0");
	EQ(a->sys_image_guid, a->node_guid);
	CHECK(a->max_mr_size == UINT64_MAX, "max_mr_size %#llx", (unsigned long long)a->max_mr_size);
	EQ(a->page_size_cap, 0xFFFFF000u);
	EQ(a->vendor_id, 0xFFFFFF);
	EQ(a->vendor_part_id, 0);
	EQ(a->hw_ver, 0);
	/* The limits memory bounds (docs/verbs.md "Limits"), for the 1024 MiB budget attrs.sh
	 * sets (UROCE_MEM_BUDGET_MB): 2^30 / 16 KiB per QP; the largest power-of-two ring
	 * within 2^30 / 16 (64 MiB): 2^20 CQEs of 48 bytes, 2^16 send WQEs of 512 to 1023 bytes
	 * (32 SGEs, 256 inline bytes, the requester's slot state); 2^30 / 256 per AH.  The
	 * counts whose cost is an object's size are checked as ranges and printed for attrs.sh. */
	EQ(a->max_qp, 65536);
	EQ(a->max_qp_wr, 65536);
	EQ(a->max_sge, 32);
	EQ(a->max_sge_rd, 32);
	CHECK(a->max_cq >= 1 << 20 && a->max_cq <= 1 << 24, "max_cq %d", a->max_cq);
	EQ(a->max_cqe, 1 << 20);
	CHECK(a->max_mr >= 1 << 22 && a->max_mr <= (1 << 24) - 1, "max_mr %d", a->max_mr);
	CHECK(a->max_pd >= 1 << 24, "max_pd %d", a->max_pd);
	EQ(a->max_qp_rd_atom, 128);
	EQ(a->max_ee_rd_atom, 0);
	EQ(a->max_res_rd_atom, 258048);
	EQ(a->max_qp_init_rd_atom, 128);
	EQ(a->max_ee_init_rd_atom, 0);
	EQ(a->atomic_cap, IBV_ATOMIC_HCA);
	EQ(a->max_ee, 0);
	EQ(a->max_rdd, 0);
	CHECK(a->max_mw >= 1 << 22 && a->max_mw <= (1 << 24) - 1, "max_mw %d", a->max_mw);
	EQ(a->max_raw_ipv6_qp, 0);
	EQ(a->max_raw_ethy_qp, 0);
	EQ(a->max_mcast_grp, mcast_grp);
	EQ(a->max_mcast_qp_attach, a->max_qp);
	EQ(a->max_total_mcast_qp_attach, (long long)mcast_grp * a->max_qp);
	EQ(a->max_ah, 1 << 22);
	EQ(a->max_fmr, 0);
	EQ(a->max_map_per_fmr, 0);
	CHECK(a->max_srq >= 1 << 20 && a->max_srq <= 1 << 24, "max_srq %d", a->max_srq);
	EQ(a->max_srq_wr, 65536);
	printf("max_cq %d\nmax_mr %d\nmax_pd %d\nmax_mw %d\nmax_srq %d\n", a->max_cq, a->max_mr,
	       a->max_pd, a->max_mw, a->max_srq);
	EQ(a->max_srq_sge, 32);
	EQ(a->max_pkeys, 1);
	EQ(a->local_ca_ack_delay, 15);
	EQ(a->phys_port_cnt, 1);
	/* The extended part: nothing beyond the base attributes is offered. */
	EQ(x->comp_mask, 0);
	CHECK(all_zero(&x->odp_caps, sizeof(x->odp_caps)), "odp_caps not zero");
	EQ(x->completion_timestamp_mask, 0);
	EQ(x->hca_core_clock, 0);
	EQ(x->device_cap_flags_ex, a->device_cap_flags);
	CHECK(all_zero(&x->tso_caps, sizeof(x->tso_caps)), "tso_caps not zero");
	CHECK(all_zero(&x->rss_caps, sizeof(x->rss_caps)), "rss_caps not zero");
	EQ(x->max_wq_type_rq, 0);
	CHECK(all_zero(&x->packet_pacing_caps, sizeof(x->packet_pacing_caps)), "packet pacing not zero");
	EQ(x->raw_packet_caps, 0);
	CHECK(all_zero(&x->tm_caps, sizeof(x->tm_caps)), "tm_caps not zero");
	CHECK(all_zero(&x->cq_mod_caps, sizeof(x->cq_mod_caps)), "cq_mod_caps not zero");
	EQ(x->max_dm_size, 0);
	CHECK(all_zero(&x->pci_atomic_caps, sizeof(x->pci_atomic_caps)), "pci_atomic_caps not zero");
	EQ(x->xrc_odp_caps, 0);
	EQ(x->phys_port_cnt_ex, 1);
	/* The plain verb reports the same. */
	CHECK(!ibv_query_device(ctx, &plain), "ibv_query_device");
	CHECK(!memcmp(&plain, a, sizeof(plain)), "ibv_query_device differs from _ex");
}

static void pin_port(const struct ibv_port_attr *p)
{
	EQ(p->state, IBV_PORT_ACTIVE);
	EQ(p->max_mtu, IBV_MTU_4096);
	EQ(p->active_mtu, IBV_MTU_4096);         /* lo: 65536 - 80 >= 4096 */
	EQ(p->gid_tbl_len, 32);
	EQ(p->port_cap_flags, IBV_PORT_CM_SUP);
	EQ(p->max_msg_sz, 0x80000000u);
	EQ(p->bad_pkey_cntr, 0);
	EQ(p->qkey_viol_cntr, 0);
	EQ(p->pkey_tbl_len, 1);
	EQ(p->lid, 0);
	EQ(p->sm_lid, 0);
	EQ(p->lmc, 0);
	EQ(p->max_vl_num, 1);
	EQ(p->sm_sl, 0);
	EQ(p->subnet_timeout, 0);
	EQ(p->init_type_reply, 0);
	EQ(p->active_width, 2);                  /* lo has no link speed: nominal 4X EDR */
	EQ(p->active_speed, 32);
	EQ(p->phys_state, 5);
	EQ(p->link_layer, IBV_LINK_LAYER_ETHERNET);
	EQ(p->flags, 0);
	EQ(p->port_cap_flags2, 0);
}

/* The limits the create verbs enforce: the reported maximum works, one more is refused. */
static void limits(struct ibv_context *ctx, struct ibv_pd *pd, const struct ibv_device_attr *a)
{
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;

	cq = ibv_create_cq(ctx, a->max_cqe, NULL, NULL, 0);
	CHECK(cq != NULL, "CQ of max_cqe %d entries", a->max_cqe);
	errno = 0;
	CHECK(!ibv_create_cq(ctx, a->max_cqe + 1, NULL, NULL, 0) && errno == EINVAL,
	      "CQ of max_cqe + 1: errno %d", errno);
	for (int extra = 0; extra <= 1; extra++) {
		struct ibv_qp_init_attr wr = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = (uint32_t)a->max_qp_wr + extra, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp_init_attr sge = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = (uint32_t)a->max_sge + extra,
				 .max_recv_sge = (uint32_t)a->max_sge + extra } };

		qp = ibv_create_qp(pd, &wr);
		CHECK(!!qp == !extra, "QP with max_qp_wr%s send WRs", extra ? " + 1" : "");
		if (qp)
			ibv_destroy_qp(qp);
		qp = ibv_create_qp(pd, &sge);
		CHECK(!!qp == !extra, "QP with max_sge%s SGEs", extra ? " + 1" : "");
		if (qp)
			ibv_destroy_qp(qp);
		srq = ibv_create_srq(pd, &(struct ibv_srq_init_attr){
			.attr = { .max_wr = (uint32_t)a->max_srq_wr + extra, .max_sge = 1 } });
		CHECK(!!srq == !extra, "SRQ of max_srq_wr%s", extra ? " + 1" : "");
		if (srq)
			ibv_destroy_srq(srq);
		srq = ibv_create_srq(pd, &(struct ibv_srq_init_attr){
			.attr = { .max_wr = 1, .max_sge = (uint32_t)a->max_srq_sge + extra } });
		CHECK(!!srq == !extra, "SRQ with max_srq_sge%s", extra ? " + 1" : "");
		if (srq)
			ibv_destroy_srq(srq);
	}
	ibv_destroy_cq(cq);
}

/* A UD QP in RTS on @port (NULL if INIT on that port is refused); sends complete on
 * @scq, receives on @rcq. */
static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, uint8_t port)
{
	struct ibv_qp_init_attr ia = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = port, .qkey = QKEY };

	if (!qp)
		die("create UD QP");
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	at.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE))
		die("UD RTR");
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = 1;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD RTS");
	return qp;
}

static uint8_t buf[(MAXQ + 1) * SLOT];

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, unsigned slot)
{
	struct ibv_sge sg = { (uintptr_t)(buf + (size_t)slot * SLOT), SLOT, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sg, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("post_recv");
}

/* One datagram from @qp, waited for on its send CQ @cq. */
static void send_ud(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr, struct ibv_ah *ah,
		    uint32_t qpn, uint32_t qkey)
{
	struct ibv_sge sg = { (uintptr_t)(buf + (size_t)MAXQ * SLOT), MSG, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x5E, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey } }, *bad;
	struct ibv_wc wc;
	double t0 = now();

	if (ibv_post_send(qp, &wr, &bad))
		die("post_send");
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n == 1 && wc.wr_id == 0x5E && wc.opcode == IBV_WC_SEND) {
			CHECK(wc.status == IBV_WC_SUCCESS, "send status %d", wc.status);
			return;
		}
		if (n == 1)
			die("unexpected completion while sending");
		if (now() - t0 > 10)
			die("no send completion");
	}
}

static struct ibv_ah *ah_to(struct ibv_pd *pd, const union ibv_gid *dgid)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = *dgid, .sgid_index = 0, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(pd, &aa);

	if (!ah)
		die("create_ah");
	return ah;
}

static union ibv_gid v4_gid(uint32_t addr)
{
	union ibv_gid g = { .raw = { [10] = 0xFF, [11] = 0xFF } };
	uint32_t be = htonl(addr);

	memcpy(g.raw + 12, &be, 4);
	return g;
}

/* ATTRS_QPS QPs attach one group and each gets the datagram; then one context attaches
 * exactly max_mcast_grp distinct groups (that one included). */
static void mcast(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *mr, int max_grp)
{
	int nq = getenv("ATTRS_QPS") ? atoi(getenv("ATTRS_QPS")) : 64, got = 0, seen[MAXQ] = { 0 };
	struct ibv_cq *cq = ibv_create_cq(ctx, 2 * MAXQ + 16, NULL, NULL, 0);
	struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *tx, *rx[MAXQ];
	union ibv_gid grp = v4_gid(0xEF010203u);          /* 239.1.2.3 */
	struct ibv_ah *ah;
	double t0;
	int i, err;

	if (!cq || !scq || nq < 1 || nq > MAXQ)
		die("mcast setup");
	tx = ud_qp(pd, scq, scq, 1);
	for (i = 0; i < nq; i++) {
		rx[i] = ud_qp(pd, scq, cq, 1);
		CHECK(!ibv_attach_mcast(rx[i], &grp, 0), "attach QP %d of %d to the group", i + 1, nq);
		post_recv(rx[i], mr, (unsigned)i);
	}
	ah = ah_to(pd, &grp);
	send_ud(tx, scq, mr, ah, 0xFFFFFF, QKEY);
	for (t0 = now(); got < nq && now() - t0 < 10;) {
		struct ibv_wc wc;

		if (ibv_poll_cq(cq, 1, &wc) != 1)
			continue;
		CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id < (uint64_t)nq &&
		      wc.qp_num == rx[wc.wr_id]->qp_num && wc.byte_len == SLOT,
		      "multicast receive: status %d wr_id %llu qpn %#x len %u", wc.status,
		      (unsigned long long)wc.wr_id, wc.qp_num, wc.byte_len);
		if (wc.wr_id < (uint64_t)nq && !seen[wc.wr_id]++)
			got++;
	}
	CHECK(got == nq, "the datagram reached %d of the %d attached QPs", got, nq);
	usleep(100 * 1000);
	{
		struct ibv_wc wc;

		CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "more than one copy per QP");
	}

	/* The group limit of one context: max_grp distinct groups, the one above included. */
	for (i = 1; i < max_grp; i++) {
		union ibv_gid g = v4_gid(0xEF020000u + (uint32_t)i);

		err = ibv_attach_mcast(rx[0], &g, 0);
		CHECK(!err, "attach group %d of max_mcast_grp %d: %s", i + 1, max_grp, strerror(err));
		if (err)
			break;
	}
	{
		union ibv_gid g = v4_gid(0xEF030001u);

		err = ibv_attach_mcast(rx[0], &g, 0);
		CHECK(err != 0, "a group beyond max_mcast_grp %d was attached", max_grp);
		printf("attach beyond max_mcast_grp (%d): %s\n", max_grp, strerror(err));
	}
	for (i = 0; i < nq; i++)
		ibv_destroy_qp(rx[i]);
	ibv_destroy_qp(tx);
	ibv_destroy_ah(ah);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(scq);
}

/* This process's value of counter @name in `uroce stat show` (-1: not listed). */
static long long stat_counter(const char *name)
{
	const char *uroce = getenv("UROCE");
	char cmd[4200], line[8192], key[64];
	long long v = -1;
	FILE *f;

	if (!uroce)
		die("UROCE not set");
	snprintf(cmd, sizeof(cmd), "'%s' stat show", uroce);
	snprintf(key, sizeof(key), " pid %d ", (int)getpid());
	f = popen(cmd, "r");
	if (!f)
		die("popen uroce stat");
	while (fgets(line, sizeof(line), f)) {
		char pat[80], *p;

		if (!strstr(line, key))
			continue;
		snprintf(pat, sizeof(pat), " %s ", name);
		p = strstr(line, pat);
		if (p)
			v = atoll(p + strlen(pat));
	}
	pclose(f);
	return v;
}

/* Datagrams with a wrong Q_Key are dropped and counted in the port's qkey_viol_cntr. */
static void qkey(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mr *mr)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *tx, *rx;
	struct ibv_port_attr pa;
	union ibv_gid me;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	double t0;

	if (!cq || !scq || ibv_query_gid(ctx, 1, 0, &me))
		die("qkey setup");
	tx = ud_qp(pd, scq, scq, 1);
	rx = ud_qp(pd, scq, cq, 1);
	ah = ah_to(pd, &me);
	post_recv(rx, mr, 0);
	for (int i = 0; i < NQKEY; i++)
		send_ud(tx, scq, mr, ah, rx->qp_num, WRONG_QKEY);
	usleep(200 * 1000);
	CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "a datagram with a wrong Q_Key was received");
	/* Published by the progress thread every 200 ms while counts move. */
	for (t0 = now(); now() - t0 < 10; usleep(50 * 1000))
		if (!ibv_query_port(ctx, 1, &pa) && pa.qkey_viol_cntr >= NQKEY)
			break;
	EQ(pa.qkey_viol_cntr, NQKEY);
	EQ(pa.bad_pkey_cntr, 0);
	EQ(stat_counter("drop_qkey"), NQKEY);
	/* The right Q_Key still arrives. */
	send_ud(tx, scq, mr, ah, rx->qp_num, QKEY);
	for (t0 = now(); ibv_poll_cq(cq, 1, &wc) == 0 && now() - t0 < 10;)
		;
	CHECK(wc.opcode == IBV_WC_RECV && wc.status == IBV_WC_SUCCESS && wc.qp_num == rx->qp_num,
	      "the right Q_Key was not received");
	ibv_destroy_qp(tx);
	ibv_destroy_qp(rx);
	ibv_destroy_ah(ah);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(scq);
}

static int all(void)
{
	const char *g = getenv("ATTRS_MCAST_GRP");
	struct ibv_context *ctx = open_dev(NULL);
	struct ibv_device_attr_ex x;
	struct ibv_port_attr pa;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	unsigned flags;

	if (!g || !pd)
		die("ATTRS_MCAST_GRP not set, or no PD");
	memset(&x, 0xA5, sizeof(x));
	CHECK(!ibv_query_device_ex(ctx, NULL, &x), "ibv_query_device_ex");
	pin_device(ctx, &x, atoi(g));
	memset(&pa, 0xA5, sizeof(pa));
	CHECK(!ibv_query_port(ctx, 1, &pa), "ibv_query_port");
	pin_port(&pa);

	limits(ctx, pd, &x.orig_attr);
	/* UD_AV_PORT_ENFORCE: nothing names a port but 1. */
	{
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 2, .grh = { .dgid = v4_gid(0x7F000001u) } };

		cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		errno = 0;
		CHECK(!ibv_create_ah(pd, &aa), "an AH on port 2 was created");
		CHECK(cq && !ud_qp(pd, cq, cq, 2), "a UD QP went to INIT on port 2");
		ibv_destroy_cq(cq);
	}

	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("reg_mr");
	mcast(ctx, pd, mr, atoi(g));
	qkey(ctx, pd, mr);

	/* BAD_PKEY_CNTR is claimed exactly when the transport counts P_Key drops. */
	flags = FLAGS_BASE | (stat_counter("drop_bad_pkey") >= 0 ? IBV_DEVICE_BAD_PKEY_CNTR : 0);
	CHECK(x.orig_attr.device_cap_flags == flags, "device_cap_flags %#x, want %#x",
	      x.orig_attr.device_cap_flags, flags);
	printf("device_cap_flags 0x%08x\n", x.orig_attr.device_cap_flags);

	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return check_summary();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "all"))
		return all();
	if (argc == 5 && !strcmp(argv[1], "rate")) {
		struct ibv_context *ctx = open_dev(argv[2]);
		struct ibv_port_attr pa;

		CHECK(!ibv_query_port(ctx, 1, &pa), "ibv_query_port");
		EQ(pa.active_width, atoi(argv[3]));
		EQ(pa.active_speed, atoi(argv[4]));
		ibv_close_device(ctx);
		return check_summary();
	}
	fprintf(stderr, "usage: attrs all | attrs rate DEV WIDTH SPEED\n");
	return 2;
}
