/* rc_readresp.c — uroce's RC completer against a responder that answers badly (issue #17,
 * item 7: responses that do not fit the outstanding READ or atomic).
 *
 * The requester is a real uroce RC QP driven through the verbs API (uroce's libibverbs).
 * The responder is played by this program itself, packet by packet: a plain UDP socket
 * bound to port 4791 in another network namespace ($RC_READRESP_PEER_NS, joined to ours
 * by veth; rc_readresp.sh builds it), packets built and parsed with the wire module, real
 * ICRC both ways.  No uroce code runs on the peer's side.
 *
 *   rc_readresp CASE...    run each case on a fresh QP; "all" runs every case
 *
 * Each case posts one RDMA READ (or fetch-and-add) and answers each request the QP sends
 * with the case's script: the first request gets the bad answer; a request asked again
 * gets the correct answer in the cases that must succeed (an implied NAK re-issues the
 * READ), the same bad answer in the others.  A case says what must happen (docs/soft-roce-differences.md
 * has the decisions and what Soft-RoCE does):
 *   - the completion status, within BOUND_MS of the post: far less than one local ACK
 *     timeout (TIMEOUT), so nothing may wait for a retransmission timer;
 *   - how many requests the peer saw, and what a re-issued one asks for (implied NAK:
 *     resume at the first missing response, at once);
 *   - the QP's state afterwards (RTS, or Error after a failed WQE);
 *   - the data (READ) or original value (atomic) when it succeeds;
 *   - the QP's counters, printed by the engine when the QP is destroyed (UROCE_RC_STATS):
 *     no local ACK timeout, and the case's drop or duplicate counts.
 * Before the fix of issue #17 the bad answers were ignored: the READ was asked again at
 * every local ACK timeout until RETRY_EXC_ERR (about (retry_cnt + 1) * 537 ms here).
 *
 * Exit 0 when every case passed, 1 otherwise (each failure says what), 2 on a setup error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire/icrc.h"
#include "wire/wire.h"

#define MTU 1024u
#define TIMEOUT 17                 /* local ACK timeout 4.096 us * 2^17 = 537 ms */
#define RETRY_CNT 3
#define BOUND_MS 250               /* "at once": well under one local ACK timeout */
#define LIMIT_MS 6000              /* longest wait for a completion (old behaviour: ~2.1 s) */
#define SETTLE_MS 60               /* after the completion: no further request may come */
#define LATER_MS 30                /* psn_* cases: the correct answer follows this late */
#define PEER_QPN 0x00ABCDu
#define REMOTE_VA 0x7f0000100000ull
#define REMOTE_RKEY 0x1234u
#define ATOMIC_ORIG 0x1122334455667788ull
#define ADD 5u
#define ADDR_UROCE "192.0.2.1"
#define ADDR_PEER "192.0.2.2"
#define BUFSZ 8192u

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "rc_readresp: setup: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The peer's memory: byte at remote address a. */
static uint8_t remote_byte(uint64_t a)
{
	return (uint8_t)(a * 131u + (a >> 8) * 7u + 1u);
}

/* ---------------------------------------------------------------- the cases */

enum case_id {
	C_GOOD, C_GOOD_ATOMIC,
	C_ACK_FIRST, C_ACK_LAST, C_ACK_PARTIAL, C_ATOMIC_ACK,
	C_MIDDLE_FIRST, C_LAST_FIRST, C_FIRST_ONLY,
	C_LONG_ONLY, C_LONG_LAST, C_LONG_MIDDLE,
	C_SHORT_LAST, C_SHORT_TAIL, C_SHORT_ONLY,
	C_FIRST_NOT_PMTU, C_MIDDLE_NOT_PMTU,
	C_PSN_FUTURE, C_PSN_PAST,
	C_ATOMIC_READ_RESP, C_ATOMIC_PLAIN_ACK, C_ATOMIC_PSN_FUTURE,
	C_NUM
};

