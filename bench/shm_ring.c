/* shm_ring — the shared-memory ceiling of bench/run.sh: two processes and a ring in a memfd,
 * no RDMA, no protocol.  What uroce's shared-memory link (src/transport/shm.c) is measured
 * against: the same copies through the same kind of ring, and nothing else.
 *
 *   shm_ring bw   [-s SIZE] [-k PKT] [-r RING_KB] [-d SECS] [-P CPU,CPU]
 *        messages of SIZE bytes (default 65536) cut into PKT-byte records (default 4096, a
 *        RoCE MTU) with a 64-byte header each, as uroce's link carries a WRITE's packets:
 *        the producer copies each from its private buffer into the ring, the consumer from
 *        the ring into its private buffer (two copies).  Prints the consumer's Gbit/s.
 *   shm_ring rate [-s SIZE] ...
 *        the same with SIZE-byte messages (default 64), one record each: messages per
 *        second (Mpps), the ceiling of a message-rate test.
 *   shm_ring lat  [-s SIZE] [-n ITERS] [-P CPU,CPU]
 *        a ping-pong of SIZE-byte messages (default 8) through two rings, both processes
 *        busy-polling: the one-way time (half the round trip) in microseconds, median.
 *   shm_ring vmwrite [-s SIZE] [-d SECS] [-P CPU,CPU]
 *        one copy: the producer writes each message straight into the consumer's buffer
 *        with process_vm_writev(2) and then publishes a sequence number in the shared
 *        page; the consumer only waits for it.  The alternative the design notes weigh
 *        against a ring (../shared/notes/same-host.md).
 *
 * The parent is the consumer (first CPU of -P), the child the producer (second).  Default
 * pinning 0,1.  Exit 0 with one result line on stdout:
 *   shm_ring bw size=65536 pkt=4096 ring_kb=4096 secs=3.00 gbps=... gbytes_per_s=...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pingpong_util.h"

#define ALIGN 64u
#define HDR 64u

struct ring {
	_Alignas(64) _Atomic uint64_t tail;
	_Alignas(64) _Atomic uint64_t head;
	_Alignas(64) uint8_t data[];
};

struct shared {
	_Alignas(64) _Atomic int stop;
	_Alignas(64) _Atomic uint64_t seq;   /* vmwrite: messages written */
	_Alignas(64) _Atomic uint64_t ack;   /* vmwrite: messages the consumer saw */
	_Alignas(64) uint8_t *dst;           /* vmwrite: the consumer's buffer (its address) */
	pid_t consumer;
};

static size_t ring_bytes = 4u << 20, msg = 0, pkt = 4096;
static double secs = 3;
static unsigned iters = 20000;
static int cpu[2] = { 0, 1 };

static void pin(int c)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(c, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		perror("shm_ring: sched_setaffinity");
}

static void *map_shared(size_t len)
{
	int fd = memfd_create("shm_ring", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		perror("shm_ring: memfd");
		exit(1);
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("shm_ring: mmap");
		exit(1);
	}
	close(fd);
	return p;
}

