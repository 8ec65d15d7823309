/* poll_empty — what an empty ibv_poll_cq costs a busy poller over uroce's UDP path, against
 * what it cannot avoid: one recvmmsg that finds nothing (bench/README.md).
 *
 *   uroce run bench/poll_empty [ITERS]      (UROCE_LINK=udp; pin it: taskset -c 1)
 *
 * Opens the first device, makes a CQ and an RC QP (so that the context's engine polls its
 * socket), then times ITERS (default 300,000) calls of ibv_poll_cq on the empty CQ, and as
 * many recvmmsg(MSG_DONTWAIT) on a bound UDP socket of its own in the same process (which
 * has uroce's progress thread, so the kernel takes the same file references), alternated,
 * three rounds each.  The difference is uroce's own share of each empty poll, which a
 * packet that arrives meanwhile waits through half of on average.  Output, ns per call:
 *   poll_empty round=R poll_cq=.. recvmmsg=.. extra=..
 * Exit 0 when both loops ran.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 300000;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };
	char buf[2048];
	struct iovec iov = { buf, sizeof(buf) };
	struct mmsghdr m = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
	int n, fd;

	list = ibv_get_device_list(&n);
	if (!list || n < 1 || !(ctx = ibv_open_device(list[0]))) {
		fprintf(stderr, "poll_empty: no RDMA device\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!cq) {
		fprintf(stderr, "poll_empty: no CQ\n");
		return 1;
	}
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp = ibv_create_qp(pd, &ia);
	}
	fd = socket(AF_INET6, SOCK_DGRAM, 0);
	if (!qp || fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "poll_empty: no QP or socket\n");
		return 1;
	}
	for (int r = 1; r <= 3; r++) {
		double t0 = now_ns(), t1, t2;

		for (long i = 0; i < iters; i++)
			if (ibv_poll_cq(cq, 1, &wc) != 0) {
				fprintf(stderr, "poll_empty: the CQ was not empty\n");
				return 1;
			}
		t1 = now_ns();
		for (long i = 0; i < iters; i++)
			syscall(SYS_recvmmsg, fd, &m, 1, MSG_DONTWAIT, NULL);
		t2 = now_ns();
		printf("poll_empty round=%d poll_cq=%.0f recvmmsg=%.0f extra=%.0f\n", r,
		       (t1 - t0) / iters, (t2 - t1) / iters, ((t1 - t0) - (t2 - t1)) / iters);
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	close(fd);
	return 0;
}
