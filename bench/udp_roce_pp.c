/* udp_roce_pp — a UDP ping-pong that sends and receives what uroce's ib_write_lat does, with
 * none of uroce: the kernel's share of a uroce half round trip (bench/run.sh, write_lat).
 *
 *   udp_roce_pp -s [-u | -x PARTS] [-p PORT]                     server: echo until the client says stop
 *   udp_roce_pp -c HOST [-u | -x PARTS] [-p PORT] [-n ITERS] [-w WARMUP]
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
 * single plain datagram.
 *
 * -u (both ends): the kernel's share with uroce's socket design as well, still no uroce.
 * What uroce's process structure costs the kernel on each hop, which one socket in a
 * single-threaded process does not pay (docs/transport.md, "Sockets"):
 *   - every process of a device receives on UDP 4791 through one SO_REUSEPORT group, and
 *     uroce's steering program (src/net/steer.c) picks the socket by destination QPN: here a
 *     group of two, the first standing for the daemon's socket (never read), the program
 *     sending this QPN to the second;
 *   - packets leave through a second, unconnected socket bound to the local address;
 *   - the process has a second thread (uroce's progress thread, asleep in epoll_wait), so
 *     its descriptor table is shared and every system call on a socket takes and drops a
 *     reference to the file, which a single-threaded process skips;
 *   - once the peer's first datagram is in, a socket bound to the receive port beside the
 *     group (SO_REUSEADDR on all of them, not SO_REUSEPORT) and connected to where the
 *     peer sends from takes the rest, as uroce's connected receive sockets do (netio.c).
 * Each side's receive port travels in the WRITE's RETH bytes, since replies no longer come
 * from the port they go to (uroce sends to 4791 from a port of its own).  Not modelled:
 * SO_BINDTODEVICE on the receive socket, and the group's other sockets (one per uroce
 * process on the device).
 *
 * -x PARTS (both ends): some of the parts only, to see what each costs (bench/RESULTS.md,
 * 2026-12-05): r, the steered reuseport group; t, the separate send socket; h, the sleeping
 * second thread; k, the connected receive socket beside the receive socket or group.  -u
 * is -x rthk.  And what uroce does not do: c, the send socket connected to its one
 * destination (sendmsg without an address; needs t); g, the receive socket alone in a
 * reuseport group, b, the same with the steering program; C, the one receive socket itself
 * connected to the peer (without t).  Output (half round trip, microseconds; t_typical =
 * median):
 *   udp_roce_pp iters=N t_min=.. t_typical=.. t_avg=.. t_p99=..
 * Exit 0 on success, 1 on a socket error or when the server does not answer within 10 s.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net/steer.h"
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
#define PP_QPN 0x000011 /* destination QPN in both packets' BTH (-u: the steering rule's) */
#define PORT_OFF 20     /* -u: the sender's receive port, in the WRITE's RETH (BTH 12 + VA 8) */

static void usage(void)
{
	fprintf(stderr, "usage: udp_roce_pp -s [-u | -x PARTS] [-p PORT] | -c HOST [-u | -x PARTS] [-p PORT] [-n ITERS] [-w WARMUP]\n"
			"  PARTS: r steered reuseport group, t own send socket, h second thread, k connected receive socket beside it;\n"
			"         c connect the send socket (needs t), g group of one, b group of one + program, C connect the receive socket\n");
	exit(2);
}

static uint8_t pkt[WRITE_LEN + ACK_LEN];
static uint8_t rbuf[SLOTS][2048];
static uint8_t rcmsg[SLOTS][256];
static struct sockaddr_in6 rname[SLOTS];
static struct iovec riov[SLOTS];
static struct mmsghdr rmsg[SLOTS];
enum { P_STEER = 1, P_TXSOCK = 2, P_THREAD = 4, P_CONNECT = 8, P_GROUP1 = 16, P_PROG1 = 32,
       P_RXCONN = 64, P_BESIDE = 128 };