struct rcase {
	const char *name;
	const char *what;               /* the peer's first answer */
	bool atomic;                    /* a fetch-and-add instead of a READ */
	uint32_t len;                   /* READ length */
	uint32_t sq_psn;
	enum ibv_wc_status want;
	unsigned want_reqs;             /* requests the peer sees in all */
	const char *want_stats;         /* "KEY=N ..." that must be in the QP's counters line */
};

static const struct rcase cases[C_NUM] = {
	[C_GOOD] = { "good", "the correct answer (FIRST, MIDDLE, LAST)", false, 2500, 0x123456,
		     IBV_WC_SUCCESS, 1, "" },
	[C_GOOD_ATOMIC] = { "good_atomic", "the correct ATOMIC ACK", true, 8, 0x123456,
			    IBV_WC_SUCCESS, 1, "" },
	[C_ACK_FIRST] = { "ack_first", "a plain ACK with the READ's first PSN", false, 2500, 0x123456,
			  IBV_WC_SUCCESS, 2, "" },
	[C_ACK_LAST] = { "ack_last", "a plain ACK with the READ's last PSN", false, 2500, 0x123456,
			 IBV_WC_SUCCESS, 2, "" },
	[C_ACK_PARTIAL] = { "ack_partial", "FIRST, then a plain ACK with the next PSN (PSNs wrap)",
			    false, 2500, 0xFFFFFF, IBV_WC_SUCCESS, 2, "" },
	[C_ATOMIC_ACK] = { "atomic_ack", "an ATOMIC ACK with the READ's PSN", false, 2500, 0x123456,
			   IBV_WC_BAD_RESP_ERR, 1, "" },
	[C_MIDDLE_FIRST] = { "middle_first", "READ RESPONSE MIDDLE, no FIRST", false, 2500, 0x123456,
			     IBV_WC_BAD_RESP_ERR, 1, "" },
	[C_LAST_FIRST] = { "last_first", "READ RESPONSE LAST (full PMTU), no FIRST", false, 2500,
			   0x123456, IBV_WC_BAD_RESP_ERR, 1, "" },
	[C_FIRST_ONLY] = { "first_only", "FIRST, then ONLY with the next PSN", false, 2048, 0x123456,
			   IBV_WC_BAD_RESP_ERR, 1, "" },
	[C_LONG_ONLY] = { "long_only", "ONLY with 200 bytes for a 100-byte READ", false, 100, 0x123456,
			  IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_LONG_LAST] = { "long_last", "FIRST, MIDDLE, LAST with a full PMTU (452 bytes are left)",
			  false, 2500, 0x123456, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_LONG_MIDDLE] = { "long_middle", "FIRST, MIDDLE for a 2-packet READ (more would follow)",
			    false, 2048, 0x123456, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_SHORT_LAST] = { "short_last", "FIRST, LAST (the message ends one packet early; PSNs wrap)",
			   false, 2500, 0xFFFFFF, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_SHORT_TAIL] = { "short_tail", "FIRST, MIDDLE, LAST with 100 of the 452 bytes left", false,
			   2500, 0x123456, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_SHORT_ONLY] = { "short_only", "ONLY with 50 bytes for a 100-byte READ", false, 100,
			   0x123456, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_FIRST_NOT_PMTU] = { "first_not_pmtu", "FIRST with 1000 bytes (PMTU 1024)", false, 2500,
			       0x123456, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_MIDDLE_NOT_PMTU] = { "middle_not_pmtu", "FIRST, MIDDLE with 1000 bytes (PMTU 1024)", false,
				2500, 0x123456, IBV_WC_LOC_LEN_ERR, 1, "" },
	[C_PSN_FUTURE] = { "psn_future", "the whole answer 100 PSNs late (never sent), then the right one",
			   false, 2500, 0x123456, IBV_WC_SUCCESS, 1, "RESP_PSN=3" },
	[C_PSN_PAST] = { "psn_past", "the whole answer 10 PSNs early (before the READ), then the right one",
			 false, 2500, 0x123456, IBV_WC_SUCCESS, 1, "dup_resp=3" },
	[C_ATOMIC_READ_RESP] = { "atomic_read_resp", "READ RESPONSE ONLY (8 bytes) for a fetch-and-add",
				 true, 8, 0x123456, IBV_WC_BAD_RESP_ERR, 1, "" },
	[C_ATOMIC_PLAIN_ACK] = { "atomic_plain_ack", "a plain ACK with the atomic's PSN", true, 8,
				 0x123456, IBV_WC_SUCCESS, 2, "" },
	[C_ATOMIC_PSN_FUTURE] = { "atomic_psn_future", "the ATOMIC ACK 5 PSNs late, then the right one",
				  true, 8, 0x123456, IBV_WC_SUCCESS, 1, "RESP_PSN=1" },
};

