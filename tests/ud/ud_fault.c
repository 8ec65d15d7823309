/* ud_fault.c — exact loss accounting of UD and UC under UROCE_FAULT, two processes, plain
 * verbs (run by ud_fault.sh under `uroce run`; issue #5).
 *
 *   ud_fault recv ud|uc|ucw PORT N          listen on TCP PORT, receive and check N messages
 *   ud_fault send ud|uc|ucw HOST PORT N LOG send N messages; the sender runs with
 *                                           UROCE_FAULT="drop=P,seed=S,log=LOG"
 *
 * The TCP connection is the out-of-band channel: QPN, PSN and GID both ways, then per batch
 * the list of messages the receiver must get.  The sender learns which packets the fault
 * module dropped from its log (fault.h: one line per disturbed packet, "<index> <len> drop",
 * index counting this context's packets from 0) and maps each index to the message it
 * belongs to by its own send order, checking the logged length against the packet's
 * expected length (a mapping off by one packet fails here).
 *
 *   UD: one datagram per message, 1..1000 bytes; a message is lost iff its packet was.
 *   UC: SEND_WITH_IMM of 1..5000 bytes (every 4th 4096) at path MTU 1024, so up to 5
 *       packets; a message is lost iff any of its packets was; the next FIRST/ONLY
 *       resynchronises (IBA 9.7.5.1).
 *   ucw: as uc, every odd message an RDMA WRITE_WITH_IMM instead (RETH on its first
 *       packet) into a slot of the receiver's region (index mod B), completing a receive
 *       WQE as IBV_WC_RECV_RDMA_WITH_IMM; a WRITE cut off by a loss places some bytes and
 *       completes nothing.
 *
 * Batches of B messages; after each, the sender sends fence messages (imm 0x80000000 | b,
 * 8 bytes, one packet) until one is not dropped, then the expected list.  The receiver takes
 * completions until that fence: they must be exactly the expected messages, in order, each
 * with status SUCCESS, immediate data = its index, byte_len and contents right (UD: the GRH
 * area, IBV_WC_GRH, src_qp = the sender's QPN).  Then it acknowledges, and the sender goes
 * on (so no socket buffer ever overflows: the only losses are the injected ones).
 *
 * Counters: the sender's `uroce stat` fault_drop must equal the dropped packets in the log
 * and its tx_packets the others; the receiver's rx_packets must equal the packets not
 * dropped, with rx_drops 0.  Each is the sum over the two links a context has, UDP and the
 * same-host shared-memory link (fault_drop + shm_fault_drop, ...): on lo the packets take
 * the shm link, across namespaces UDP, and the accounting is exact on both.  $UD_FAULT_UROCE: the uroce CLI; $UD_FAULT_DEV: the device.
 * Every wait is bounded (30 s); exit 1 on any mismatch or timeout, with the reason.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define QKEY 0x11111111u
#define MTU 1024u
#define MAXLEN 5000u
#define GRH 40u
#define SLOT (GRH + MAXLEN)
#define NSLOT 128           /* receive WQEs: more than a batch and its fences */
#define BATCH 16
#define FENCE 0x80000000u
#define WAIT_S 30
#define REGION ((size_t)NSLOT * SLOT)   /* offset of the WRITE region: BATCH slots of MAXLEN */
#define BUFSZ ((REGION + (size_t)BATCH * MAXLEN + 4095) / 4096 * 4096)

static const char *me = "ud_fault";

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: FAIL: ", me);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- messages */

static bool uc, mixw;

/* ucw: odd messages are RDMA WRITE_WITH_IMM. */
static bool is_write(uint32_t i)
{
	return mixw && (i & 1);
}

static uint32_t msg_len(uint32_t i)
{
	if (!uc)
		return 1 + (i * 37u) % 1000u;
	return i % 4 == 0 ? 4096u : 1 + (i * 769u) % MAXLEN;
}

static uint8_t pattern(uint32_t i, uint32_t k)
{
	return (uint8_t)(i * 131u + k * 7u + 1u);
}

