/* udp_roce_pp — a UDP ping-pong that sends and receives what uroce's ib_write_lat does, with
 * none of uroce: the kernel's share of a uroce half round trip (bench/run.sh, write_lat).
 *
 *   udp_roce_pp -s [-p PORT]                          server: echo until the client says stop
 *   udp_roce_pp -c HOST [-p PORT] [-n ITERS] [-w WARMUP]
 *
 * In uroce's ib_write_lat each hop is one sendmsg carrying two RoCEv2 packets as one UDP GSO
 * send: the 2-byte RDMA WRITE (BTH 12 + RETH 16 + 2 + pad 2 + ICRC 4 = 36 bytes of UDP
 * payload) and the held ACK of the peer's previous WRITE (BTH 12 + AETH 4 + ICRC 4 = 20
 * bytes), which the ACK deferral puts behind it (docs/transport.md).  The receiver busy-polls
 * recvmmsg on a dual-stack IPv6 socket with the options uroce's receive socket has for RC
 * (IPV6_RECVPKTINFO: the destination address, which the ICRC covers; UDP_GRO: the two
 * segments arrive as one buffer), asking for one datagram after an empty poll as uroce's
 * polling thread does.  Addresses are IPv4-mapped, like the GID uroce's benchmarks use.
 * The bytes are zeros: nothing is parsed, checked or placed.
 *
 * So uroce / udp_roce_pp is what uroce adds on top of the kernel for the same packets, and
 * udp_roce_pp / udp_pingpong is what those packets and sockets cost the kernel more than a
 * single plain datagram.  Output (half round trip, microseconds; t_typical = median):
 *   udp_roce_pp iters=N t_min=.. t_typical=.. t_avg=.. t_p99=..
 * Exit 0 on success, 1 on a socket error or when the server does not answer within 10 s.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pingpong_util.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define WRITE_LEN 36    /* UDP payload of a 2-byte RDMA WRITE Only */
#define ACK_LEN 20      /* UDP payload of an ACK */
#define SLOTS 16        /* receive slots, as uroce's RX_BATCH */
#define STOP_BYTE 0xEE  /* first byte of the client's last send: the server exits */

static void usage(void)
{
	fprintf(stderr, "usage: udp_roce_pp -s [-p PORT] | -c HOST [-p PORT] [-n ITERS] [-w WARMUP]\n");
	exit(2);
}

static uint8_t pkt[WRITE_LEN + ACK_LEN];
static uint8_t rbuf[SLOTS][2048];
static uint8_t rcmsg[SLOTS][256];
static struct sockaddr_in6 rname[SLOTS];
static struct iovec riov[SLOTS];
static struct mmsghdr rmsg[SLOTS];

static int open_socket(unsigned port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0), off = 0, on = 1;

	if (fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("udp_roce_pp: socket");
		exit(1);
	}
	for (int k = 0; k < SLOTS; k++) {
		riov[k] = (struct iovec){ rbuf[k], sizeof(rbuf[k]) };
		rmsg[k].msg_hdr = (struct msghdr){ .msg_name = &rname[k], .msg_iov = &riov[k],
						   .msg_iovlen = 1, .msg_control = rcmsg[k] };
	}
	return fd;
}

/* One hop: the WRITE and the ACK in one GSO send (segment size 36, the ACK the shorter
 * last segment). */
static int send_hop(int fd, const struct sockaddr_in6 *to, uint8_t first)
{
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} u;
	uint16_t seg = WRITE_LEN;
	struct iovec iov = { pkt, sizeof(pkt) };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = sizeof(*to), .msg_iov = &iov,
			    .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(&u, 0, sizeof(u));
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	pkt[0] = first;
	return sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* Busy-poll until a datagram comes (its first byte in *first, its sender in *from), or
 * until deadline_ns (0: none).  Like uroce's polling thread: one slot after an empty poll,
 * all of them otherwise.  0, or -1 with errno (ETIMEDOUT past the deadline). */
