/* udp_pps — the message-rate peer of ib_send_bw (bench/run.sh): one process sends SIZE-byte
 * UDP datagrams with plain sendto() for SECONDS, another receives them with recv() and counts.
 * The default SIZE 80 is the UDP payload of the RoCEv2 packet of a 64-byte SEND
 * (12 B BTH + 64 B + 4 B ICRC), so both sides of the ratio move the same bytes per message.
 *
 *   udp_pps -r [-p PORT]                                  receiver
 *   udp_pps -t HOST [-p PORT] [-z SIZE] [-d SECONDS]      sender
 *
 * The receiver times from its first datagram to its last and prints
 *   udp_pps recv bytes=80 packets=N secs=S mpps=R
 * (datagrams dropped by a full socket buffer are not counted: the figure is delivered
 * messages per second, like a SEND counted once it completes).  It stops on the sender's
 * end marker (a 1-byte datagram, sent a few times) or after 1 s without traffic.
 * The sender prints   udp_pps send bytes=80 packets=N secs=S mpps=R.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE 65507

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: udp_pps -r [-p PORT] | -t HOST [-p PORT] [-z SIZE] [-d SECONDS]\n");
	exit(2);
}

static int receiver(const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM, .ai_flags = AI_PASSIVE }, *ai;
	if (getaddrinfo(NULL, port, &hints, &ai) != 0)
		return 1;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		perror("udp_pps: bind");
		return 1;
	}
	freeaddrinfo(ai);
	static uint8_t buf[MAX_SIZE];
	uint64_t count = 0;
	size_t size = 0;
	double first = 0, last = 0;
	/* No timeout before the first datagram: run.sh starts the sender once we are bound. */
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break; /* 1 s idle */
			perror("udp_pps: recv");
			return 1;
		}
		if (n == 1)
			break; /* end marker */
		last = now();
		if (count++ == 0) {
			first = last;
			size = (size_t)n;
			struct timeval tv = { .tv_sec = 1 };
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		}
	}
	if (count < 2) {
		fprintf(stderr, "udp_pps: received %llu datagrams\n", (unsigned long long)count);
		return 1;
	}
	/* count - 1 intervals between the first and the last arrival */
	printf("udp_pps recv bytes=%zu packets=%llu secs=%.3f mpps=%.4f\n", size, (unsigned long long)count,
	       last - first, (double)(count - 1) / (last - first) / 1e6);
	return 0;
}

static int sender(const char *host, const char *port, size_t size, double secs)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_DGRAM }, *ai;
	if (getaddrinfo(host, port, &hints, &ai) != 0) {
		fprintf(stderr, "udp_pps: cannot resolve %s\n", host);
		return 1;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("udp_pps: socket");
		return 1;
	}
	static uint8_t buf[MAX_SIZE];
	memset(buf, 0x5A, size);
	uint64_t count = 0;
	double t0 = now(), t = t0, end = t0 + secs;
	while (t < end) {
		/* Check the clock every 256 datagrams: a clock read per send would be measured too. */
		for (int i = 0; i < 256; i++) {
			if (sendto(fd, buf, size, 0, ai->ai_addr, ai->ai_addrlen) < 0 && errno != ENOBUFS &&
			    errno != EAGAIN) {
				perror("udp_pps: sendto");
				return 1;
			}
			count++;
		}
		t = now();
	}
	printf("udp_pps send bytes=%zu packets=%llu secs=%.3f mpps=%.4f\n", size, (unsigned long long)count, t - t0,
	       (double)count / (t - t0) / 1e6);
	/* End markers, spaced so that a receiver still draining a full buffer gets one. */
	for (int i = 0; i < 5; i++) {
		sendto(fd, buf, 1, 0, ai->ai_addr, ai->ai_addrlen);
		usleep(20000);
	}
	freeaddrinfo(ai);
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = "18601";
	int recv_mode = 0, opt;
	size_t size = 80;
	double secs = 3;
	while ((opt = getopt(argc, argv, "rt:p:z:d:")) != -1) {
		switch (opt) {
		case 'r': recv_mode = 1; break;
		case 't': host = optarg; break;
		case 'p': port = optarg; break;
		case 'z': size = strtoul(optarg, NULL, 0); break;
		case 'd': secs = strtod(optarg, NULL); break;
		default: usage();
		}
	}
	if (recv_mode == !!host || size < 2 || size > MAX_SIZE || secs <= 0)
		usage();
	return recv_mode ? receiver(port) : sender(host, port, size, secs);
}