static uint32_t npackets(uint32_t len)
{
	return uc ? (len + MTU - 1) / MTU : 1;
}

/* Length on the wire (BTH to ICRC) of packet j of a SEND_WITH_IMM (or, @write, an RDMA
 * WRITE_WITH_IMM) of @len bytes: UD SEND_ONLY_IMM = BTH 12 + DETH 8 + ImmDt 4; UC: BTH 12,
 * + RETH 16 on a WRITE's first packet, + ImmDt 4 on the last; payload padded to 4 bytes;
 * ICRC 4. */
static size_t wire_len(uint32_t len, uint32_t j, bool write)
{
	uint32_t n = npackets(len);
	uint32_t pl = uc ? (j + 1 < n ? MTU : len - j * MTU) : len;
	size_t hdr = uc ? 12 + (write && j == 0 ? 16 : 0) + (j + 1 == n ? 4 : 0) : 24;

	return hdr + pl + (4 - pl % 4) % 4 + 4;
}

/* ---------------------------------------------------------------- out-of-band channel */

static void xfer(int fd, void *buf, size_t len, bool out)
{
	uint8_t *p = buf;
	double t0 = now();

	while (len) {
		struct pollfd pf = { fd, out ? POLLOUT : POLLIN, 0 };
		ssize_t n;

		if (now() - t0 > WAIT_S)
			die("out-of-band %s timed out", out ? "send" : "receive");
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n == 0)
			die("out-of-band peer closed");
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			die("out-of-band: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
}

/* All fields in network order on the wire; addr/rkey: the receiver's WRITE region (ucw). */
struct peer { uint32_t qpn, psn, rkey, pad; uint64_t addr; uint8_t gid[16]; };

/* Each batch: the expected messages of batch @batch (BATCH_END: totals only). */
#define BATCH_END 0xFFFFFFFFu
struct batch_hdr { uint32_t batch, nexp, total_pk, dropped_pk; };

/* ---------------------------------------------------------------- counters */

/* The context's data-path counter @name from `uroce stat show` (this pid's line). */
static long long stat_counter(const char *name)
{
	const char *uroce = getenv("UD_FAULT_UROCE");
	char cmd[512], line[4096], key[64], pidk[32];
	long long v = -1;
	FILE *f;

	if (!uroce)
		die("UD_FAULT_UROCE not set");
	snprintf(cmd, sizeof(cmd), "'%s' stat show", uroce);
	snprintf(key, sizeof(key), " %s ", name);
	snprintf(pidk, sizeof(pidk), " pid %d ", (int)getpid());
	f = popen(cmd, "r");
	if (!f)
		die("popen %s", cmd);
	while (fgets(line, sizeof(line), f)) {
		char *k;

		if (!strstr(line, pidk) || !(k = strstr(line, key)))
			continue;
		v = strtoll(k + strlen(key), NULL, 10);
	}
	pclose(f);
	if (v < 0)
		die("no counter %s for pid %d in `uroce stat show`", name, (int)getpid());
	return v;
}

/* @name summed over the context's two links: UDP (netio) and the shm link (shm_@name). */
static long long link_counter(const char *name)
{
	char shm[64];

	snprintf(shm, sizeof(shm), "shm_%s", name);
	return stat_counter(name) + stat_counter(shm);
}

/* ---------------------------------------------------------------- verbs */

struct ctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_ah *ah;
	union ibv_gid gid;
	uint32_t psn;
};

