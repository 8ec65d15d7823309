/* udp_pingpong — the latency peer of ib_write_lat (bench/run.sh): two processes bounce a
 * datagram of SIZE bytes over UDP, each busy-polling a non-blocking socket, as perftest's
 * ib_write_lat busy-polls its memory and CQ.
 *
 *   udp_pingpong -s [-p PORT] [-T]                              server: echo until the client says stop
 *   udp_pingpong -c HOST [-p PORT] [-z SIZE] [-n ITERS] [-w WARMUP] [-T]
 *
 * -T (either side, independently) mimics uroce's structure instead of a plain busy poll: a
 * second thread sleeps in a blocking recv() and hands each datagram over through memory to
 * the main thread, which spins on it (as ib_write_lat spins on its buffer while uroce's
 * progress thread places the WRITE).  Pinned with taskset, both threads share one CPU, so
 * every datagram costs a wake-up on a CPU that is busy spinning: the floor of that design.
 *
 * The client prints, like perftest, half the round trip (one-way latency) in microseconds:
 *   udp_pingpong bytes=2 iters=N t_min=.. t_typical=.. t_avg=.. t_p99=..
 * t_typical is the median, which is what ib_write_lat calls t_typical.
 * Exit 0 on success; 1 on a socket error or when the server does not answer within 10 s.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pingpong_util.h"

#define MAX_SIZE 65507
#define STOP_BYTE 0xEE /* first byte of the client's last datagram: the server exits */

static void usage(void)
{
	fprintf(stderr, "usage: udp_pingpong -s [-p PORT] [-T] | -c HOST [-p PORT] [-z SIZE] [-n ITERS] [-w WARMUP] [-T]\n");
	exit(2);
}

/* Busy-poll a non-blocking socket until a datagram arrives or deadline_ns passes.
 * Returns the datagram length, or -1 (errno set; ETIMEDOUT past the deadline). */
static ssize_t spin_recv(int fd, void *buf, size_t len, struct sockaddr_storage *from, socklen_t *flen,
			 uint64_t deadline_ns)
{
	for (unsigned spins = 0;; spins++) {
		ssize_t n = recvfrom(fd, buf, len, 0, (struct sockaddr *)from, flen);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if ((spins & 1023) == 1023 && deadline_ns && now_ns() > deadline_ns) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
}

/* -T: a thread sleeping in poll() receives each datagram and hands it to the spinning main
 * thread through a ring in memory (like a CQ).  It never waits for the main thread: with
 * both on one CPU a waiting spinner would hold the CPU the other one needs. */
#define HO_SLOTS 16
static struct {
	int fd;
	_Atomic unsigned head;             /* written by the receiving thread */
	unsigned tail;                     /* main thread */
	struct {
		ssize_t len;
		socklen_t flen;
		struct sockaddr_storage from;
		uint8_t buf[MAX_SIZE];
	} slot[HO_SLOTS];
} ho;

static void *handoff_thread(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pfd = { .fd = ho.fd, .events = POLLIN };
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return NULL;
		unsigned h = atomic_load_explicit(&ho.head, memory_order_relaxed);
		if (h - ho.tail >= HO_SLOTS) { /* full: cannot happen in a ping-pong; drop */
			uint8_t junk[1];
			recv(ho.fd, junk, sizeof(junk), MSG_DONTWAIT);
			continue;
		}
		__typeof__(ho.slot[0]) *sl = &ho.slot[h % HO_SLOTS];
		sl->flen = sizeof(sl->from);
		sl->len = recvfrom(ho.fd, sl->buf, sizeof(sl->buf), 0, (struct sockaddr *)&sl->from, &sl->flen);
		if (sl->len < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		atomic_store_explicit(&ho.head, h + 1, memory_order_release);
		if (sl->len < 0)
			return NULL;
	}
}

static int handoff_start(int fd)
{
	pthread_t t;

	ho.fd = fd;
	return pthread_create(&t, NULL, handoff_thread, NULL) ? -1 : 0;
}

/* Spin until the hand-off thread delivers; same contract as spin_recv. */
static ssize_t handoff_recv(void *buf, struct sockaddr_storage *from, socklen_t *flen, uint64_t deadline_ns)
{
	for (unsigned spins = 0;; spins++) {
		if (atomic_load_explicit(&ho.head, memory_order_acquire) != ho.tail) {
			__typeof__(ho.slot[0]) *sl = &ho.slot[ho.tail % HO_SLOTS];
			ssize_t n = sl->len;
			if (n > 0) {
				memcpy(buf, sl->buf, (size_t)n);
				memcpy(from, &sl->from, sl->flen);
				*flen = sl->flen;
			}
			ho.tail++;
			return n;
		}
		if ((spins & 1023) == 1023 && deadline_ns && now_ns() > deadline_ns) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
}

static int server(const char *port, int handoff)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM, .ai_flags = AI_PASSIVE }, *ai;
	if (getaddrinfo(NULL, port, &hints, &ai) != 0)
		return 1;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		perror("udp_pingpong: bind");
		return 1;
	}
	freeaddrinfo(ai);
	if (handoff && handoff_start(fd) < 0) {
		perror("udp_pingpong: thread");
		return 1;
	}
	static uint8_t buf[MAX_SIZE];
	for (;;) {
		struct sockaddr_storage from;
		socklen_t flen = sizeof(from);
		ssize_t n = handoff ? handoff_recv(buf, &from, &flen, 0)
				    : spin_recv(fd, buf, sizeof(buf), &from, &flen, 0);
		if (n < 0) {
			perror("udp_pingpong: recv");
			return 1;
		}
		if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, flen) < 0) {
			perror("udp_pingpong: send");
			return 1;
		}
		if (n > 0 && buf[0] == STOP_BYTE)
			return 0;
	}
}

