/* ud_ah — the program of docs/tutorial/04-ud.md.
 *
 * Unreliable Datagram: a UD QP is not connected to anyone; each send names its destination
 * with an address handle (AH: the peer's GID, which of our GIDs to send from, hop limit),
 * the peer's QP number and its Q_Key.  One process, two UD QPs, "A" and "B":
 *   - the device's GID table;
 *   - A sends to B through an AH; B's receive buffer starts with the 40-byte GRH area,
 *     which for RoCEv2 over IPv4 holds the packet's IPv4 header in its last 20 bytes;
 *   - B answers A through an AH made from the completion (ibv_create_ah_from_wc);
 *   - a send with the wrong Q_Key, one bigger than the MTU, one into a receive buffer
 *     that has no room for the GRH: what each does.
 *
 *   ud_ah [-d DEVICE]
 *
 * Lines starting with UNEXPECTED mean uroce did not do what the chapter says (exit 1).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "ud_ah: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)
#define QKEY 0x11111111u
#define GRH 40

static struct ibv_cq *scq, *rcq;     /* send completions, receive completions */
static struct ibv_mr *mr;
static char *buf;
static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("UNEXPECTED: %s\n", what);
		failures++;
	}
}

/* The next completion of @cq within @ms milliseconds; 0 if none came. */
static int next_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return 0;
	}
	if (n < 0)
		DIE("ibv_poll_cq failed");
	return 1;
}