static void open_dev(struct ctx *c)
{
	const char *dn = getenv("UD_FAULT_DEV");
	struct ibv_device **devs = ibv_get_device_list(NULL);
	int di = 0;

	while (devs && devs[di] && dn && strcmp(ibv_get_device_name(devs[di]), dn))
		di++;
	if (!devs || !devs[di] || !(c->ctx = ibv_open_device(devs[di])))
		die("no device %s", dn ? dn : "(first)");
	ibv_free_device_list(devs);
	c->pd = ibv_alloc_pd(c->ctx);
	c->cq = ibv_create_cq(c->ctx, 2 * NSLOT, NULL, NULL, 0);
	c->buf = aligned_alloc(4096, BUFSZ);   /* BUFSZ: a multiple of the alignment */
	if (!c->pd || !c->cq || !c->buf)
		die("pd/cq/buffer");
	c->mr = ibv_reg_mr(c->pd, c->buf, BUFSZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_qp_init_attr ia = {
		.send_cq = c->cq, .recv_cq = c->cq, .qp_type = uc ? IBV_QPT_UC : IBV_QPT_UD,
		.cap = { .max_send_wr = 64, .max_recv_wr = NSLOT, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (!c->mr || !(c->qp = ibv_create_qp(c->pd, &ia)))
		die("mr/qp");
	if (ibv_query_gid(c->ctx, 1, 0, &c->gid))
		die("query_gid");
	c->psn = (uint32_t)getpid() * 2654435761u & 0xFFFFFF;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (uc ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY)))
		die("modify to INIT");
}

static struct ibv_ah_attr ah_to(const struct peer *p)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .sgid_index = 0, .hop_limit = 64 } };

	memcpy(aa.grh.dgid.raw, p->gid, 16);
	return aa;
}

static void connect_qp(struct ctx *c, const struct peer *p)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask = IBV_QP_STATE;

	if (uc) {
		a.ah_attr = ah_to(p);
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = p->qpn;
		a.rq_psn = p->psn;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	}
	if (ibv_modify_qp(c->qp, &a, mask))
		die("modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->psn;
	if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("modify to RTS");
	if (!uc) {
		struct ibv_ah_attr aa = ah_to(p);

		if (!(c->ah = ibv_create_ah(c->pd, &aa)))
			die("create_ah");
	}
}

static struct peer me_as_peer(const struct ctx *c)
{
	struct peer p = { htonl(c->qp->qp_num), htonl(c->psn), htonl(c->mr->rkey), 0,
			  htobe64((uintptr_t)(c->buf + REGION)), { 0 } };

	memcpy(p.gid, c->gid.raw, 16);
	return p;
}

static struct peer from_wire(struct peer p)
{
	p.qpn = ntohl(p.qpn);
	p.psn = ntohl(p.psn);
	p.rkey = ntohl(p.rkey);
	p.addr = be64toh(p.addr);
	return p;
}

static void post_slot(struct ctx *c, uint32_t slot)
{
	struct ibv_sge sg = { (uintptr_t)(c->buf + (size_t)slot * SLOT), SLOT, c->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sg, .num_sge = 1 }, *bad;

	if (ibv_post_recv(c->qp, &wr, &bad))
		die("post_recv");
}

static struct ibv_wc poll_one(struct ctx *c, const char *what)
{
	struct ibv_wc wc;
	double t0 = now();
	int n;

	while ((n = ibv_poll_cq(c->cq, 1, &wc)) == 0)
		if (now() - t0 > WAIT_S)
			die("timed out waiting for %s", what);
	if (n < 0)
		die("poll_cq");
	return wc;
}

/* ---------------------------------------------------------------- sender */

struct pk { int32_t msg; uint32_t len; };   /* msg: index, or -1 - batch for a fence */

static struct pk *pks;
static uint32_t npk, cappk;
static bool *msg_lost;
static FILE *log_f;
static long log_off;
static uint32_t dropped_pk;

static void add_pk(int32_t msg, uint32_t len)
{
	if (npk == cappk) {
		cappk = cappk ? 2 * cappk : 4096;
		pks = realloc(pks, cappk * sizeof(*pks));
		if (!pks)
			die("memory");
	}
	pks[npk++] = (struct pk){ msg, len };
}

/* Read the log lines added since the last call; mark the messages whose packet was dropped.
 * Returns whether packet @watch (if >= 0) was dropped. */