/* ---------------------------------------------------------------- the peer */

struct req {                    /* a request the QP sent */
	uint8_t opcode;
	uint32_t psn;
	uint64_t va;
	uint32_t rkey, len;
	uint64_t add;
	uint64_t t_ms;
};

struct peer {
	int fd;
	struct sockaddr_in to;          /* the QP's side: 192.0.2.1:4791 */
	struct uroce_icrc_addr tx;      /* addresses of what we send */
	uint32_t dqpn;                  /* the uroce QP */
	uint32_t msn;
	unsigned sent;
};

static void peer_send(struct peer *pr, uint8_t opcode, uint32_t psn, const uint8_t *pl, uint32_t n,
		      uint64_t orig)
{
	struct uroce_pkt p;
	uint8_t buf[BUFSZ];
	long len;

	memset(&p, 0, sizeof(p));
	p.bth.opcode = opcode;
	p.bth.pkey = 0xFFFF;
	p.bth.dqpn = pr->dqpn;
	p.bth.psn = psn & 0xFFFFFF;
	p.bth.padcnt = (uint8_t)uroce_pad_for(n);
	p.aeth.syndrome = uroce_aeth_syndrome(UROCE_AETH_ACK, 0x1F);
	p.aeth.msn = pr->msn & 0xFFFFFF;
	p.atmack = orig;
	p.payload = pl;
	p.payload_len = n;
	len = uroce_pkt_encode(buf, sizeof(buf), &p);
	if (len < 0)
		die("encode opcode 0x%02x: %ld", opcode, len);
	uroce_icrc_set(&pr->tx, buf, (size_t)len);
	if (sendto(pr->fd, buf, (size_t)len, 0, (struct sockaddr *)&pr->to, sizeof(pr->to)) != len)
		die("sendto: %s", strerror(errno));
	pr->sent++;
}

/* A READ response of @n bytes carrying the remote memory at @va + @off. */
static void resp(struct peer *pr, uint8_t opcode, uint32_t psn, const struct req *rq, uint32_t off,
		 uint32_t n)
{
	uint8_t pl[BUFSZ];

	for (uint32_t i = 0; i < n; i++)
		pl[i] = remote_byte(rq->va + off + i);
	peer_send(pr, opcode, psn, pl, n, 0);
}

/* The correct answer to @rq, its PSNs moved by @shift: READ responses at the PMTU, or the
 * ATOMIC ACK with the original value. */
static void answer(struct peer *pr, const struct req *rq, int32_t shift)
{
	uint32_t psn = rq->psn + (uint32_t)shift;

	if (rq->opcode != UROCE_OP_READ_REQ) {
		peer_send(pr, UROCE_OP_ATOMIC_ACK, psn, NULL, 0, ATOMIC_ORIG);
		pr->msn++;
		return;
	}
	if (rq->len <= MTU) {
		resp(pr, UROCE_OP_READ_RESP_ONLY, psn, rq, 0, rq->len);
	} else {
		uint32_t off = 0, k = 0;

		for (; rq->len - off > MTU; off += MTU, k++)
			resp(pr, k ? UROCE_OP_READ_RESP_MIDDLE : UROCE_OP_READ_RESP_FIRST, psn + k, rq, off, MTU);
		resp(pr, UROCE_OP_READ_RESP_LAST, psn + k, rq, off, rq->len - off);
	}
	pr->msn++;
}

