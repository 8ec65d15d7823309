/* cm_hello — the program of docs/tutorial/09-connection-setup.md.
 *
 * Chapter 1's connection, made by the RDMA connection manager (librdmacm) instead of by hand
 * over a TCP socket: the server listens on an IP address and port, the client resolves the
 * server's address to a device, GID and path, connects; the connection manager exchanges
 * the QP numbers and PSNs (CM REQ, REP, RTU on QP1) and moves both QPs to RTS.  Then the
 * client SENDs one message and disconnects.
 *
 *   cm_hello [-p PORT]              server: waits for one client
 *   cm_hello [-p PORT] SERVER_ADDR  client
 *
 * Every event is printed as it arrives; any failure prints what failed and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG "hello through rdma_cm"

static const char *role = "?";
#define DIE(...) do { fprintf(stderr, "%s: ", role); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)

static struct rdma_event_channel *ch;

/* The next event, which must be @want; returns its id (for CONNECT_REQUEST, the new one). */
static struct rdma_cm_id *expect_event(enum rdma_cm_event_type want, const char **pdata)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_get_cm_event(ch, &ev))
		DIE("rdma_get_cm_event: %s", strerror(errno));
	printf("%s: event %s\n", role, rdma_event_str(ev->event));
	if (ev->event != want)
		DIE("expected %s (status %d)", rdma_event_str(want), ev->status);
	if (pdata && ev->param.conn.private_data_len) {
		static char copy[64];

		snprintf(copy, sizeof(copy), "%s", (const char *)ev->param.conn.private_data);
		*pdata = copy;
	}
	id = ev->id;
	rdma_ack_cm_event(ev);
	return id;
}

static const char *state_name(struct ibv_qp *qp)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) || a.qp_state > IBV_QPS_ERR)
		return "?";
	return n[a.qp_state];
}

/* PD, CQ, MR and an RC QP on @id's device (the one the CM resolved the address to). */
static void make_qp(struct rdma_cm_id *id, struct ibv_cq **cq, struct ibv_mr **mr, char *buf)
{
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	*cq = pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	*mr = *cq ? ibv_reg_mr(pd, buf, 256, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!*mr)
		DIE("PD, CQ or MR: %s", strerror(errno));
	qia.send_cq = qia.recv_cq = *cq;
	if (rdma_create_qp(id, pd, &qia))   /* the QP is created in RESET, moved to INIT */
		DIE("rdma_create_qp: %s", strerror(errno));
	printf("%s: device %s, QP 0x%06x in %s\n", role, ibv_get_device_name(id->verbs->device),
	       id->qp->qp_num, state_name(id->qp));
}

static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		DIE("completion: %s", n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
	return wc;
}

int main(int argc, char **argv)
{
	const char *port = "18700", *server_addr = NULL, *pdata = NULL;
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[256] = "";
	int opt;

	while ((opt = getopt(argc, argv, "p:")) != -1) {
		if (opt != 'p') {
			fprintf(stderr, "usage: %s [-p PORT] [SERVER_ADDR]\n", argv[0]);
			return 2;
		}
		port = optarg;
	}
	if (optind < argc)
		server_addr = argv[optind];
	role = server_addr ? "client" : "server";
	setvbuf(stdout, NULL, _IOLBF, 0);
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		DIE("rdma_create_id: %s", strerror(errno));

	if (!server_addr) {
		struct addrinfo hints = { .ai_family = AF_INET, .ai_flags = AI_PASSIVE }, *res;

		if (getaddrinfo(NULL, port, &hints, &res) || rdma_bind_addr(id, res->ai_addr) ||
		    rdma_listen(id, 1))
			DIE("bind/listen on port %s: %s", port, strerror(errno));
		freeaddrinfo(res);
		printf("server: listening on port %s\n", port);
		/* A connection request comes with a new id of its own. */
		struct rdma_cm_id *conn = expect_event(RDMA_CM_EVENT_CONNECT_REQUEST, &pdata);
		printf("server: the request's private data: \"%s\"\n", pdata ? pdata : "");
		make_qp(conn, &cq, &mr, buf);
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(conn->qp, &rwr, &bad))
			DIE("ibv_post_recv: %s", strerror(errno));
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .rnr_retry_count = 7 };
		if (rdma_accept(conn, &cp))
			DIE("rdma_accept: %s", strerror(errno));
		expect_event(RDMA_CM_EVENT_ESTABLISHED, NULL);
		printf("server: QP 0x%06x is in %s\n", conn->qp->qp_num, state_name(conn->qp));
		struct ibv_wc wc = wait_wc(cq);
		printf("server: received a SEND of %u bytes: \"%s\"\n", wc.byte_len, buf);
		expect_event(RDMA_CM_EVENT_DISCONNECTED, NULL);
		rdma_destroy_qp(conn);
		if (rdma_destroy_id(conn))
			DIE("rdma_destroy_id: %s", strerror(errno));
	} else {
		struct addrinfo hints = { .ai_family = AF_INET }, *res;

		if (getaddrinfo(server_addr, port, &hints, &res))
			DIE("cannot resolve %s", server_addr);
		/* The IP address -> a device, port and GID (the route to it decides which). */
		if (rdma_resolve_addr(id, NULL, res->ai_addr, 2000))
			DIE("rdma_resolve_addr: %s", strerror(errno));
		freeaddrinfo(res);
		expect_event(RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
		if (rdma_resolve_route(id, 2000))
			DIE("rdma_resolve_route: %s", strerror(errno));
		expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
		make_qp(id, &cq, &mr, buf);
		struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
					      .retry_count = 7, .rnr_retry_count = 7,
					      .private_data = "hi from the client",
					      .private_data_len = sizeof("hi from the client") };
		if (rdma_connect(id, &cp))
			DIE("rdma_connect: %s", strerror(errno));
		expect_event(RDMA_CM_EVENT_ESTABLISHED, NULL);
		printf("client: QP 0x%06x is in %s\n", id->qp->qp_num, state_name(id->qp));
		strcpy(buf, MSG);
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(MSG), .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
		if (ibv_post_send(id->qp, &wr, &bad))
			DIE("ibv_post_send: %s", strerror(errno));
		wait_wc(cq);
		printf("client: SEND completed\n");
		if (rdma_disconnect(id))
			DIE("rdma_disconnect: %s", strerror(errno));
		expect_event(RDMA_CM_EVENT_DISCONNECTED, NULL);
		rdma_destroy_qp(id);
	}
	struct ibv_pd *pd = mr->pd;
	if (ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		DIE("teardown: %s", strerror(errno));
	if (rdma_destroy_id(id))
		DIE("rdma_destroy_id: %s", strerror(errno));
	rdma_destroy_event_channel(ch);
	printf("%s: done\n", role);
	return 0;
}