static bool read_log(const char *path, long long watch)
{
	char line[128];
	bool hit = false;

	if (!log_f && !(log_f = fopen(path, "r")))
		return false;   /* nothing dropped yet */
	clearerr(log_f);
	fseek(log_f, log_off, SEEK_SET);
	while (fgets(line, sizeof(line), log_f)) {
		unsigned long long idx;
		size_t len;
		char what[64];

		if (!strchr(line, '\n'))
			break;   /* a line still being written: read it next time */
		log_off = ftell(log_f);
		if (sscanf(line, "%llu %zu %63s", &idx, &len, what) != 3)
			die("log line \"%s\"", line);
		if (strcmp(what, "drop"))
			die("log: unexpected action %s (only drop= is meant to be set)", what);
		if (idx >= npk)
			die("log: packet %llu dropped, but only %u sent", idx, npk);
		if (len != pks[idx].len)
			die("log: packet %llu is %zu bytes, expected %u (message %d): the packet order "
			    "is not the send order", idx, len, pks[idx].len, pks[idx].msg);
		dropped_pk++;
		if (pks[idx].msg >= 0)
			msg_lost[pks[idx].msg] = true;
		if ((long long)idx == watch)
			hit = true;
	}
	return hit;
}

/* One SEND_WITH_IMM of @len bytes from the start of the buffer; waits for its completion
 * (the WQE completes once its packets are handed to the socket, so by then the fault module
 * has logged them). */
static void send_msg(struct ctx *c, const struct peer *p, uint32_t imm, uint32_t len, uint64_t id,
		     bool write)
{
	struct ibv_sge sg = { (uintptr_t)c->buf, len, c->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htobe32(imm) }, *bad;
	struct ibv_wc wc;

	if (!uc) {
		wr.wr.ud.ah = c->ah;
		wr.wr.ud.remote_qpn = p->qpn;
		wr.wr.ud.remote_qkey = QKEY;
	} else if (write) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.wr.rdma.remote_addr = p->addr + (uint64_t)(imm % BATCH) * MAXLEN;
		wr.wr.rdma.rkey = p->rkey;
	}
	if (ibv_post_send(c->qp, &wr, &bad))
		die("post_send");
	wc = poll_one(c, "a send completion");
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != id)
		die("send completion: status %s wr_id %llu", ibv_wc_status_str(wc.status),
		    (unsigned long long)wc.wr_id);
}

static int run_send(const char *host, const char *port, uint32_t n, const char *log)
{
	struct ctx c = { 0 };
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	struct peer mine, peer;
	uint32_t lost = 0, fences = 0, ack;
	long long fd_ctr, tx_ctr;
	int fd;

	me = "ud_fault send";
	open_dev(&c);
	if (getaddrinfo(host, port, &hints, &ai))
		die("resolve %s:%s", host, port);
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect %s:%s: %s", host, port, strerror(errno));
	freeaddrinfo(ai);
	mine = me_as_peer(&c);
	xfer(fd, &mine, sizeof(mine), true);
	xfer(fd, &peer, sizeof(peer), false);
	peer = from_wire(peer);
	connect_qp(&c, &peer);
	msg_lost = calloc(n ? n : 1, sizeof(*msg_lost));
	if (!msg_lost)
		die("memory");

	for (uint32_t b = 0; b * BATCH < n; b++) {
		uint32_t first = b * BATCH, last = first + BATCH < n ? first + BATCH : n;
		uint32_t wexp[BATCH], nexp = 0;
		struct batch_hdr h;

		for (uint32_t i = first; i < last; i++) {
			uint32_t len = msg_len(i);

			for (uint32_t k = 0; k < len; k++)
				c.buf[k] = pattern(i, k);
			for (uint32_t j = 0; j < npackets(len); j++)
				add_pk((int32_t)i, (uint32_t)wire_len(len, j, is_write(i)));
			send_msg(&c, &peer, i, len, i, is_write(i));
		}
		read_log(log, -1);
		/* The fence: sent again until one gets through (the log tells at once). */
		for (;;) {
			uint32_t at = npk;

			memset(c.buf, 0xFE, 8);
			add_pk(-1 - (int32_t)b, (uint32_t)wire_len(8, 0, false));
			send_msg(&c, &peer, FENCE | b, 8, 1000000u + b, false);
			fences++;
			if (!read_log(log, at))
				break;
		}
		for (uint32_t i = first; i < last; i++) {
			if (msg_lost[i])
				lost++;
			else
				wexp[nexp++] = htonl(i);
		}
		h = (struct batch_hdr){ htonl(b), htonl(nexp), 0, 0 };
		xfer(fd, &h, sizeof(h), true);
		xfer(fd, wexp, nexp * sizeof(uint32_t), true);
		xfer(fd, &ack, sizeof(ack), false);
		if (ntohl(ack) != b)
			die("the receiver rejected batch %u", b);
	}
	/* Counters: the fault module's drops as this context publishes them. */
	fd_ctr = link_counter("fault_drop");
	tx_ctr = link_counter("tx_packets");
	printf("SENT messages %u packets %u (fences %u) dropped_packets %u lost_messages %u "
	       "delivered_messages %u; counters fault_drop %lld tx_packets %lld\n",
	       n, npk, fences, dropped_pk, lost, n - lost, fd_ctr, tx_ctr);
	if (fd_ctr != dropped_pk)
		die("fault_drop counter %lld, the log lists %u dropped packets", fd_ctr, dropped_pk);
	if (tx_ctr != (long long)(npk - dropped_pk))
		die("tx_packets counter %lld, expected %u sent - %u dropped", tx_ctr, npk, dropped_pk);
	if (!dropped_pk || !lost)
		die("nothing was dropped: the test tested nothing (is UROCE_FAULT set?)");
	{
		struct batch_hdr end = { htonl(BATCH_END), 0, htonl(npk), htonl(dropped_pk) };

		xfer(fd, &end, sizeof(end), true);
		xfer(fd, &ack, sizeof(ack), false);
		if (ntohl(ack) != BATCH_END)
			die("the receiver rejected the totals");
	}
	close(fd);
	if (c.ah)
		ibv_destroy_ah(c.ah);
	ibv_destroy_qp(c.qp);
	return 0;
}