/* What the QP must ask in a re-issued request (implied NAK): resume at @psn, @off bytes
 * into the READ.  "" when it does, else why not. */
static const char *check_reissue(const struct req *first, const struct req *rq, uint32_t psn,
				 uint32_t off)
{
	static char why[160];

	if (rq->opcode != first->opcode || rq->psn != (psn & 0xFFFFFF))
		snprintf(why, sizeof(why), "opcode 0x%02x PSN 0x%06x, want 0x%02x at 0x%06x", rq->opcode,
			 rq->psn, first->opcode, psn & 0xFFFFFF);
	else if (rq->opcode == UROCE_OP_READ_REQ && (rq->va != first->va + off || rq->len != first->len - off))
		snprintf(why, sizeof(why), "va +%lld len %u, want +%u len %u",
			 (long long)(rq->va - first->va), rq->len, off, first->len - off);
	else if (rq->opcode != UROCE_OP_READ_REQ && (rq->va != first->va || rq->add != first->add))
		snprintf(why, sizeof(why), "a different atomic");
	else
		return "";
	return why;
}

/* The peer's part of case @c: @n-th request @rq (0 = the first; @first is it).  Sets
 * *later to send the correct answer after LATER_MS.  Returns "" or what is wrong with a
 * re-issued request. */
static const char *play(enum case_id c, struct peer *pr, unsigned n, const struct req *first,
			const struct req *rq, bool *later)
{
	uint32_t P = rq->psn;

	if (n > 0 && cases[c].want == IBV_WC_SUCCESS) {
		/* Asked again: only the implied-NAK cases may, and then they get the right
		 * answer.  (The others answer every request the same bad way: a responder
		 * that is wrong stays wrong.) */
		const char *why = "";

		if (c == C_ACK_FIRST || c == C_ACK_LAST || c == C_ATOMIC_PLAIN_ACK)
			why = check_reissue(first, rq, first->psn, 0);
		else if (c == C_ACK_PARTIAL)
			why = check_reissue(first, rq, first->psn + 1, MTU);
		answer(pr, rq, 0);
		return why;
	}
	switch (c) {
	case C_GOOD: case C_GOOD_ATOMIC:
		answer(pr, rq, 0);
		break;
	case C_ACK_FIRST:
		peer_send(pr, UROCE_OP_ACK, P, NULL, 0, 0);
		break;
	case C_ACK_LAST:
		peer_send(pr, UROCE_OP_ACK, P + (rq->len - 1) / MTU, NULL, 0, 0);
		break;
	case C_ACK_PARTIAL:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		peer_send(pr, UROCE_OP_ACK, P + 1, NULL, 0, 0);
		break;
	case C_ATOMIC_ACK:
		peer_send(pr, UROCE_OP_ATOMIC_ACK, P, NULL, 0, ATOMIC_ORIG);
		break;
	case C_MIDDLE_FIRST:
		resp(pr, UROCE_OP_READ_RESP_MIDDLE, P, rq, 0, MTU);
		break;
	case C_LAST_FIRST:
		resp(pr, UROCE_OP_READ_RESP_LAST, P, rq, 0, MTU);
		break;
	case C_FIRST_ONLY:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		resp(pr, UROCE_OP_READ_RESP_ONLY, P + 1, rq, MTU, MTU);
		break;
	case C_LONG_ONLY:
		resp(pr, UROCE_OP_READ_RESP_ONLY, P, rq, 0, 200);
		break;
	case C_LONG_LAST:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		resp(pr, UROCE_OP_READ_RESP_MIDDLE, P + 1, rq, MTU, MTU);
		resp(pr, UROCE_OP_READ_RESP_LAST, P + 2, rq, 2 * MTU, MTU);
		break;
	case C_LONG_MIDDLE:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		resp(pr, UROCE_OP_READ_RESP_MIDDLE, P + 1, rq, MTU, MTU);
		break;
	case C_SHORT_LAST:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		resp(pr, UROCE_OP_READ_RESP_LAST, P + 1, rq, MTU, MTU);
		break;
	case C_SHORT_TAIL:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		resp(pr, UROCE_OP_READ_RESP_MIDDLE, P + 1, rq, MTU, MTU);
		resp(pr, UROCE_OP_READ_RESP_LAST, P + 2, rq, 2 * MTU, 100);
		break;
	case C_SHORT_ONLY:
		resp(pr, UROCE_OP_READ_RESP_ONLY, P, rq, 0, 50);
		break;
	case C_FIRST_NOT_PMTU:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, 1000);
		break;
	case C_MIDDLE_NOT_PMTU:
		resp(pr, UROCE_OP_READ_RESP_FIRST, P, rq, 0, MTU);
		resp(pr, UROCE_OP_READ_RESP_MIDDLE, P + 1, rq, MTU, 1000);
		break;
	case C_PSN_FUTURE:
		answer(pr, rq, 100);
		*later = true;
		break;
	case C_PSN_PAST:
		answer(pr, rq, -10);
		*later = true;
		break;
	case C_ATOMIC_READ_RESP:
		resp(pr, UROCE_OP_READ_RESP_ONLY, P, rq, 0, 8);
		break;
	case C_ATOMIC_PLAIN_ACK:
		peer_send(pr, UROCE_OP_ACK, P, NULL, 0, 0);
		break;
	case C_ATOMIC_PSN_FUTURE:
		answer(pr, rq, 5);
		*later = true;
		break;
	default:
		break;
	}
	return "";
}