#define PART_LETTERS "rthcgbCk"  /* bit k of parts is letter k */
static int connfd = -1;  /* P_BESIDE: the connected receive socket, once the peer is known */
static unsigned parts;   /* -u, -x: which of uroce's socket design */
static int txfd = -1;    /* P_TXSOCK: the send socket, bound once the local address is known */
static struct sockaddr_in6 tx_peer; /* c, C: where the sending socket is connected */
static uint16_t my_port; /* this side's receive port (host order) */

/* The receive socket: uroce's options; with -u, the second of a reuseport group whose
 * steering program sends PP_QPN to it. */
static int rx_socket(unsigned port, int reuse)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0), off = 0, on = 1;

	if (fd < 0 || (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0) ||
	    ((parts & P_BESIDE) && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0) ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("udp_roce_pp: socket");
		exit(1);
	}
	return fd;
}

/* uroce's progress thread, asleep: never woken. */
static void *sleeper(void *arg)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0), efd = eventfd(0, 0);

	(void)arg;
	if (ep >= 0 && efd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0)
		for (;;)
			epoll_wait(ep, &ev, 1, -1);
	return NULL;
}

static int open_socket(unsigned port)
{
	struct sockaddr_in6 a;
	socklen_t alen = sizeof(a);
	pthread_t t;
	int fd;

	if (parts & (P_GROUP1 | P_PROG1)) {
		struct uroce_steer_rule r = { .qpn_lo = PP_QPN, .qpn_hi = PP_QPN, .index = 0 };
		int rc;

		fd = rx_socket(port, 1);
		if ((parts & P_PROG1) && (rc = uroce_steer_attach(fd, &r, 1, 0)) < 0) {
			errno = -rc;
			perror("udp_roce_pp: steering");
			exit(1);
		}
	} else if (!(parts & P_STEER)) {
		fd = rx_socket(port, 0);
	} else {
		struct uroce_steer_rule r = { .qpn_lo = PP_QPN, .qpn_hi = PP_QPN, .index = 1 };
		int daemon_fd = rx_socket(port, 1), rc;

		/* an ephemeral port (the client's): the group's second socket takes the same */
		if (getsockname(daemon_fd, (struct sockaddr *)&a, &alen) < 0) {
			perror("udp_roce_pp: getsockname");
			exit(1);
		}
		fd = rx_socket(ntohs(a.sin6_port), 1);
		rc = uroce_steer_attach(daemon_fd, &r, 1, 0);
		if (rc < 0) {
			errno = -rc;
			perror("udp_roce_pp: steering");
			exit(1);
		}
	}
	alen = sizeof(a);
	if (getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
		perror("udp_roce_pp: getsockname");
		exit(1);
	}
	my_port = ntohs(a.sin6_port);
	if ((parts & P_THREAD) && (errno = pthread_create(&t, NULL, sleeper, NULL)) != 0) {
		perror("udp_roce_pp: thread");
		exit(1);
	}
	for (int k = 0; k < SLOTS; k++) {
		riov[k] = (struct iovec){ rbuf[k], sizeof(rbuf[k]) };
		rmsg[k].msg_hdr = (struct msghdr){ .msg_name = &rname[k], .msg_iov = &riov[k],
						   .msg_iovlen = 1, .msg_control = rcmsg[k] };
	}
	/* both packets name PP_QPN (what -u's steering reads); the WRITE carries our port */
	pkt[5] = pkt[WRITE_LEN + 5] = (PP_QPN >> 16) & 0xFF;
	pkt[6] = pkt[WRITE_LEN + 6] = (PP_QPN >> 8) & 0xFF;
	pkt[7] = pkt[WRITE_LEN + 7] = PP_QPN & 0xFF;
	/* (the port is read back only with t: a send socket of its own) */
	pkt[PORT_OFF] = my_port >> 8;
	pkt[PORT_OFF + 1] = my_port & 0xFF;
	return fd;
}

/* P_TXSOCK: uroce's send socket -- unconnected, bound to the local address that reaches @to (its
 * GID's), a port of its own, path MTU discovery on. */