/* ---------------------------------------------------------------- receiver */

/* Check one message completion against expected message @i. */
static void check_msg(struct ctx *c, const struct ibv_wc *wc, uint32_t i, uint32_t sender_qpn)
{
	uint32_t len = msg_len(i), hdr = uc ? 0 : GRH;
	const uint8_t *d = c->buf + (size_t)wc->wr_id * SLOT + hdr;
	enum ibv_wc_opcode want = is_write(i) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;

	if (wc->opcode != want)
		die("message %u: opcode %d, expected %d", i, wc->opcode, want);
	if (is_write(i))
		d = c->buf + REGION + (size_t)(i % BATCH) * MAXLEN;   /* where the WRITE put it */

	if (wc->byte_len != hdr + len)
		die("message %u: byte_len %u, expected %u", i, wc->byte_len, hdr + len);
	if (!uc && (!(wc->wc_flags & IBV_WC_GRH) || wc->src_qp != sender_qpn))
		die("message %u: wc_flags 0x%x src_qp 0x%x (sender 0x%x)", i, wc->wc_flags,
		    wc->src_qp, sender_qpn);
	for (uint32_t k = 0; k < len; k++)
		if (d[k] != pattern(i, k))
			die("message %u: byte %u is 0x%02x, expected 0x%02x", i, k, d[k], pattern(i, k));
}