/* One datagram from the QP, if any: a request for us, checked (ICRC included) and decoded. */
static bool peer_recv(struct peer *pr, struct req *rq)
{
	uint8_t buf[BUFSZ];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	struct uroce_icrc_addr ia = { .family = AF_INET };
	struct uroce_rx_ctx ctx = { .mtu = MTU, .addr = &ia, .icrc_flags = UROCE_ICRC_RX_SOLVE_ID };
	struct uroce_pkt p;
	ssize_t n = recvfrom(pr->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	enum uroce_rx_err e;

	if (n < 0)
		return false;
	ia.src.v4 = from.sin_addr;
	ia.dst.v4 = pr->tx.src.v4;
	ia.sport = ntohs(from.sin_port);
	ia.dport = 4791;
	e = uroce_pkt_validate(buf, (size_t)n, &ctx, &p);
	if (e != UROCE_RX_OK) {
		fprintf(stderr, "  peer: dropped a datagram from the QP: %s\n", uroce_rx_err_name(e));
		return false;
	}
	if (p.bth.dqpn != PEER_QPN)
		return false;
	memset(rq, 0, sizeof(*rq));
	rq->opcode = p.bth.opcode;
	rq->psn = p.bth.psn;
	rq->t_ms = now_ms();
	if (p.bth.opcode == UROCE_OP_READ_REQ) {
		rq->va = p.reth.va;
		rq->rkey = p.reth.rkey;
		rq->len = p.reth.len;
	} else if (p.bth.opcode == UROCE_OP_FETCH_ADD) {
		rq->va = p.atmeth.va;
		rq->rkey = p.atmeth.rkey;
		rq->add = p.atmeth.swap_add;
		rq->len = 8;
	} else {
		fprintf(stderr, "  peer: unexpected %s from the QP\n", uroce_opcode_name(p.bth.opcode));
		return false;
	}
	return true;
}

/* The peer's socket, made in the namespace @ns_path and used from ours. */
static int peer_socket(const char *ns_path)
{
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int ns = open(ns_path, O_RDONLY | O_CLOEXEC);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(4791) };
	int fd, on = IP_PMTUDISC_DO;

	if (self < 0 || ns < 0)
		die("open %s: %s", ns < 0 ? ns_path : "/proc/self/ns/net", strerror(errno));
	if (setns(ns, CLONE_NEWNET))
		die("setns %s: %s", ns_path, strerror(errno));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	inet_pton(AF_INET, ADDR_PEER, &sa.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("peer socket on %s:4791: %s", ADDR_PEER, strerror(errno));
	/* DF, hence IPv4 Identification 0: the ICRC's pseudo-header (wire/icrc.h). */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &on, sizeof(on));
	if (setns(self, CLONE_NEWNET))
		die("setns back: %s", strerror(errno));
	close(self);
	close(ns);
	return fd;
}

