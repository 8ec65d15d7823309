/* ud_mcast.c — UD multicast through plain verbs (run by ud_mcast.sh under `uroce run`).
 *
 *   ud_mcast recv GROUP N [detach]  attach a UD QP to ::ffff:GROUP, print READY, receive N
 *                                   datagrams; then either receive N more (exit 0), or
 *                                   (detach) detach, print DETACHED and, until the file
 *                                   $UD_MCAST_STOP exists, count anything that still arrives:
 *                                   exit 1 if something did.
 *   ud_mcast send GROUP N           send N datagrams to the group (QPN 0xFFFFFF).
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

int main(int argc, char **argv)
{
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	union ibv_gid mgid = { 0 };
	static uint8_t buf[64 * (MSG + 40)];
	int n, got = 0;
	bool send;

	if (argc < 4)
		die("usage: ud_mcast recv|send GROUP N [detach]");
	send = !strcmp(argv[1], "send");
	n = atoi(argv[3]);
	mgid.raw[10] = mgid.raw[11] = 0xFF;
	if (inet_pton(AF_INET, argv[2], &mgid.raw[12]) != 1)
		die("bad group");
	/* $UD_MCAST_DEV names the device (the veth topology has uroce0 on lo and uroce1). */
	const char *dn = getenv("UD_MCAST_DEV");
	int di = 0;

	devs = ibv_get_device_list(NULL);
	while (devs && devs[di] && dn && strcmp(ibv_get_device_name(devs[di]), dn))
		di++;
	if (!devs || !devs[di] || !(ctx = ibv_open_device(devs[di])))
		die("no device");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!pd || !cq || !mr || !(qp = ibv_create_qp(pd, &ia)))
		die("objects");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("init");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("rtr");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("rts");

	if (send) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .dgid = mgid, .sgid_index = 0, .hop_limit = 1 } };
		struct ibv_ah *ah = ibv_create_ah(pd, &aa);

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
			if (ibv_post_send(qp, &wr, &bad))
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

	if (ibv_attach_mcast(qp, &mgid, 0))
		die("attach_mcast");
	for (int i = 0; i < 64; i++) {
		struct ibv_sge sg = { (uintptr_t)(buf + i * (MSG + 40)), MSG + 40, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			die("post_recv");
	}
	printf("READY 0x%06x\n", qp->qp_num);
	fflush(stdout);
	bool detach = argc > 4 && !strcmp(argv[4], "detach");
	int want = detach ? n : 2 * n;
	double t0 = now();
	const char *stop = getenv("UD_MCAST_STOP");

	for (;;) {
		struct ibv_wc wc;

		if (ibv_poll_cq(cq, 1, &wc) == 1) {
			struct ibv_sge sg = { (uintptr_t)(buf + wc.wr_id * (MSG + 40)), MSG + 40, mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = wc.wr_id, .sg_list = &sg, .num_sge = 1 }, *bad;

			if (wc.status != IBV_WC_SUCCESS || wc.byte_len != MSG + 40 || !(wc.wc_flags & IBV_WC_GRH))
				die("bad receive completion");
			got++;
			ibv_post_recv(qp, &wr, &bad);
			if (got == want && !detach)
				break;
			if (got == n && detach) {
				if (ibv_detach_mcast(qp, &mgid, 0))
					die("detach_mcast");
				printf("DETACHED\n");
				fflush(stdout);
				t0 = now();
			}
			if (got > n && detach)
				die("received after detach");
			continue;
		}
		if (detach && got >= n && stop && access(stop, F_OK) == 0)
			break;
		if (now() - t0 > 30) {
			fprintf(stderr, "ud_mcast: timeout with %d of %d\n", got, want);
			return 1;
		}
	}
	printf("GOT %d\n", got);
	ibv_destroy_qp(qp);
	return 0;
}
