/* rc_stress.c — two processes, plain verbs (libibverbs API, run on uroce's library), one RC
 * QP each, connected over a socketpair.  The parent is the requester, the child the target.
 *
 *   rc_stress data MIB NATOMICS   MIB MiB each by SEND, RDMA WRITE (with immediate, so the
 *                                 child can check the bytes) and RDMA READ; every byte is
 *                                 checked; then NATOMICS fetch-and-adds and as many
 *                                 compare-and-swaps (a chain: each succeeds only if none
 *                                 before it ran twice), with every returned original value
 *                                 checked and the final values read back
 *   rc_stress kill                the child is killed (SIGKILL) in the middle of a transfer:
 *                                 the parent's WQEs must end with RETRY_EXC_ERR within the
 *                                 bound timeout and retry_cnt imply, the QP in Error, every
 *                                 later WQE flushed
 *
 * Run it under UROCE_FAULT (netio's fault injection, both processes) to exercise recovery.
 * Exit 0 on success; every failure prints what and where.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1u << 20)
#define NSLOT 8                       /* chunks in flight */
#define TIMEOUT 12                    /* kill mode: 4.096 us * 2^12 = 16.8 ms */
#define TIMEOUT_DATA 8                /* data mode: 1.05 ms, quick recovery under faults */

static const char *who = "?";
#define DIE(...) do { fprintf(stderr, "rc_stress %s: ", who); fprintf(stderr, __VA_ARGS__); \
		      fputc('\n', stderr); exit(1); } while (0)
#include "rc_pair.h"

struct node {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;                     /* NSLOT chunks + 64 bytes of atomic targets */
	size_t len;
	struct peer me, other;
	int sock;
};

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

static bool check(const uint8_t *p, size_t n, uint64_t seed)
{
	static uint8_t *ref;

	if (!ref)
		ref = malloc(CHUNK);
	fill(ref, n, seed);
	return memcmp(ref, p, n) == 0;
}

static void setup(struct node *n)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_qp_attr a = { 0 };

	if (!list || !list[0])
		DIE("no device");
	n->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!n->ctx)
		DIE("open device");
	n->pd = ibv_alloc_pd(n->ctx);
	n->cq = ibv_create_cq(n->ctx, 4 * NSLOT + 64, NULL, NULL, 0);
	n->len = (size_t)NSLOT * CHUNK + 64;
	n->buf = aligned_alloc(4096, (n->len + 4095) & ~(size_t)4095);
	memset(n->buf, 0, n->len);
	n->mr = ibv_reg_mr(n->pd, n->buf, n->len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!n->pd || !n->cq || !n->mr)
		DIE("pd/cq/mr");
	qa.send_cq = qa.recv_cq = n->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 2 * NSLOT + 16;
	qa.cap.max_recv_wr = 2 * NSLOT + 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	n->qp = ibv_create_qp(n->pd, &qa);
	if (!n->qp)
		DIE("create qp: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("to init");
	if (ibv_query_gid(n->ctx, 1, 0, &n->me.gid))
		DIE("gid");
	n->me.qpn = n->qp->qp_num;
	n->me.psn = (uint32_t)(now_ns() & 0xFFFFFF);
	n->me.rkey = n->mr->rkey;
	n->me.addr = (uintptr_t)n->buf;
}

static void connect_qp(struct node *n, uint8_t retry_cnt, uint8_t timeout)
{
	xfer(n->sock, &n->me, sizeof(n->me), true);
	xfer(n->sock, &n->other, sizeof(n->other), false);
	rc_pair_connect(n->qp, n->other.qpn, n->other.psn, &n->other.gid, n->me.psn, timeout,
			retry_cnt);
}

static void post_send(struct node *n, enum ibv_wr_opcode op, uint64_t id, void *addr, uint32_t len,
		      uint64_t raddr, uint32_t imm, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge s = { (uintptr_t)addr, len, n->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(imm) }, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = n->other.rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = n->other.rkey;
	}
	if (ibv_post_send(n->qp, &wr, &bad))
		DIE("post_send op %d: %s", op, strerror(errno));
}

static void post_recv(struct node *n, uint64_t id, void *addr, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)addr, len, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;

	if (ibv_post_recv(n->qp, &wr, &bad))
		DIE("post_recv: %s", strerror(errno));
}


