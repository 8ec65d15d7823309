/* qp_scale — many RC QPs between two processes (issue #16 section 3): the time to create
 * them, to connect them (INIT, then RTR and RTS with the peer's QPN from a TCP exchange),
 * to prove each one carries traffic (one signalled 8-byte RDMA WRITE per QP, from the
 * client into the server's MR), and to destroy them, and the memory they take (the
 * process's RSS after connecting minus before creating, over the number of QPs).
 *
 *   qp_scale -s [-p PORT] -n N [-d DEV] [-g GIDX]         server
 *   qp_scale -c HOST [-p PORT] -n N [-d DEV] [-g GIDX]    client
 *
 * Each side prints one line:
 *   qp_scale side=S n=N create_ms=... connect_ms=... traffic_ms=... destroy_ms=...
 *            rss_kib=... rss_per_qp_b=...
 * create_ms: ibv_create_qp x N plus the modify to INIT; connect_ms: the modifies to RTR and
 * RTS (the TCP exchange of QPNs, one message each way, is outside it); traffic_ms (client):
 * N WRITEs posted and their N completions polled; destroy_ms: ibv_destroy_qp x N.
 * Exit 0 only when every QP's WRITE completed with IBV_WC_SUCCESS and landed (the server
 * checks every 8-byte slot).  Not a test: a benchmark (bench/README.md "Many QPs").
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct hello {                       /* what each side sends first */
	uint32_t n;
	uint32_t rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int xfer(int fd, void *buf, size_t len, int out)
{
	char *p = buf;

	while (len) {
		ssize_t k = out ? write(fd, p, len) : read(fd, p, len);

		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

static int tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai, *a;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	for (int tries = 0; tries < 200 && fd < 0; tries++) {
		for (a = ai; a; a = a->ai_next) {
			fd = socket(a->ai_family, a->ai_socktype, 0);
			if (fd >= 0 && !connect(fd, a->ai_addr, a->ai_addrlen))
				break;
			if (fd >= 0)
				close(fd);
			fd = -1;
		}
		if (fd < 0)
			usleep(50000);
	}
	freeaddrinfo(ai);
	return fd;
}

static int tcp_accept(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), fd;

	if (ls < 0)
		return -1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1)) {
		close(ls);
		return -1;
	}
	fd = accept(ls, NULL, NULL);
	close(ls);
	return fd;
}