/* ---------------------------------------------------------------- the QP */

struct qpside {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	int sgid;
};

static void open_dev(struct qpside *q, const char *name)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	union ibv_gid want = { .raw = { [10] = 0xff, [11] = 0xff } }, g;
	int i = 0;

	inet_pton(AF_INET, ADDR_UROCE, want.raw + 12);
	while (devs && devs[i] && strcmp(ibv_get_device_name(devs[i]), name))
		i++;
	if (!devs || !devs[i] || !(q->ctx = ibv_open_device(devs[i])))
		die("no device %s", name);
	ibv_free_device_list(devs);
	q->sgid = -1;
	for (int k = 0; k < 16 && q->sgid < 0; k++)
		if (!ibv_query_gid(q->ctx, 1, k, &g) && !memcmp(&g, &want, sizeof(g)))
			q->sgid = k;
	if (q->sgid < 0)
		die("%s has no GID ::ffff:%s", name, ADDR_UROCE);
	q->pd = ibv_alloc_pd(q->ctx);
	q->buf = aligned_alloc(4096, BUFSZ);
	if (!q->pd || !q->buf)
		die("pd/buffer");
	q->mr = ibv_reg_mr(q->pd, q->buf, BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	if (!q->mr)
		die("reg_mr: %s", strerror(errno));
}

static struct ibv_qp *make_qp(struct qpside *q, struct ibv_cq *cq, uint32_t sq_psn)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { 0 };
	struct ibv_qp *qp = ibv_create_qp(q->pd, &ia);

	if (!qp)
		die("create_qp: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("to init: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = PEER_QPN;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)q->sgid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
	inet_pton(AF_INET, ADDR_PEER, a.ah_attr.grh.dgid.raw + 12);
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("to rtr: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = TIMEOUT;
	a.retry_cnt = RETRY_CNT;
	a.rnr_retry = 3;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("to rts: %s", strerror(errno));
	return qp;
}

/* Destroy @qp and return the counters line the engine prints then (UROCE_RC_STATS=1),
 * caught from our stderr. */
static void destroy_qp(struct ibv_qp *qp, char *line, size_t cap)
{
	int saved, fd = memfd_create("rc_readresp_stats", 0);
	ssize_t n;

	line[0] = 0;
	fflush(stderr);
	saved = dup(2);
	if (fd < 0 || saved < 0 || dup2(fd, 2) < 0)
		die("redirect stderr: %s", strerror(errno));
	if (ibv_destroy_qp(qp))
		fprintf(stderr, "destroy_qp failed\n");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, line, cap - 1, 0);
	close(fd);
	line[n > 0 ? n : 0] = 0;
	if (n > 0 && line[n - 1] == '\n')
		line[n - 1] = 0;
}

/* The value of counter @key in the counters line ("timeouts 0", "RESP_PSN=3"), or -1. */
static long long stat_of(const char *line, const char *key)
{
	char k[2][72];
	const char *s;

	snprintf(k[0], sizeof(k[0]), " %s=", key);
	snprintf(k[1], sizeof(k[1]), " %s ", key);
	for (int i = 0; i < 2; i++)
		if ((s = strstr(line, k[i])))
			return strtoll(s + strlen(k[i]), NULL, 10);
	return -1;
}

/* ---------------------------------------------------------------- one case */

