/* hello_rdma — the program of docs/tutorial/01-end-to-end.md.
 *
 * Two processes, one RC queue pair each, connected by the details they swap over a TCP
 * socket.  The client sends one message (SEND, which the server receives into a buffer it
 * posted) and then writes a second one straight into the server's memory (RDMA WRITE,
 * which the server's CPU never sees arrive).
 *
 *   hello_rdma [-p PORT] [-d DEVICE] [-g GID_INDEX]              server: waits for a client
 *   hello_rdma [-p PORT] [-d DEVICE] [-g GID_INDEX] SERVER_ADDR  client
 *
 * Plain libibverbs: it builds and runs the same against rdma-core on real hardware or on
 * Linux Soft-RoCE.  Every failure prints what failed and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 4096
#define WRITE_OFF 1024                 /* where the client's WRITE lands in the server's buffer */
#define SEND_MSG "hello over RDMA SEND"
#define WRITE_MSG "written by RDMA WRITE"

static const char *role = "?";
#define DIE(...) do { fprintf(stderr, "%s: ", role); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)

/* What each side tells the other over TCP: enough to address its QP and its memory. */
struct qp_info {
	uint32_t qpn;          /* queue pair number */
	uint32_t psn;          /* first packet sequence number it will send */
	uint32_t rkey;         /* remote key of its buffer */
	uint64_t addr;         /* virtual address of its buffer */
	union ibv_gid gid;     /* its address: an IPv4 address as ::ffff:a.b.c.d */
};

static void xfer(int fd, void *p, size_t n, int out)
{
	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0)
			DIE("tcp %s: %s", out ? "write" : "read", r ? strerror(errno) : "peer closed");
		p = (char *)p + r;
		n -= (size_t)r;
	}
}

static int tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	int fd;

	if (getaddrinfo(host, port, &hints, &res))
		DIE("cannot resolve %s", host);
	fd = socket(res->ai_family, res->ai_socktype, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen))
		DIE("connect to %s:%s: %s", host, port, strerror(errno));
	freeaddrinfo(res);
	return fd;
}

static int tcp_accept(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, lfd, fd;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		DIE("listen on port %s: %s", port, strerror(errno));
	printf("server: waiting for a client on TCP port %s\n", port);
	fflush(stdout);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		DIE("accept: %s", strerror(errno));
	close(lfd);
	return fd;
}

/* Wait for one completion on @cq by polling, and check it is what we expect. */
static void wait_completion(struct ibv_cq *cq, enum ibv_wc_opcode op, struct ibv_wc *wc)
{
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		;
	if (n < 0)
		DIE("ibv_poll_cq failed");
	if (wc->status != IBV_WC_SUCCESS)
		DIE("completion with status %s", ibv_wc_status_str(wc->status));
	if (wc->opcode != op)
		DIE("completion of opcode %d, expected %d", wc->opcode, op);
}