static int recv_hop(int fd, struct sockaddr_in6 *from, uint8_t *first, uint64_t deadline_ns)
{
	for (unsigned spins = 0;; spins++) {
		unsigned want = spins ? 1 : SLOTS;
		int got;

		for (unsigned k = 0; k < want; k++) {
			rmsg[k].msg_hdr.msg_namelen = sizeof(rname[k]);
			rmsg[k].msg_hdr.msg_controllen = sizeof(rcmsg[k]);
		}
		got = recvmmsg(fd, rmsg, want, MSG_DONTWAIT, NULL);
		if (got > 0) {
			*from = rname[0];
			*first = rbuf[0][0];
			return 0;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if ((spins & 1023) == 1023 && deadline_ns && now_ns() > deadline_ns) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
}

static int server(unsigned port)
{
	int fd = open_socket(port);

	for (;;) {
		struct sockaddr_in6 from;
		uint8_t first;

		if (recv_hop(fd, &from, &first, 0) < 0 || send_hop(fd, &from, first) < 0) {
			perror("udp_roce_pp: server");
			return 1;
		}
		if (first == STOP_BYTE)
			return 0;
	}
}

static int client(const char *host, unsigned port, unsigned iters, unsigned warmup)
{
	struct sockaddr_in6 to = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) }, from;
	struct in_addr v4;
	uint64_t *t, give_up = now_ns() + 10000000000ull;
	char what[48];
	uint8_t first;
	int fd;

	if (inet_pton(AF_INET, host, &v4) != 1) {
		fprintf(stderr, "udp_roce_pp: %s: an IPv4 address, please\n", host);
		return 1;
	}
	to.sin6_addr.s6_addr[10] = to.sin6_addr.s6_addr[11] = 0xFF;   /* IPv4-mapped */
	memcpy(&to.sin6_addr.s6_addr[12], &v4, 4);
	fd = open_socket(0);
	/* Handshake: repeat until one echo returns (the server may not be bound yet). */
	for (;;) {
		send_hop(fd, &to, 0);
		if (recv_hop(fd, &from, &first, now_ns() + 20000000ull) == 0)
			break;
		if (errno != ETIMEDOUT && errno != ECONNREFUSED) {
			perror("udp_roce_pp: recv");
			return 1;
		}
		if (now_ns() > give_up) {
			fprintf(stderr, "udp_roce_pp: no server at %s:%u\n", host, port);
			return 1;
		}
	}
	/* Late echoes of the handshake, so that each measured receive is its own reply. */
	do {
		rmsg[0].msg_hdr.msg_namelen = sizeof(rname[0]);
		rmsg[0].msg_hdr.msg_controllen = sizeof(rcmsg[0]);
	} while (recvmmsg(fd, rmsg, 1, MSG_DONTWAIT, NULL) > 0);
	t = calloc(iters, sizeof(*t));
	if (!t)
		return 1;
	for (unsigned i = 0; i < warmup + iters; i++) {
		uint64_t t0 = now_ns();

		if (send_hop(fd, &to, 1) < 0 || recv_hop(fd, &from, &first, t0 + 10000000000ull) < 0) {
			perror("udp_roce_pp: client");
			return 1;
		}
		if (i >= warmup)
			t[i - warmup] = now_ns() - t0;
	}
	send_hop(fd, &to, STOP_BYTE);
	snprintf(what, sizeof(what), "udp_roce_pp iters=%u", iters);
	report_half_rtt(what, t, iters);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL;
	unsigned port = 18600, iters = 10000, warmup = 1000;
	int srv = 0, opt;

	while ((opt = getopt(argc, argv, "sc:p:n:w:")) != -1) {
		switch (opt) {
		case 's': srv = 1; break;
		case 'c': host = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'n': iters = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'w': warmup = (unsigned)strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (srv == !!host || iters < 1 || !port || port > 65535)
		usage();
	return srv ? server(port) : client(host, port, iters, warmup);
}