static struct ibv_qp *make_ud_qp(struct ibv_pd *pd)
{
	struct ibv_qp_init_attr qia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (!qp)
		DIE("ibv_create_qp: %s", strerror(errno));
	/* UD: INIT takes the Q_Key, RTR nothing, RTS only the send PSN. */
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		DIE("modify to INIT: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		DIE("modify to RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		DIE("modify to RTS: %s", strerror(errno));
	return qp;
}

/* A receive of @len bytes at @off in the buffer. */
static void post_recv(struct ibv_qp *qp, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + off, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = off, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

/* Send @len bytes from offset 0 to (@ah, @qpn, @qkey); returns the send's completion. */
static struct ibv_wc send_to(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
			     uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	if (ibv_post_send(qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
	if (!next_wc(scq, &wc, 5000))
		DIE("no send completion");
	return wc;
}

int main(int argc, char **argv)
{
	const char *devname = argc > 2 && !strcmp(argv[1], "-d") ? argv[2] : NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_device **devs;
	struct ibv_port_attr port;
	struct ibv_wc wc;
	char text[INET6_ADDRSTRLEN];
	int n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	devs = ibv_get_device_list(&n);
	for (int i = 0; devs && i < n && !ctx; i++)
		if (!devname || !strcmp(ibv_get_device_name(devs[i]), devname))
			ctx = ibv_open_device(devs[i]);
	if (!ctx)
		DIE("no device");
	if (ibv_query_port(ctx, 1, &port))
		DIE("ibv_query_port: %s", strerror(errno));
	int mtu = 128 << port.active_mtu;
	printf("device %s port 1: active MTU %d, %d GID table entries\n",
	       ibv_get_device_name(ctx->device), mtu, port.gid_tbl_len);

	/* 1. The GID table: one entry per address of the netdev, RoCE v2. */
	int have = 0;
	for (int i = 0; i < port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;      /* an empty slot */
		inet_ntop(AF_INET6, e.gid.raw, text, sizeof(text));
		printf("  GID index %d: %s, %s, netdev ifindex %u\n", i, text,
		       e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "other", e.ndev_ifindex);
		have++;
	}
	check(have > 0, "no GID at all");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		DIE("ibv_query_gid: %s", strerror(errno));

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	scq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	rcq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	buf = calloc(1, 65536);
	mr = pd && buf ? ibv_reg_mr(pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!scq || !rcq || !mr)
		DIE("setup: %s", strerror(errno));
	struct ibv_qp *qa = make_ud_qp(pd), *qb = make_ud_qp(pd);
	printf("UD QP A 0x%06x, UD QP B 0x%06x, both with Q_Key 0x%x\n", qa->qp_num, qb->qp_num,
	       QKEY);

	/* 2. The address handle: the destination's GID, our GID index, a hop limit. */
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } };
	struct ibv_ah *to_b = ibv_create_ah(pd, &aa);
	if (!to_b)
		DIE("ibv_create_ah: %s", strerror(errno));
	inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
	printf("AH to %s (GID index 0 as source, hop limit 64)\n", text);

	/* 3. A -> B, 100 bytes.  B's buffer needs 40 + 100 bytes. */
	post_recv(qb, 4096, GRH + 100);
	strcpy(buf, "a datagram from A");
	wc = send_to(qa, to_b, qb->qp_num, QKEY, 100);
	printf("A: send completed: %s\n", ibv_wc_status_str(wc.status));
	check(wc.status == IBV_WC_SUCCESS, "the send failed");
	if (!next_wc(rcq, &wc, 5000))
		DIE("B received nothing");
	printf("B: received %u bytes (40 of GRH + 100), from QP 0x%06x, %s: \"%s\"\n", wc.byte_len,
	       wc.src_qp, wc.wc_flags & IBV_WC_GRH ? "GRH present" : "no GRH", buf + 4096 + GRH);
	check(wc.status == IBV_WC_SUCCESS && wc.byte_len == GRH + 100 && wc.src_qp == qa->qp_num &&
	      (wc.wc_flags & IBV_WC_GRH), "B's completion");
	/* RoCEv2 over IPv4: bytes 20..39 of the GRH area are the IPv4 header. */
	const uint8_t *ip = (const uint8_t *)buf + 4096 + 20;
	char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, ip + 12, src, sizeof(src));
	inet_ntop(AF_INET, ip + 16, dst, sizeof(dst));
	printf("B: GRH area bytes 0-19 all zero: %s; bytes 20-39: IPv4 header, version %d, "
	       "protocol %d (UDP), %s -> %s, TTL %d\n",
	       memcmp(buf + 4096, (char[20]){ 0 }, 20) ? "no" : "yes", ip[0] >> 4, ip[9], src, dst,
	       ip[8]);
	check(ip[0] >> 4 == 4 && ip[9] == 17, "the GRH area holds no IPv4 header");

	/* 4. Answer the sender: an AH built from the completion and the GRH. */
	struct ibv_ah *to_a = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)(buf + 4096), 1);
	if (!to_a)
		DIE("ibv_create_ah_from_wc: %s", strerror(errno));
	post_recv(qa, 8192, GRH + 64);
	strcpy(buf, "B's answer");
	wc = send_to(qb, to_a, wc.src_qp, QKEY, 16);
	check(wc.status == IBV_WC_SUCCESS, "B's send failed");
	if (!next_wc(rcq, &wc, 5000))
		DIE("A received nothing");
	printf("A: received %u bytes from QP 0x%06x through the AH made from B's completion: "
	       "\"%s\"\n", wc.byte_len, wc.src_qp, buf + 8192 + GRH);
	check(wc.status == IBV_WC_SUCCESS && wc.src_qp == qb->qp_num, "A's completion");

	/* 5. The wrong Q_Key: the sender cannot tell; the receiver drops it silently. */
	post_recv(qb, 12288, GRH + 100);
	wc = send_to(qa, to_b, qb->qp_num, QKEY + 1, 100);
	printf("A: send with Q_Key 0x%x completed: %s\n", QKEY + 1, ibv_wc_status_str(wc.status));
	int got = next_wc(rcq, &wc, 500);
	printf("B: %s within 500 ms\n", got ? "received it" : "nothing received");
	check(!got, "a datagram with the wrong Q_Key was received");

	/* 6. Bigger than the path MTU: UD messages are one packet; nothing is sent. */
	wc = send_to(qa, to_b, qb->qp_num, QKEY, (uint32_t)mtu + 1);
	printf("A: send of %d bytes (MTU + 1) completed: %s\n", mtu + 1, ibv_wc_status_str(wc.status));
	got = next_wc(rcq, &wc, 500);
	printf("B: %s within 500 ms\n", got ? "received it" : "nothing received");
	check(!got, "a datagram longer than the MTU was received");

	/* 7. A receive buffer of exactly the payload's size: no room for the GRH. */
	wc = send_to(qa, to_b, qb->qp_num, QKEY, 100);   /* takes the receive posted in 5 */
	if (!next_wc(rcq, &wc, 5000))
		DIE("B received nothing");
	post_recv(qb, 16384, 100);
	wc = send_to(qa, to_b, qb->qp_num, QKEY, 100);
	got = next_wc(rcq, &wc, 5000);
	printf("B: 100 bytes into a 100-byte receive buffer: %s\n",
	       got ? ibv_wc_status_str(wc.status) : "nothing");
	check(got && wc.status == IBV_WC_LOC_LEN_ERR, "no local length error");

	if (ibv_destroy_ah(to_a) || ibv_destroy_ah(to_b) || ibv_destroy_qp(qa) ||
	    ibv_destroy_qp(qb) || ibv_dereg_mr(mr) || ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	free(buf);
	printf(failures ? "%d check(s) failed\n" : "every step went as expected\n", failures);
	return failures != 0;
}