static void expect_ok(const struct ibv_wc *wc, const char *what)
{
	if (wc->status != IBV_WC_SUCCESS)
		DIE("%s: wr %llu status %s", what, (unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status));
}

#define LIMIT (300ull * 1000000000ull)

/* ---- the child: receives, checks, exposes its memory ---- */
static void target(struct node *n, unsigned mib)
{
	unsigned got = 0, total = 2 * mib;   /* SEND chunks, then WRITE-with-imm chunks */
	uint8_t done;

	for (unsigned i = 0; i < NSLOT; i++)
		post_recv(n, i, n->buf + (size_t)i * CHUNK, CHUNK);
	while (got < total) {
		struct ibv_wc wc = rc_pair_wait_wc(n->cq, LIMIT);
		uint64_t slot = wc.wr_id;

		expect_ok(&wc, "target receive");
		if (wc.opcode == IBV_WC_RECV) {
			if (wc.byte_len != CHUNK || !check(n->buf + slot * CHUNK, CHUNK, got))
				DIE("SEND chunk %u: wrong data (len %u)", got, wc.byte_len);
		} else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			uint32_t idx = be32toh(wc.imm_data);

			if (idx != got - mib || !check(n->buf + (size_t)(idx % NSLOT) * CHUNK, CHUNK, 1000000 + idx))
				DIE("WRITE chunk %u (imm %u): wrong data", got - mib, idx);
			/* Checked: the parent may reuse the slot. */
			done = 1;
			xfer(n->sock, &done, 1, true);
		} else {
			DIE("unexpected opcode %d", wc.opcode);
		}
		got++;
		post_recv(n, slot, n->buf + slot * CHUNK, CHUNK);
		if (got == mib) {
			/* Between phases: tell the parent the receive side is drained. */
			done = 1;
			xfer(n->sock, &done, 1, true);
		}
	}
	/* READ phase: the parent reads chunks we fill on request. */
	for (;;) {
		uint32_t idx;

		xfer(n->sock, &idx, sizeof(idx), false);
		if (idx == UINT32_MAX)
			break;
		fill(n->buf + (size_t)(idx % NSLOT) * CHUNK, CHUNK, 2000000 + idx);
		done = 1;
		xfer(n->sock, &done, 1, true);
	}
	done = 1;
	xfer(n->sock, &done, 1, true);
	/* Stay until the parent is done with our memory (atomics, final reads). */
	xfer(n->sock, &done, 1, false);
}