/* Spin politely: the other side's cache line is what we wait on. */
static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline size_t rec_size(size_t len)
{
	return (HDR + len + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

/* Producer: one record of @len bytes from @src (a wrap marker first if needed).  Spins
 * while full; returns 0, or -1 when told to stop. */
static int put(struct ring *r, uint64_t *tail, uint64_t *seen, const uint8_t *src, size_t len,
	       const _Atomic int *stop)
{
	size_t need = rec_size(len), off = *tail & (ring_bytes - 1), contig = ring_bytes - off;
	size_t want = need <= contig ? need : contig + need;

	while (ring_bytes - (*tail - *seen) < want) {
		relax();
		*seen = atomic_load_explicit(&r->head, memory_order_acquire);
		if (atomic_load_explicit(stop, memory_order_relaxed))
			return -1;
	}
	if (need > contig) {
		*(uint32_t *)(void *)(r->data + off) = 0xFFFFFFFFu;
		*tail += contig;
		off = 0;
	}
	*(uint32_t *)(void *)(r->data + off) = (uint32_t)len;
	memcpy(r->data + off + HDR, src, len);
	*tail += need;
	return 0;
}

/* Consumer: the next record into @dst; its length, or 0 if none is there yet. */
static size_t get(struct ring *r, uint64_t *head, uint64_t tail, uint8_t *dst)
{
	while (*head != tail) {
		size_t off = *head & (ring_bytes - 1);
		uint32_t len = *(uint32_t *)(void *)(r->data + off);

		if (len == 0xFFFFFFFFu) {
			*head += ring_bytes - off;
			continue;
		}
		memcpy(dst, r->data + off + HDR, len);
		*head += rec_size(len);
		return len;
	}
	return 0;
}

static void producer_bw(struct ring *r, struct shared *sh)
{
	uint8_t *src = malloc(msg);
	uint64_t tail = 0, seen = 0;

	memset(src, 0x5A, msg);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		for (size_t off = 0; off < msg; off += pkt) {
			size_t len = msg - off < pkt ? msg - off : pkt;

			if (put(r, &tail, &seen, src + off, len, &sh->stop))
				return;
		}
		/* Published once a message, as uroce publishes a batch. */
		atomic_store_explicit(&r->tail, tail, memory_order_release);
	}
}

static int run_bw(const char *what)
{
	struct ring *r = map_shared(sizeof(struct ring) + ring_bytes);
	struct shared *sh = map_shared(sizeof(*sh));
	uint8_t *dst = malloc(msg + pkt);
	uint64_t head = 0, bytes = 0, msgs = 0, t0, t1 = 0, published = 0;
	pid_t child = fork();

	if (child < 0)
		return 1;
	if (!child) {
		pin(cpu[1]);
		producer_bw(r, sh);
		_exit(0);
	}
	pin(cpu[0]);
	/* Warm up a quarter of a second, then measure. */
	t0 = now_ns();
	for (uint64_t start = 0, warm = t0 + 250000000ull;;) {
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
		size_t len;

		unsigned since = 0;

		while ((len = get(r, &head, tail, dst))) {
			bytes += len;
			msgs++;   /* records: messages in rate mode */
			/* head published every 16 records, as uroce's consumer does */
			if (++since == 16) {
				atomic_store_explicit(&r->head, head, memory_order_release);
				published = head;
				since = 0;
			}
		}
		if (head != published) {
			atomic_store_explicit(&r->head, head, memory_order_release);
			published = head;
		}
		if (head == tail)
			relax();
		t1 = now_ns();
		if (!start && t1 >= warm) {
			start = t1;
			t0 = t1;
			bytes = msgs = 0;
		}
		if (start && t1 - start >= (uint64_t)(secs * 1e9))
			break;
	}
	atomic_store(&sh->stop, 1);
	waitpid(child, NULL, 0);
	{
		double s = (double)(t1 - t0) / 1e9;

		if (!strcmp(what, "rate"))
			printf("shm_ring rate size=%zu ring_kb=%zu secs=%.2f mpps=%.3f\n", msg, ring_bytes >> 10,
			       s, (double)msgs / s / 1e6);
		else
			printf("shm_ring bw size=%zu pkt=%zu ring_kb=%zu secs=%.2f gbps=%.2f gbytes_per_s=%.2f\n",
			       msg, pkt, ring_bytes >> 10, s, (double)bytes * 8 / s / 1e9, (double)bytes / s / 1e9);
	}
	return 0;
}

/* Latency: ring a carries ping (child -> parent), ring b pong. */
static int run_lat(void)
{
	struct ring *a = map_shared(sizeof(struct ring) + ring_bytes);
	struct ring *b = map_shared(sizeof(struct ring) + ring_bytes);
	struct shared *sh = map_shared(sizeof(*sh));
	uint8_t buf[4096] = { 0 };
	uint64_t *t = calloc(iters, sizeof(*t));
	pid_t child;

	if (msg > sizeof(buf))
		msg = sizeof(buf);
	child = fork();
	if (child < 0)
		return 1;
	if (!child) {
		uint64_t head = 0, tail = 0, seen = 0;

		pin(cpu[1]);
		for (unsigned i = 0; i < iters + 100; i++) {
			uint64_t t0 = now_ns();

			if (put(a, &tail, &seen, buf, msg, &sh->stop))
				_exit(1);
			atomic_store_explicit(&a->tail, tail, memory_order_release);
			while (!get(b, &head, atomic_load_explicit(&b->tail, memory_order_acquire), buf))
				;
			atomic_store_explicit(&b->head, head, memory_order_release);
			if (i >= 100)
				t[i - 100] = now_ns() - t0;
		}
		report_half_rtt("shm_ring lat", t, iters);
		fflush(stdout);
		_exit(0);
	}
	pin(cpu[0]);
	{
		uint64_t head = 0, tail = 0, seen = 0;
		int status;

		for (unsigned i = 0; i < iters + 100; i++) {
			while (!get(a, &head, atomic_load_explicit(&a->tail, memory_order_acquire), buf))
				;
			atomic_store_explicit(&a->head, head, memory_order_release);
			if (put(b, &tail, &seen, buf, msg, &sh->stop))
				return 1;
			atomic_store_explicit(&b->tail, tail, memory_order_release);
		}
		waitpid(child, &status, 0);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
}

/* One copy: the producer writes into the consumer's buffer with process_vm_writev. */
static int run_vmwrite(void)
{
	struct shared *sh = map_shared(sizeof(*sh));
	size_t nbuf = 8;   /* messages in flight, like a send queue */
	uint8_t *dst = malloc(msg * nbuf);
	uint64_t t0, t1, seq = 0, n0 = 0;
	pid_t child;

	memset(dst, 0, msg * nbuf);
	sh->dst = dst;
	sh->consumer = getpid();
	child = fork();
	if (child < 0)
		return 1;
	if (!child) {
		uint8_t *src = malloc(msg);

		pin(cpu[1]);
		memset(src, 0x5A, msg);
		for (uint64_t s = 0; !atomic_load_explicit(&sh->stop, memory_order_relaxed); s++) {
			struct iovec l = { src, msg }, rv = { sh->dst + (s % nbuf) * msg, msg };

			while (s - atomic_load_explicit(&sh->ack, memory_order_acquire) >= nbuf)
				if (atomic_load_explicit(&sh->stop, memory_order_relaxed))
					_exit(0);
			if (process_vm_writev(sh->consumer, &l, 1, &rv, 1, 0) != (ssize_t)msg) {
				perror("shm_ring: process_vm_writev");
				_exit(1);
			}
			atomic_store_explicit(&sh->seq, s + 1, memory_order_release);
		}
		_exit(0);
	}
	pin(cpu[0]);
	t0 = now_ns();
	for (uint64_t start = 0, warm = t0 + 250000000ull;;) {
		uint64_t s = atomic_load_explicit(&sh->seq, memory_order_acquire);

		if (s != seq) {
			seq = s;
			atomic_store_explicit(&sh->ack, seq, memory_order_release);
		}
		t1 = now_ns();
		if (!start && t1 >= warm) {
			start = t0 = t1;
			n0 = seq;
		}
		if (start && t1 - start >= (uint64_t)(secs * 1e9))
			break;
	}
	atomic_store(&sh->stop, 1);
	atomic_store(&sh->ack, UINT64_MAX / 2);
	{
		int status;

		waitpid(child, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			return 1;
	}
	{
		double s = (double)(t1 - t0) / 1e9, bytes = (double)(seq - n0) * (double)msg;

		printf("shm_ring vmwrite size=%zu secs=%.2f gbps=%.2f gbytes_per_s=%.2f\n", msg, s,
		       bytes * 8 / s / 1e9, bytes / s / 1e9);
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: shm_ring bw|rate|lat|vmwrite [-s SIZE] [-k PKT] [-r RING_KB] [-d SECS] "
			"[-n ITERS] [-P CPU,CPU]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *what;
	int opt;

	if (argc < 2)
		usage();
	what = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "s:k:r:d:n:P:")) != -1) {
		switch (opt) {
		case 's': msg = strtoul(optarg, NULL, 0); break;
		case 'k': pkt = strtoul(optarg, NULL, 0); break;
		case 'r': ring_bytes = strtoul(optarg, NULL, 0) << 10; break;
		case 'd': secs = atof(optarg); break;
		case 'n': iters = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'P':
			if (sscanf(optarg, "%d,%d", &cpu[0], &cpu[1]) != 2)
				usage();
			break;
		default: usage();
		}
	}
	if ((ring_bytes & (ring_bytes - 1)) || ring_bytes < (64u << 10) || !pkt || pkt > ring_bytes / 4)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(what, "bw")) {
		if (!msg)
			msg = 65536;
		return run_bw(what);
	}
	if (!strcmp(what, "rate")) {
		if (!msg)
			msg = 64;
		pkt = msg;
		return run_bw(what);
	}
	if (!strcmp(what, "lat")) {
		if (!msg)
			msg = 8;
		return run_lat();
	}
	if (!strcmp(what, "vmwrite")) {
		if (!msg)
			msg = 65536;
		return run_vmwrite();
	}
	usage();
	return 2;
}