static int tx_socket(const struct sockaddr_in6 *to)
{
	struct sockaddr_in6 me;
	socklen_t len = sizeof(me);
	int probe = socket(AF_INET6, SOCK_DGRAM, 0), fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	int off = 0, dont = IP_PMTUDISC_DO;

	if (probe < 0 || fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    setsockopt(probe, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    connect(probe, (const struct sockaddr *)to, sizeof(*to)) < 0 ||
	    getsockname(probe, (struct sockaddr *)&me, &len) < 0) {
		perror("udp_roce_pp: send socket");
		exit(1);
	}
	close(probe);
	me.sin6_port = 0;
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &dont, sizeof(dont)) < 0) {
		perror("udp_roce_pp: send socket");
		exit(1);
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
	if (parts & P_TXSOCK) {
		if (txfd < 0)
			txfd = tx_socket(to);
		fd = txfd;
	}
	/* c: the send socket connected to its destination; C: the one receive socket,
	 * from the first measured send on (connected during the handshake, it would get
	 * the ICMP errors of a server not yet bound as recv errors) */
	if (((parts & P_TXSOCK) && (parts & P_CONNECT)) ||
	    ((parts & P_RXCONN) && !(parts & P_TXSOCK) && first != 0)) {
		if (memcmp(&tx_peer, to, sizeof(*to)) != 0) {
			if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0)
				return -1;
			tx_peer = *to;
		}
		m.msg_name = NULL;
		m.msg_namelen = 0;
	}
	return sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* Busy-poll until a datagram comes (its first byte in *first, its sender in *from), or
 * until deadline_ns (0: none).  Like uroce's polling thread: one slot after an empty poll,
 * all of them otherwise.  0, or -1 with errno (ETIMEDOUT past the deadline). */
/* P_BESIDE: a socket bound to our receive port beside the group (SO_REUSEADDR, as uroce's
 * netio since 2026-12-05) and connected to where @peer's datagrams come from; what follows
 * is read from it. */
static void open_beside(const struct sockaddr_in6 *peer)
{
	struct sockaddr_in6 me = { .sin6_family = AF_INET6, .sin6_port = htons(my_port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0), off = 0, on = 1;

	if (fd < 0 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) < 0 ||
	    bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    connect(fd, (const struct sockaddr *)peer, sizeof(*peer)) < 0) {
		perror("udp_roce_pp: connected receive socket");
		exit(1);
	}
	connfd = fd;
}

static int recv_hop(int fd, struct sockaddr_in6 *from, uint8_t *first, uint64_t deadline_ns)
{
	if (connfd >= 0)
		fd = connfd;
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
			if ((parts & P_BESIDE) && connfd < 0)
				open_beside(&rname[0]);
			/* -u: replies go to the sender's receive port, not the one it sent from */
			if ((parts & P_TXSOCK) && rmsg[0].msg_len >= PORT_OFF + 2)
				from->sin6_port = htons((uint16_t)(rbuf[0][PORT_OFF] << 8 | rbuf[0][PORT_OFF + 1]));
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
	} while (recvmmsg(connfd >= 0 ? connfd : fd, rmsg, 1, MSG_DONTWAIT, NULL) > 0);
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

	while ((opt = getopt(argc, argv, "sc:p:n:w:ux:")) != -1) {
		switch (opt) {
		case 's': srv = 1; break;
		case 'u': parts = P_STEER | P_TXSOCK | P_THREAD | P_BESIDE; break;
		case 'x':
			for (const char *q = optarg; *q; q++) {
				const char *at = strchr(PART_LETTERS, *q);

				if (!at)
					usage();
				parts |= 1u << (at - PART_LETTERS);
			}
			break;
		case 'c': host = optarg; break;
		case 'p': port = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'n': iters = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'w': warmup = (unsigned)strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (srv == !!host || iters < 1 || !port || port > 65535 || ((parts & P_CONNECT) && !(parts & P_TXSOCK)))
		usage();
	return srv ? server(port) : client(host, port, iters, warmup);
}