static int run_recv(const char *port, uint32_t n)
{
	struct ctx c = { 0 };
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	struct peer mine, peer;
	uint32_t got = 0, fences = 0, batches = 0;
	long long rx_ctr, rxd_ctr;
	int one = 1, lfd, fd;

	me = "ud_fault recv";
	open_dev(&c);
	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	sa.sin6_port = htons((uint16_t)atoi(port));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
		die("listen on %s: %s", port, strerror(errno));
	for (uint32_t s = 0; s < NSLOT; s++)
		post_slot(&c, s);
	/* The receive WQEs are posted and the QP exists: the script starts the sender now. */
	printf("READY\n");
	fflush(stdout);
	{
		struct pollfd pf = { lfd, POLLIN, 0 };

		if (poll(&pf, 1, WAIT_S * 1000) != 1)
			die("no sender connected");
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept: %s", strerror(errno));
	close(lfd);
	/* Ready to receive (RTR) before the sender learns our QPN: nothing it sends can find
	 * the QP not ready. */
	xfer(fd, &peer, sizeof(peer), false);
	peer = from_wire(peer);
	connect_qp(&c, &peer);
	mine = me_as_peer(&c);
	xfer(fd, &mine, sizeof(mine), true);

	for (;;) {
		struct batch_hdr h;
		uint32_t exp[BATCH], nexp, b, k = 0, ack;

		xfer(fd, &h, sizeof(h), false);
		b = ntohl(h.batch);
		if (b == BATCH_END) {
			uint32_t total = ntohl(h.total_pk), dropped = ntohl(h.dropped_pk);

			rx_ctr = link_counter("rx_packets");
			rxd_ctr = link_counter("rx_drops");
			printf("RECEIVED messages %u of %u (fences %u, batches %u); counters rx_packets "
			       "%lld (sender: %u sent - %u dropped) rx_drops %lld\n",
			       got, n, fences, batches, rx_ctr, total, dropped, rxd_ctr);
			if (rx_ctr != (long long)(total - dropped))
				die("rx_packets %lld, expected %u", rx_ctr, total - dropped);
			if (rxd_ctr != 0)
				die("rx_drops %lld", rxd_ctr);
			ack = htonl(BATCH_END);
			xfer(fd, &ack, sizeof(ack), true);
			break;
		}
		nexp = ntohl(h.nexp);
		if (b != batches || nexp > BATCH)
			die("batch %u (expected %u) with %u messages", b, batches, nexp);
		xfer(fd, exp, nexp * sizeof(uint32_t), false);
		/* Exactly the expected messages, in order, then this batch's fence. */
		for (;;) {
			struct ibv_wc wc = poll_one(&c, "a receive completion");
			uint32_t imm;

			if (wc.status != IBV_WC_SUCCESS || !(wc.wc_flags & IBV_WC_WITH_IMM))
				die("batch %u: completion status %s opcode %d flags 0x%x", b,
				    ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags);
			imm = be32toh(wc.imm_data);
			if (imm & FENCE) {
				if (imm != (FENCE | b) || wc.opcode != IBV_WC_RECV || wc.byte_len != (uc ? 8 : GRH + 8))
					die("batch %u: fence of batch %u, opcode %d, byte_len %u", b,
					    imm & ~FENCE, wc.opcode, wc.byte_len);
				if (k != nexp)
					die("batch %u: fence after %u of %u expected messages; next "
					    "missing: %u", b, k, nexp, ntohl(exp[k]));
				post_slot(&c, (uint32_t)wc.wr_id);
				fences++;
				break;
			}
			if (k == nexp || imm != ntohl(exp[k]))
				die("batch %u: got message %u, expected %s%u", b, imm,
				    k == nexp ? "the fence, after " : "", k == nexp ? nexp : ntohl(exp[k]));
			check_msg(&c, &wc, imm, peer.qpn);
			post_slot(&c, (uint32_t)wc.wr_id);
			k++;
			got++;
		}
		batches++;
		ack = htonl(b);
		xfer(fd, &ack, sizeof(ack), true);
	}
	close(fd);
	ibv_destroy_qp(c.qp);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "recv")) {
		uc = !strcmp(argv[2], "uc") || !strcmp(argv[2], "ucw");
		mixw = !strcmp(argv[2], "ucw");
		return run_recv(argv[3], (uint32_t)strtoul(argv[4], NULL, 0));
	}
	if (argc >= 7 && !strcmp(argv[1], "send")) {
		uc = !strcmp(argv[2], "uc") || !strcmp(argv[2], "ucw");
		mixw = !strcmp(argv[2], "ucw");
		return run_send(argv[3], argv[4], (uint32_t)strtoul(argv[5], NULL, 0), argv[6]);
	}
	fprintf(stderr, "usage: ud_fault recv ud|uc|ucw PORT N\n"
			"       ud_fault send ud|uc|ucw HOST PORT N LOG\n");
	return 2;
}