static void usage(void)
{
	fprintf(stderr, "usage: qp_scale -s|-c HOST [-p PORT] -n N [-d DEV] [-g GIDX]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = "18600", *devname = NULL;
	int server = 0, gidx = 0, opt, n = 1000, fd, ndev, ret = 1;
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp **qps;
	struct ibv_device_attr da;
	uint32_t *mine, *theirs;
	uint64_t *buf;
	struct hello me = { 0 }, peer;
	union ibv_gid gid;
	double t0, t_create, t_connect, t_traffic = 0, t_destroy;
	long rss0, rss1;
	int cqe;

	while ((opt = getopt(argc, argv, "sc:p:n:d:g:")) != -1) {
		switch (opt) {
		case 's': server = 1; break;
		case 'c': host = optarg; break;
		case 'p': port = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		default: usage();
		}
	}
	if (server == !!host || n < 1)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = server ? tcp_accept(port) : tcp_connect(host, port);
	if (fd < 0) {
		perror("qp_scale: tcp");
		return 1;
	}
	list = ibv_get_device_list(&ndev);
	for (int i = 0; list && i < ndev; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname))
			dev = dev ? dev : list[i];
	if (!dev) {
		fprintf(stderr, "qp_scale: no device\n");
		return 1;
	}
	ctx = ibv_open_device(dev);
	if (!ctx || ibv_query_device(ctx, &da) || ibv_query_gid(ctx, 1, gidx, &gid)) {
		fprintf(stderr, "qp_scale: open/query failed\n");
		return 1;
	}
	qps = calloc((size_t)n, sizeof(*qps));
	mine = calloc((size_t)n, sizeof(*mine));
	theirs = calloc((size_t)n, sizeof(*theirs));
	buf = calloc((size_t)n, sizeof(*buf));
	if (!qps || !mine || !theirs || !buf)
		return 1;
	for (int i = 0; i < n; i++)
		buf[i] = server ? 0 : 0x5CA1E00000000000ull | (uint64_t)i;
	pd = ibv_alloc_pd(ctx);
	mr = pd ? ibv_reg_mr(pd, buf, (size_t)n * sizeof(*buf),
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
	cqe = n + 16 < da.max_cqe ? n + 16 : da.max_cqe;
	cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	if (!mr || !cq) {
		fprintf(stderr, "qp_scale: pd/mr/cq (%d CQEs, max_cqe %d) failed\n", cqe, da.max_cqe);
		return 1;
	}

	rss0 = rss_kib();
	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		};
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i]) {
			fprintf(stderr, "qp_scale: ibv_create_qp #%d failed (max_qp %d)\n", i, da.max_qp);
			return 1;
		}
		if (ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS)) {
			fprintf(stderr, "qp_scale: INIT #%d failed\n", i);
			return 1;
		}
		mine[i] = qps[i]->qp_num;
	}
	t_create = now_ms() - t0;

	me.n = (uint32_t)n;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	memcpy(me.gid, gid.raw, 16);
	if (xfer(fd, &me, sizeof(me), 1) || xfer(fd, &peer, sizeof(peer), 0) || peer.n != (uint32_t)n ||
	    xfer(fd, mine, (size_t)n * 4, 1) || xfer(fd, theirs, (size_t)n * 4, 0)) {
		fprintf(stderr, "qp_scale: exchange failed (peer n %u)\n", peer.n);
		return 1;
	}

	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = theirs[i],
			.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .sgid_index = (uint8_t)gidx, .hop_limit = 64 } },
		};

		memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
		if (ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER)) {
			fprintf(stderr, "qp_scale: RTR #%d failed\n", i);
			return 1;
		}
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = 0;
		a.max_rd_atomic = 1;
		if (ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
			fprintf(stderr, "qp_scale: RTS #%d failed\n", i);
			return 1;
		}
	}
	t_connect = now_ms() - t0;
	rss1 = rss_kib();
	{
		char go = 'g';

		/* both sides connected before the first WRITE */
		if (xfer(fd, &go, 1, 1) || xfer(fd, &go, 1, 0))
			return 1;
	}

	if (!server) {
		int done = 0, bad = 0;

		t0 = now_ms();
		for (int i = 0; i < n; i++) {
			struct ibv_sge sge = { .addr = (uintptr_t)&buf[i], .length = 8, .lkey = mr->lkey };
			struct ibv_send_wr wr = {
				.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = { .remote_addr = peer.addr + (uint64_t)i * 8, .rkey = peer.rkey },
			}, *badwr;

			if (ibv_post_send(qps[i], &wr, &badwr)) {
				fprintf(stderr, "qp_scale: post #%d failed\n", i);
				return 1;
			}
		}
		while (done < n) {
			struct ibv_wc wc[64];
			int k = ibv_poll_cq(cq, 64, wc);

			if (k < 0)
				return 1;
			for (int j = 0; j < k; j++)
				bad += wc[j].status != IBV_WC_SUCCESS;
			done += k;
			if (now_ms() - t0 > 120000) {
				fprintf(stderr, "qp_scale: %d of %d WRITEs completed in 120 s\n", done, n);
				return 1;
			}
		}
		t_traffic = now_ms() - t0;
		if (bad) {
			fprintf(stderr, "qp_scale: %d WRITEs failed\n", bad);
			return 1;
		}
	}
	{
		char go = 'd';
		int wrong = 0;

		if (xfer(fd, &go, 1, 1) || xfer(fd, &go, 1, 0))
			return 1;
		if (server)
			for (int i = 0; i < n; i++)
				wrong += buf[i] != (0x5CA1E00000000000ull | (uint64_t)i);
		if (wrong) {
			fprintf(stderr, "qp_scale: %d of %d slots not written\n", wrong, n);
			return 1;
		}
	}

	t0 = now_ms();
	for (int i = 0; i < n; i++)
		if (ibv_destroy_qp(qps[i])) {
			fprintf(stderr, "qp_scale: destroy #%d failed\n", i);
			return 1;
		}
	t_destroy = now_ms() - t0;
	printf("qp_scale side=%s n=%d create_ms=%.1f connect_ms=%.1f traffic_ms=%.1f destroy_ms=%.1f "
	       "rss_kib=%ld rss_per_qp_b=%.0f\n", server ? "server" : "client", n, t_create, t_connect,
	       t_traffic, t_destroy, rss1 - rss0, (rss1 - rss0) * 1024.0 / n);
	ret = 0;
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(qps);
	free(mine);
	free(theirs);
	free(buf);
	close(fd);
	return ret;
}