static int client(const char *host, const char *port, size_t size, unsigned iters, unsigned warmup, int handoff)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0) {
		fprintf(stderr, "udp_pingpong: cannot resolve %s\n", host);
		return 1;
	}
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		perror("udp_pingpong: connect");
		return 1;
	}
	freeaddrinfo(ai);
	static uint8_t buf[MAX_SIZE], rbuf[MAX_SIZE];
	memset(buf, 0x5A, size);
	struct sockaddr_storage from;
	socklen_t flen;

	/* Handshake: the server may not be bound yet; repeat until one echo returns
	 * (a refused send while it is not bound is expected). */
	uint64_t give_up = now_ns() + 10000000000ull;
	for (;;) {
		if (send(fd, buf, size, 0) < 0 && errno != ECONNREFUSED) {
			perror("udp_pingpong: send");
			return 1;
		}
		flen = sizeof(from);
		ssize_t n = spin_recv(fd, rbuf, sizeof(rbuf), &from, &flen, now_ns() + 20000000ull);
		if (n == (ssize_t)size)
			break;
		if (n < 0 && errno != ETIMEDOUT && errno != ECONNREFUSED) {
			perror("udp_pingpong: recv");
			return 1;
		}
		if (now_ns() > give_up) {
			fprintf(stderr, "udp_pingpong: no server at %s:%s\n", host, port);
			return 1;
		}
	}
	/* Drain late echoes of the handshake so each measured receive is its own reply. */
	flen = sizeof(from);
	while (recvfrom(fd, rbuf, sizeof(rbuf), 0, (struct sockaddr *)&from, &flen) >= 0)
		flen = sizeof(from);

	uint64_t *t = calloc(iters, sizeof(*t));
	if (!t)
		return 1;
	if (handoff && handoff_start(fd) < 0) {
		perror("udp_pingpong: thread");
		return 1;
	}
	for (unsigned i = 0; i < warmup + iters; i++) {
		uint64_t t0 = now_ns();
		if (send(fd, buf, size, 0) < 0) {
			perror("udp_pingpong: send");
			return 1;
		}
		flen = sizeof(from);
		ssize_t n = handoff ? handoff_recv(rbuf, &from, &flen, t0 + 10000000000ull)
				    : spin_recv(fd, rbuf, sizeof(rbuf), &from, &flen, t0 + 10000000000ull);
		if (n < 0) {
			perror("udp_pingpong: recv");
			return 1;
		}
		if (i >= warmup)
			t[i - warmup] = now_ns() - t0;
	}
	buf[0] = STOP_BYTE;
	send(fd, buf, size, 0);

	char what[64];

	snprintf(what, sizeof(what), "udp_pingpong%s bytes=%zu iters=%u", handoff ? " handoff" : "", size, iters);
	report_half_rtt(what, t, iters);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = "18600";
	int srv = 0, handoff = 0, opt;
	size_t size = 2;
	unsigned iters = 10000, warmup = 1000;
	while ((opt = getopt(argc, argv, "sc:p:z:n:w:T")) != -1) {
		switch (opt) {
		case 's': srv = 1; break;
		case 'c': host = optarg; break;
		case 'p': port = optarg; break;
		case 'z': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'w': warmup = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'T': handoff = 1; break;
		default: usage();
		}
	}
	if (srv == !!host || size < 1 || size > MAX_SIZE || iters < 1)
		usage();
	return srv ? server(port, handoff) : client(host, port, size, iters, warmup, handoff);
}
