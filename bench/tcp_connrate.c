/* tcp_connrate.c — the TCP peer of bench/run.sh's cm_connect: how fast the kernel sets up
 * TCP connections between two processes on 127.0.0.1, shaped like cmtime's RDMA CM ones.
 *
 *   tcp_connrate -s [-p PORT]                    server: accept, answer, until killed
 *   tcp_connrate -c HOST [-p PORT] [-n CONNS]    client: CONNS connections at once
 *
 * cmtime (rdmacm-utils) starts all its connections together and steps them through
 * each phase in parallel; a connection is set up when the server application has
 * accepted it (its REP) and the client knows (its RTU).  The TCP analogue here: the
 * client opens CONNS non-blocking sockets and connects them all at once, the server
 * accept()s each and writes one byte, and a connection counts as set up when the
 * client has read that byte.  The figure is CONNS over the time from the first
 * socket() to the last byte read:
 *
 *   tcp_connrate conns=100 ms=4.21 rate=23752 conn/s
 *
 * Both sides use epoll and never block on one connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int server(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct epoll_event ev = { .events = EPOLLIN }, evs[64];
	int one = 1, lfd, ep;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (lfd < 0 || ep < 0)
		return perror("socket"), 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 4096))
		return perror("bind/listen"), 1;
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			char c = 'a';

			if (fd == lfd) {
				int cfd;

				while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event cev = { .events = EPOLLIN | EPOLLRDHUP,
								   .data.fd = cfd };

					/* the "REP": the application has taken the connection */
					if (write(cfd, &c, 1) != 1 ||
					    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev))
						close(cfd);
				}
				continue;
			}
			/* the client closed (or sent something): done with it */
			if (read(fd, &c, 1) <= 0 || (evs[i].events & (EPOLLRDHUP | EPOLLHUP))) {
				epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
			}
		}
	}
}

static int client(const char *host, int port, int conns)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct epoll_event evs[64];
	int *fds = calloc((size_t)conns, sizeof(int)), ep, done = 0;
	double t0, t1;

	if (!fds || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return fprintf(stderr, "tcp_connrate: bad host %s\n", host), 1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	t0 = now_ms();
	for (int i = 0; i < conns; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };

		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fds[i] < 0)
			return perror("socket"), 1;
		if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
			return perror("connect"), 1;
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
	}
	while (done < conns) {
		int n = epoll_wait(ep, evs, 64, 10000);

		if (n <= 0)
			return fprintf(stderr, "tcp_connrate: %d of %d set up\n", done, conns), 1;
		for (int i = 0; i < n; i++) {
			int fd = fds[evs[i].data.u32];
			char c;

			if (read(fd, &c, 1) != 1)
				return fprintf(stderr, "tcp_connrate: connection %u failed\n",
					       evs[i].data.u32), 1;
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
			done++;
		}
	}
	t1 = now_ms();
	for (int i = 0; i < conns; i++)
		close(fds[i]);
	printf("tcp_connrate conns=%d ms=%.3f rate=%.0f conn/s\n", conns, t1 - t0,
	       conns / ((t1 - t0) / 1e3));
	free(fds);
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL;
	int port = 7471, conns = 100, srv = 0, opt;

	while ((opt = getopt(argc, argv, "sc:p:n:")) != -1) {
		switch (opt) {
		case 's': srv = 1; break;
		case 'c': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'n': conns = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: tcp_connrate -s [-p PORT] | -c HOST [-p PORT] [-n CONNS]\n");
			return 2;
		}
	}
	if (srv)
		return server(port);
	if (!host || conns < 1)
		return fprintf(stderr, "tcp_connrate: -s or -c HOST\n"), 2;
	return client(host, port, conns);
}