static void requester(struct node *n, unsigned mib, unsigned natomics)
{
	uint8_t tok;
	uint64_t t0 = now_ns(), *res = (uint64_t *)(void *)(n->buf + (size_t)NSLOT * CHUNK);
	uint64_t raddr_atom = n->other.addr + (size_t)NSLOT * CHUNK;

	/* SEND: NSLOT chunks in flight; the child checks each. */
	for (unsigned i = 0, done = 0; done < mib;) {
		while (i < mib && i - done < NSLOT) {
			uint8_t *p = n->buf + (size_t)(i % NSLOT) * CHUNK;

			fill(p, CHUNK, i);
			post_send(n, IBV_WR_SEND, i, p, CHUNK, 0, 0, 0, 0);
			i++;
		}
		expect_ok((struct ibv_wc[]){ rc_pair_wait_wc(n->cq, LIMIT) }, "SEND");
		done++;
	}
	xfer(n->sock, &tok, 1, false);
	fprintf(stderr, "rc_stress: SEND %u MiB checked (%.1f s)\n", mib, (now_ns() - t0) / 1e9);
	t0 = now_ns();
	/* WRITE with immediate into the child's slot idx % NSLOT; the immediate tells the child
	 * which chunk to check.  One slot per chunk in flight (the child reposts in order). */
	for (unsigned i = 0, done = 0; done < mib;) {
		while (i < mib && i - done < NSLOT) {
			uint8_t *p = n->buf + (size_t)(i % NSLOT) * CHUNK;

			if (i >= NSLOT)     /* the child checked chunk i - NSLOT: its slot is free */
				xfer(n->sock, &tok, 1, false);
			fill(p, CHUNK, 1000000 + i);
			post_send(n, IBV_WR_RDMA_WRITE_WITH_IMM, i, p, CHUNK,
				  n->other.addr + (size_t)(i % NSLOT) * CHUNK, i, 0, 0);
			i++;
		}
		expect_ok((struct ibv_wc[]){ rc_pair_wait_wc(n->cq, LIMIT) }, "WRITE");
		done++;
	}
	for (unsigned i = mib > NSLOT ? mib - NSLOT : 0; i < mib; i++)
		xfer(n->sock, &tok, 1, false);
	fprintf(stderr, "rc_stress: WRITE %u MiB checked (%.1f s)\n", mib, (now_ns() - t0) / 1e9);
	t0 = now_ns();
	/* READ: ask the child to fill NSLOT chunks, read them all back, check. */
	for (unsigned i = 0; i < mib; i += NSLOT) {
		unsigned k = mib - i < NSLOT ? mib - i : NSLOT;

		for (unsigned j = 0; j < k; j++) {
			uint32_t idx = i + j;

			xfer(n->sock, &idx, sizeof(idx), true);
			xfer(n->sock, &tok, 1, false);
		}
		for (unsigned j = 0; j < k; j++) {
			memset(n->buf + (size_t)j * CHUNK, 0, CHUNK);
			post_send(n, IBV_WR_RDMA_READ, j, n->buf + (size_t)j * CHUNK, CHUNK,
				  n->other.addr + (size_t)((i + j) % NSLOT) * CHUNK, 0, 0, 0);
		}
		for (unsigned j = 0; j < k; j++)
			expect_ok((struct ibv_wc[]){ rc_pair_wait_wc(n->cq, LIMIT) }, "READ");
		for (unsigned j = 0; j < k; j++)
			if (!check(n->buf + (size_t)j * CHUNK, CHUNK, 2000000 + i + j))
				DIE("READ chunk %u: wrong data", i + j);
	}
	{
		uint32_t end = UINT32_MAX;

		xfer(n->sock, &end, sizeof(end), true);
		xfer(n->sock, &tok, 1, false);
	}
	fprintf(stderr, "rc_stress: READ %u MiB checked (%.1f s)\n", mib, (now_ns() - t0) / 1e9);
	t0 = now_ns();
	/* Atomics: 4 in flight at a time, alternating FA(+1) on word 0 and a CAS chain on
	 * word 1 (expected value = number of earlier CASes).  In-order execution makes every
	 * original value predictable; a duplicate executed twice would shift them all. */
	for (unsigned i = 0; i < natomics; i += 4) {
		for (unsigned j = 0; j < 4; j++) {
			unsigned k = i + j;

			if (k & 1)
				post_send(n, IBV_WR_ATOMIC_CMP_AND_SWP, j, &res[j], 8, raddr_atom + 8, 0, k / 2,
					  k / 2 + 1);
			else
				post_send(n, IBV_WR_ATOMIC_FETCH_AND_ADD, j, &res[j], 8, raddr_atom, 0, 1, 0);
		}
		for (unsigned j = 0; j < 4; j++) {
			struct ibv_wc wc = rc_pair_wait_wc(n->cq, LIMIT);
			unsigned k = i + (unsigned)wc.wr_id;

			expect_ok(&wc, "atomic");
			if (res[wc.wr_id] != k / 2)
				DIE("atomic %u (%s): original %llu, want %u", k, k & 1 ? "CAS" : "FA",
				    (unsigned long long)res[wc.wr_id], k / 2);
		}
	}
	/* Read the final values back. */
	post_send(n, IBV_WR_RDMA_READ, 99, &res[4], 16, raddr_atom, 0, 0, 0);
	expect_ok((struct ibv_wc[]){ rc_pair_wait_wc(n->cq, LIMIT) }, "final READ");
	if (res[4] != (natomics + 1) / 2 || res[5] != natomics / 2)
		DIE("final values %llu %llu, want %u %u", (unsigned long long)res[4],
		    (unsigned long long)res[5], (natomics + 1) / 2, natomics / 2);
	fprintf(stderr, "rc_stress: %u fetch-add + %u compare-swap, each ran once (%.1f s)\n",
		(natomics + 1) / 2, natomics / 2, (now_ns() - t0) / 1e9);
	tok = 1;
	xfer(n->sock, &tok, 1, true);
}

