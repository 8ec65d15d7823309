/* ud_mcast.c — UD multicast through plain verbs (run by ud_mcast.sh under `uroce run`).
 *
 *   ud_mcast recv GROUP N [detach]  attach $UD_MCAST_QPS (1 or 2, default 1) UD QPs to
 *                                   GROUP, print READY, receive N datagrams on each; then
 *                                   either N more on each (exit 0), or (detach) detach every
 *                                   QP, print DETACHED and, until the file $UD_MCAST_STOP
 *                                   exists, count anything that still arrives: exit 1 if
 *                                   something did.  Prints HOPS h: the TTL / hop limit of the
 *                                   first datagram, read from the GRH area of its buffer.
 *   ud_mcast qpns N                 create N UD QPs; exit 1 if one has QPN 0xFFFFFF (the
 *                                   multicast QPN) or 0xFFFFFE is not among them (run with
 *                                   uroced's UROCE_QPN_START_BLOCK=0x3ffff, the last block).
 *   ud_mcast send GROUP N           send N datagrams to the group (QPN 0xFFFFFF), with hop
 *                                   limit $UD_MCAST_HOPS (default 1) and source GID index
 *                                   $UD_MCAST_SGID (default 0).
 * GROUP: an IPv4 group (the GID is ::ffff:GROUP) or an IPv6 one (ff00::/8).
 * $UD_MCAST_DEV: the device to use (default: the first).
 * Every wait is bounded (30 s); exit 1 on a timeout or a wrong completion.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x11111111u
#define MSG 64
#define SLOTS 64                        /* receive WQEs per QP */
#define MAXQ 2

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static _Noreturn void die(const char *m)
{
	fprintf(stderr, "ud_mcast: %s\n", m);
	exit(1);
}

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

static uint8_t buf[MAXQ * SLOTS * (MSG + 40)];

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint64_t slot)
{
	struct ibv_sge sg = { (uintptr_t)(buf + slot * (MSG + 40)), MSG + 40, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sg, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("post_recv");
}

static struct ibv_qp *ud_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 64, .max_recv_wr = SLOTS,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (!qp)
		die("create_qp");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("init");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("rtr");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("rts");
	return qp;
}

/* QPNs come from uroced's blocks of 64; the last block ends with 0xFFFFFF, which is the
 * multicast QPN (IBA 9.6.1.1, 10.5) and must never be a QP's. */