int main(int argc, char **argv)
{
	const char *port = "18600", *devname = NULL, *server_addr = NULL;
	int gid_index = 0, opt, ndev, sock;
	struct ibv_device **devs, *dev = NULL;
	struct qp_info me, peer;
	struct ibv_wc wc;

	while ((opt = getopt(argc, argv, "p:d:g:")) != -1) {
		switch (opt) {
		case 'p': port = optarg; break;
		case 'd': devname = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p PORT] [-d DEVICE] [-g GID_INDEX] [SERVER_ADDR]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		server_addr = argv[optind];
	role = server_addr ? "client" : "server";
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* 1. Find a device and open it. */
	devs = ibv_get_device_list(&ndev);
	if (!devs || ndev == 0)
		DIE("no RDMA device");
	for (int i = 0; i < ndev && !dev; i++)
		if (!devname || !strcmp(ibv_get_device_name(devs[i]), devname))
			dev = devs[i];
	if (!dev)
		DIE("no device %s", devname);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		DIE("ibv_open_device: %s", strerror(errno));
	printf("%s: opened device %s\n", role, ibv_get_device_name(dev));

	/* 2. A protection domain, and a buffer registered in it. */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		DIE("ibv_alloc_pd: %s", strerror(errno));
	char *buf = calloc(1, BUF_SIZE);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);
	if (!buf || !mr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	printf("%s: registered %d bytes: lkey 0x%x rkey 0x%x\n", role, BUF_SIZE, mr->lkey, mr->rkey);

	/* 3. A completion queue, and an RC queue pair that reports to it. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		DIE("ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	if (!qp)
		DIE("ibv_create_qp: %s", strerror(errno));
	printf("%s: created RC QP 0x%06x\n", role, qp->qp_num);

	/* 4. RESET -> INIT: the port, the P_Key index, what remote peers may do. */
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		DIE("modify to INIT: %s", strerror(errno));

	/* 5. The server posts a receive buffer before anyone can send to it. */
	if (!server_addr) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = WRITE_OFF, .lkey = mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &rwr, &bad))
			DIE("ibv_post_recv: %s", strerror(errno));
	}

	/* 6. Swap addresses over TCP: QPN, first PSN, GID, and the buffer's address and rkey. */
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	me.psn = server_addr ? 0x100000 : 0x200000;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	if (ibv_query_gid(ctx, 1, gid_index, &me.gid))
		DIE("ibv_query_gid %d: %s", gid_index, strerror(errno));
	sock = server_addr ? tcp_connect(server_addr, port) : tcp_accept(port);
	xfer(sock, &me, sizeof(me), 1);
	xfer(sock, &peer, sizeof(peer), 0);
	char gid[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, peer.gid.raw, gid, sizeof(gid));
	printf("%s: peer QP 0x%06x at GID %s, first PSN 0x%06x\n", role, peer.qpn, gid, peer.psn);

	/* 7. INIT -> RTR: who the peer is (GID, QPN), its first PSN, the path MTU. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer.gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("modify to RTR: %s", strerror(errno));

	/* 8. RTR -> RTS: our own first PSN and the retry rules; now we may send. */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me.psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("modify to RTS: %s", strerror(errno));
	printf("%s: QP is ready to send (RTS)\n", role);
	/* Both sides say so before anything is sent: a packet that reaches a QP still in INIT
	 * is dropped, and the sender would only send it again after its ACK timeout. */
	char ready = 'R';
	xfer(sock, &ready, 1, 1);
	xfer(sock, &ready, 1, 0);

	if (server_addr) {
		/* 9. SEND: the message goes into the receive buffer the server posted. */
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(SEND_MSG),
				       .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

		strcpy(buf, SEND_MSG);
		if (ibv_post_send(qp, &wr, &bad))
			DIE("ibv_post_send SEND: %s", strerror(errno));
		wait_completion(cq, IBV_WC_SEND, &wc);
		printf("client: SEND completed: %s\n", ibv_wc_status_str(wc.status));

		/* 10. RDMA WRITE: straight into the server's buffer, at its address, with its rkey. */
		strcpy(buf + WRITE_OFF, WRITE_MSG);
		sge.addr = (uintptr_t)buf + WRITE_OFF;
		sge.length = sizeof(WRITE_MSG);
		wr.wr_id = 3;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = peer.addr + WRITE_OFF;
		wr.wr.rdma.rkey = peer.rkey;
		if (ibv_post_send(qp, &wr, &bad))
			DIE("ibv_post_send RDMA_WRITE: %s", strerror(errno));
		wait_completion(cq, IBV_WC_RDMA_WRITE, &wc);
		printf("client: RDMA WRITE completed: %s\n", ibv_wc_status_str(wc.status));

		/* 11. Tell the server over TCP that the WRITE is done: it cannot know otherwise. */
		char done = 'D';
		xfer(sock, &done, 1, 1);
		xfer(sock, &done, 1, 0);
	} else {
		wait_completion(cq, IBV_WC_RECV, &wc);
		printf("server: received a SEND of %u bytes: \"%s\"\n", wc.byte_len, buf);
		char done;
		xfer(sock, &done, 1, 0);
		printf("server: the client's RDMA WRITE put \"%s\" in my buffer\n", buf + WRITE_OFF);
		xfer(sock, &done, 1, 1);
	}

	/* 12. Tear down in reverse order. */
	close(sock);
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		DIE("teardown failed");
	ibv_free_device_list(devs);
	free(buf);
	printf("%s: done\n", role);
	return 0;
}