static bool run_case(enum case_id c, struct qpside *q, struct peer *pr)
{
	const struct rcase *k = &cases[c];
	struct ibv_cq *cq = ibv_create_cq(q->ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp;
	struct ibv_sge sge = { (uintptr_t)q->buf, k->len, q->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x5EED + c, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct req first = { 0 }, rq;
	struct ibv_wc wc = { 0 };
	char line[2048], why[512] = "";
	uint64_t t0, t_done = 0, later_at = 0, reissue_ms = 0;
	unsigned reqs = 0;
	bool ok = true, got = false;

#define FAIL(...) do { ok = false; fprintf(stderr, "FAIL %s: ", k->name); \
		       fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } while (0)
	if (!cq)
		die("create_cq");
	while (peer_recv(pr, &rq))   /* nothing of an earlier case may be left */
		;
	qp = make_qp(q, cq, k->sq_psn);
	pr->dqpn = qp->qp_num;
	pr->msn = 0;
	memset(q->buf, 0xEE, BUFSZ);
	if (k->atomic) {
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = REMOTE_VA;
		wr.wr.atomic.rkey = REMOTE_RKEY;
		wr.wr.atomic.compare_add = ADD;
	} else {
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = REMOTE_VA;
		wr.wr.rdma.rkey = REMOTE_RKEY;
	}
	t0 = now_ms();
	if (ibv_post_send(qp, &wr, &bad))
		die("post_send: %s", strerror(errno));
	/* Play the peer until the completion, then SETTLE_MS more (nothing else may come). */
	for (;;) {
		uint64_t t = now_ms();
		struct pollfd pf = { pr->fd, POLLIN, 0 };

		while (peer_recv(pr, &rq)) {
			bool later = false;
			const char *w;

			if (reqs == 0)
				first = rq;
			else if (reqs == 1)
				reissue_ms = rq.t_ms - first.t_ms;
			if (rq.rkey != REMOTE_RKEY || rq.va < REMOTE_VA)
				FAIL("request %u: R_Key 0x%x va 0x%llx", reqs, rq.rkey, (unsigned long long)rq.va);
			w = play(c, pr, reqs, &first, &rq, &later);
			if (*w && !why[0])
				snprintf(why, sizeof(why), "re-issued request %u: %s", reqs, w);
			if (later)
				later_at = now_ms() + LATER_MS;
			reqs++;
		}
		if (later_at && t >= later_at) {
			answer(pr, &first, 0);
			later_at = 0;
		}
		if (!got) {
			int r = ibv_poll_cq(cq, 1, &wc);

			if (r < 0)
				die("poll_cq");
			if (r == 1) {
				got = true;
				t_done = now_ms();
			}
		}
		if (got && t >= t_done + SETTLE_MS)
			break;
		if (!got && t >= t0 + LIMIT_MS)
			break;
		poll(&pf, 1, 1);
	}

	if (!got)
		FAIL("no completion within %u ms (the peer saw %u requests)", LIMIT_MS, reqs);
	else if (wc.status != k->want || wc.wr_id != wr.wr_id)
		FAIL("status %s (wr_id 0x%llx) after %llu ms and %u requests, want %s",
		     ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id,
		     (unsigned long long)(t_done - t0), reqs, ibv_wc_status_str(k->want));
	if (got && t_done - t0 > BOUND_MS)
		FAIL("completion after %llu ms, want at most %u (local ACK timeout %u ms)",
		     (unsigned long long)(t_done - t0), BOUND_MS, (unsigned)((4096ull << TIMEOUT) / 1000000));
	if (reqs != k->want_reqs)
		FAIL("the peer saw %u requests, want %u", reqs, k->want_reqs);
	if (reqs >= 2 && reissue_ms > BOUND_MS)
		FAIL("the request was re-issued after %llu ms, want at most %u (implied NAK, not a timeout)",
		     (unsigned long long)reissue_ms, BOUND_MS);
	if (why[0])
		FAIL("%s", why);
	if (got && wc.status == IBV_WC_SUCCESS) {
		if (k->atomic) {
			uint64_t v;

			memcpy(&v, q->buf, 8);
			if (v != ATOMIC_ORIG)
				FAIL("original value 0x%llx, want 0x%llx", (unsigned long long)v,
				     (unsigned long long)ATOMIC_ORIG);
		} else {
			for (uint32_t i = 0; i < k->len; i++)
				if (q->buf[i] != remote_byte(REMOTE_VA + i)) {
					FAIL("READ data: byte %u is 0x%02x, want 0x%02x", i, q->buf[i],
					     remote_byte(REMOTE_VA + i));
					break;
				}
			if (q->buf[k->len] != 0xEE)
				FAIL("READ wrote past its %u bytes", k->len);
		}
	}
	if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia))
		die("query_qp");
	if (qa.qp_state != (k->want == IBV_WC_SUCCESS ? IBV_QPS_RTS : IBV_QPS_ERR))
		FAIL("QP state %d after the completion, want %s", qa.qp_state,
		     k->want == IBV_WC_SUCCESS ? "RTS" : "ERR");
	destroy_qp(qp, line, sizeof(line));
	if (stat_of(line, "timeouts") != 0)
		FAIL("local ACK timeouts %lld, want 0 [%s]", stat_of(line, "timeouts"), line);
	for (const char *s = k->want_stats; *s;) {
		char key[64];
		long long want;
		int used = 0;

		if (sscanf(s, " %63[^=]=%lld%n", key, &want, &used) != 2)
			break;
		s += used;
		if (stat_of(line, key) != want)
			FAIL("counter %s %lld, want %lld [%s]", key, stat_of(line, key), want, line);
	}
	ibv_destroy_cq(cq);
	printf("%s %s: %s -> %s after %llu ms, %u request(s)\n", ok ? "PASS" : "FAIL", k->name, k->what,
	       got ? ibv_wc_status_str(wc.status) : "nothing", (unsigned long long)(t_done - t0), reqs);
	fflush(stdout);
	return ok;