static int qpns(int n)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx = devs && devs[0] ? ibv_open_device(devs[0]) : NULL;
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	bool below = false;

	if (!cq || n < 1)
		die("objects");
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
					       .cap = { .max_send_wr = 1, .max_recv_wr = 1,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);

		if (!qp)
			die("create_qp");
		if (qp->qp_num == 0xFFFFFF)
			die("a QP got the multicast QPN 0xFFFFFF");
		below |= qp->qp_num == 0xFFFFFE;
	}
	if (!below)
		die("no QP got 0xFFFFFE: the allocator did not start at the last block");
	printf("QPNS %d, 0xFFFFFE among them, 0xFFFFFF not\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[MAXQ];
	struct ibv_mr *mr;
	union ibv_gid mgid = { 0 };
	int n, nq = 1, got[MAXQ] = { 0 }, hops = -1;
	bool send, v4;

	if (argc == 3 && !strcmp(argv[1], "qpns"))
		return qpns(atoi(argv[2]));
	if (argc < 4)
		die("usage: ud_mcast recv|send GROUP N [detach] | qpns N");
	send = !strcmp(argv[1], "send");
	n = atoi(argv[3]);
	v4 = inet_pton(AF_INET, argv[2], &mgid.raw[12]) == 1;
	if (v4)
		mgid.raw[10] = mgid.raw[11] = 0xFF;
	else if (inet_pton(AF_INET6, argv[2], mgid.raw) != 1)
		die("bad group");
	if (!send) {
		nq = env_int("UD_MCAST_QPS", 1);
		if (nq < 1 || nq > MAXQ)
			die("UD_MCAST_QPS must be 1 or 2");
	}
	/* $UD_MCAST_DEV names the device (the veth topology has uroce0 on lo and uroce1). */
	const char *dn = getenv("UD_MCAST_DEV");
	int di = 0;

	devs = ibv_get_device_list(NULL);
	while (devs && devs[di] && dn && strcmp(ibv_get_device_name(devs[di]), dn))
		di++;
	if (!devs || !devs[di] || !(ctx = ibv_open_device(devs[di])))
		die("no device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, MAXQ * SLOTS + 64, NULL, NULL, 0);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!pd || !cq || !mr)
		die("objects");
	for (int q = 0; q < nq; q++)
		qp[q] = ud_qp(pd, cq);

	if (send) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .dgid = mgid,
						   .sgid_index = (uint8_t)env_int("UD_MCAST_SGID", 0),
						   .hop_limit = (uint8_t)env_int("UD_MCAST_HOPS", 1) } };
		struct ibv_ah *ah;

		/* An IPv6 group needs an IPv6 source: without $UD_MCAST_SGID, the first
		 * GID that is neither IPv4-mapped nor link-local. */
		for (int i = 0; !v4 && !getenv("UD_MCAST_SGID") && i < 32; i++) {
			union ibv_gid g;

			if (ibv_query_gid(ctx, 1, i, &g) || !g.raw[0] ||
			    (g.raw[0] == 0xFE && (g.raw[1] & 0xC0) == 0x80))
				continue;
			aa.grh.sgid_index = (uint8_t)i;
			break;
		}
		ah = ibv_create_ah(pd, &aa);
		if (!ah)
			die("create_ah");
		for (int i = 0; i < n; i++) {
			struct ibv_sge sg = { (uintptr_t)buf, MSG, mr->lkey };
			struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1,
						  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
						  .wr.ud = { .ah = ah, .remote_qpn = 0xFFFFFF, .remote_qkey = QKEY } }, *bad;
			struct ibv_wc wc;
			double t0 = now();

			memcpy(buf, &i, sizeof(i));
			if (ibv_post_send(qp[0], &wr, &bad))
				die("post_send");
			while (ibv_poll_cq(cq, 1, &wc) == 0)
				if (now() - t0 > 30)
					die("send completion timeout");
			if (wc.status != IBV_WC_SUCCESS)
				die("send status");
		}
		printf("SENT %d\n", n);
		return 0;
	}

	for (int q = 0; q < nq; q++) {
		if (ibv_attach_mcast(qp[q], &mgid, 0))
			die("attach_mcast");
		for (int i = 0; i < SLOTS; i++)
			post_recv(qp[q], mr, (uint64_t)(q * SLOTS + i));
	}
	printf("READY 0x%06x\n", qp[0]->qp_num);
	fflush(stdout);
	bool detach = argc > 4 && !strcmp(argv[4], "detach");
	bool detached = false;
	int want = detach ? n : 2 * n;
	double t0 = now();
	const char *stop = getenv("UD_MCAST_STOP");

	for (;;) {
		struct ibv_wc wc;
		int q, all = 0;

		if (ibv_poll_cq(cq, 1, &wc) == 1) {
			const uint8_t *grh = buf + wc.wr_id * (MSG + 40);

			q = (int)(wc.wr_id / SLOTS);
			if (q >= nq || wc.qp_num != qp[q]->qp_num)
				die("completion on an unexpected QP");
			if (wc.status != IBV_WC_SUCCESS || wc.byte_len != MSG + 40 || !(wc.wc_flags & IBV_WC_GRH))
				die("bad receive completion");
			if (detached)
				die("received after detach");
			/* The GRH area: IPv4 header in bytes 20..39 (TTL at 28), or the IPv6
			 * header (hop limit at 7) — docs/ud-uc.md. */
			if (hops < 0)
				hops = v4 ? grh[20 + 8] : grh[7];
			got[q]++;
			post_recv(qp[q], mr, wc.wr_id);
			for (int k = 0; k < nq; k++)
				all += got[k] >= want;
			if (got[q] > want)
				die("more datagrams than sent");
			if (all == nq && !detach)
				break;
			if (all == nq && detach) {
				for (int k = 0; k < nq; k++)
					if (ibv_detach_mcast(qp[k], &mgid, 0))
						die("detach_mcast");
				detached = true;
				printf("HOPS %d\nDETACHED\n", hops);
				fflush(stdout);
				t0 = now();
			}
			continue;
		}
		if (detached && stop && access(stop, F_OK) == 0)
			break;
		if (now() - t0 > 30) {
			fprintf(stderr, "ud_mcast: timeout with %d (and %d) of %d\n", got[0],
				nq > 1 ? got[1] : 0, want);
			return 1;
		}
	}
	if (!detach)
		printf("HOPS %d\n", hops);
	for (int q = 0; q < nq; q++)
		printf("GOT %d\n", got[q]);
	for (int q = 0; q < nq; q++)
		ibv_destroy_qp(qp[q]);
	return 0;
}