/* ---- kill mode ---- */
static void kill_test(struct node *n, pid_t child)
{
	/* retry_cnt 3: the first attempt and 3 retries, each one local ACK timeout. */
	const uint64_t T = 4096ull << TIMEOUT, bound = 4 * T + T + 250000000ull;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	uint64_t t0;
	unsigned flushed = 0, retry_exc = 0;

	/* Traffic flows... */
	for (unsigned i = 0; i < 8; i++) {
		post_send(n, IBV_WR_RDMA_WRITE, i, n->buf, CHUNK, n->other.addr, 0, 0, 0);
		expect_ok((struct ibv_wc[]){ rc_pair_wait_wc(n->cq, LIMIT) }, "WRITE before the kill");
	}
	/* ...then the peer dies with requests in flight. */
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	t0 = now_ns();
	for (unsigned i = 0; i < NSLOT; i++)
		post_send(n, IBV_WR_RDMA_WRITE, 100 + i, n->buf + (size_t)i * CHUNK, CHUNK, n->other.addr, 0, 0, 0);
	for (unsigned i = 0; i < NSLOT; i++) {
		struct ibv_wc wc = rc_pair_wait_wc(n->cq, 10ull * bound);

		if (i == 0 && wc.status == IBV_WC_RETRY_EXC_ERR) {
			uint64_t dt = now_ns() - t0;

			retry_exc++;
			fprintf(stderr, "rc_stress: RETRY_EXC_ERR after %.1f ms (timeout %.1f ms x 4, bound %.1f ms)\n",
				dt / 1e6, T / 1e6, bound / 1e6);
			if (dt > bound)
				DIE("RETRY_EXC_ERR after %.1f ms, bound %.1f ms", dt / 1e6, bound / 1e6);
			if (dt < 4 * T)
				DIE("RETRY_EXC_ERR after %.1f ms, before 4 timeouts (%.1f ms)", dt / 1e6, 4 * T / 1e6);
		} else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
			flushed++;
		} else {
			DIE("completion %u: %s", i, ibv_wc_status_str(wc.status));
		}
	}
	if (retry_exc != 1 || flushed != NSLOT - 1)
		DIE("%u RETRY_EXC_ERR, %u flushed", retry_exc, flushed);
	if (ibv_query_qp(n->qp, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_ERR)
		DIE("QP not in Error");
	/* A WR posted now completes with a flush error at once (IBA 10.8.3). */
	post_send(n, IBV_WR_SEND, 200, n->buf, 8, 0, 0, 0, 0);
	if (rc_pair_wait_wc(n->cq, 1000000000ull).status != IBV_WC_WR_FLUSH_ERR)
		DIE("post in Error did not flush");
	fprintf(stderr, "rc_stress: peer killed: 1 RETRY_EXC_ERR, %u flushed, QP in Error\n", flushed);
}

int main(int argc, char **argv)
{
	int sv[2];
	bool kill_mode = argc > 1 && !strcmp(argv[1], "kill");
	unsigned mib = argc > 2 ? (unsigned)atoi(argv[2]) : 64;
	unsigned natomics = argc > 3 ? (unsigned)atoi(argv[3]) : 10000;
	struct node n = { 0 };
	pid_t child;

	if (argc < 2 || (!kill_mode && strcmp(argv[1], "data"))) {
		fprintf(stderr, "usage: rc_stress data MIB NATOMICS | rc_stress kill\n");
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		DIE("socketpair");
	child = fork();
	if (child < 0)
		DIE("fork");
	who = child ? "requester" : "target";
	n.sock = child ? sv[0] : sv[1];
	close(child ? sv[1] : sv[0]);
	setup(&n);
	connect_qp(&n, kill_mode ? 3 : 7, kill_mode ? TIMEOUT : TIMEOUT_DATA);
	if (!child) {
		if (kill_mode)
			for (;;)
				pause();
		target(&n, mib);
		return 0;
	}
	if (kill_mode) {
		kill_test(&n, child);
		return 0;
	}
	requester(&n, mib, natomics);
	{
		int st;

		if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
			DIE("target failed");
	}
	fprintf(stderr, "rc_stress: PASS\n");
	return 0;
}