#undef FAIL
}

int main(int argc, char **argv)
{
	const char *ns = getenv("RC_READRESP_PEER_NS"), *dev = getenv("RC_READRESP_DEV");
	struct qpside q = { 0 };
	struct peer pr = { .fd = -1 };
	unsigned failed = 0;

	if (argc < 2 || !ns) {
		fprintf(stderr, "usage: RC_READRESP_PEER_NS=/run/netns/NAME rc_readresp CASE... | all\n");
		return 2;
	}
	/* The engine prints each QP's counters when it goes (rc_qp.c, print_stats). */
	setenv("UROCE_RC_STATS", "1", 1);
	pr.fd = peer_socket(ns);
	pr.to.sin_family = AF_INET;
	pr.to.sin_port = htons(4791);
	inet_pton(AF_INET, ADDR_UROCE, &pr.to.sin_addr);
	pr.tx.family = AF_INET;
	inet_pton(AF_INET, ADDR_PEER, &pr.tx.src.v4);
	inet_pton(AF_INET, ADDR_UROCE, &pr.tx.dst.v4);
	pr.tx.sport = 4791;
	pr.tx.dport = 4791;
	open_dev(&q, dev ? dev : "uroce1");
	for (int i = 1; i < argc; i++) {
		bool all = !strcmp(argv[i], "all"), found = all;

		for (int c = 0; c < C_NUM; c++) {
			if (!all && strcmp(argv[i], cases[c].name))
				continue;
			found = true;
			if (!run_case((enum case_id)c, &q, &pr))
				failed++;
		}
		if (!found)
			die("no case %s", argv[i]);
	}
	ibv_dereg_mr(q.mr);
	ibv_dealloc_pd(q.pd);
	ibv_close_device(q.ctx);
	if (failed)
		fprintf(stderr, "%u case(s) failed\n", failed);
	return failed ? 1 : 0;
}
