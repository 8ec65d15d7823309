/* udp_gso — the kernel's share of uroce's write_bw, without RoCE: a sender that hands UDP
 * the bytes of 64 KiB RDMA WRITEs (path MTU 4096) in the shape netio does, and a receiver
 * with UDP_GRO that drains them.  Run it pinned like bench/run.sh pins write_bw (receiver
 * on CPU 0, sender on CPU 1) and compare with iperf3 in the same minute: it is the ceiling
 * of a sender whose packets cost nothing to build (no ICRC, no protocol, no ACKs).
 *
 *   udp_gso -r [-p PORT] [-d SECONDS] [-m PMTU]                  receiver (stops after SECONDS + 1)
 *   udp_gso -t HOST [-p PORT] [-d SECONDS] [-s SHAPE] [-m PMTU]  sender
 *
 * Shapes (each 64 KiB message = FIRST 28+4096+4 bytes, 14 MIDDLE and a LAST of 12+4096+4,
 * the UDP payloads of RoCEv2 packets: BTH [+ RETH] + payload + ICRC):
 *   uroce  what netio gives the kernel (since 1ef8263): FIRST alone, then the 14 MIDDLE
 *          and the LAST in one UDP_SEGMENT send (4112); the 4 KiB payloads point into a
 *          page-aligned buffer, and each packet's 4-byte tail and the next packet's
 *          header are one piece (two pieces per packet, as the engine lays them out).
 *          With -m 1024 or 2048 (the path MTU of a 1500- or 3000-byte netdev) the message
 *          is 64 or 32 packets of that payload, grouped as netio groups them: runs of
 *          equal-sized packets, at most 64 segments and 65000 bytes per send, a shorter
 *          packet starting a run of its own where that costs no extra send (at 1024:
 *          FIRST + MIDDLE, then 62)
 *   uroce-old  what netio gave it before: FIRST + MIDDLE (segment 4128) and 13 MIDDLE +
 *          LAST, each packet three pieces (header, payload, tail)
 *   mmsg   the uroce-old sends in one sendmmsg
 *   flat   the same two sends, each one contiguous piece (what a copy into a staging
 *          buffer would hand the kernel)
 *   gather flat, with the copy into the staging buffer done (memcpy of the pieces) before
 *          each send, as a sender that gathered in user space would
 *   one    the MIDDLEs and the LAST of the message as one contiguous 15-segment send and
 *          the FIRST alone (for comparison only: which split costs what)
 *
 * -c (both ends, -s uroce only): the ICRC's share too.  The sender computes each packet's
 * CRC over its header and payload with uroce_crc32 (the CRC uroce's ICRC runs on) and
 * stores it in the packet's tail before the send, the receiver runs the same CRC over every
 * byte it receives.  A RoCEv2 sender cannot skip this work (a kernel Soft-RoCE peer drops a
 * packet whose ICRC does not check), so `udp_gso -c` is the floor of what uroce could reach
 * on the UDP path; plain udp_gso is the kernel alone.
 *
 * Both print   udp_gso {send|recv} shape=S gbps=G msgs=N secs=T   (G counts UDP payload
 * bytes; the receiver from its first datagram to its last). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "wire/icrc.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define MSG 65536
#define MAX_PKT 64                    /* 64 KiB at the smallest -m, 1024 */
#define MAX_SEND 4                    /* sends per message */
#define GSO_SEGS 64                   /* netio's GSO_MAX_SEGS */
#define GSO_BYTES 65000               /* netio's GSO_MAX_BYTES */
/* The path MTU (-m): 4096 unless told; NPKT packets of PAY bytes make one 64 KiB message. */
static unsigned PAY = 4096, NPKT = 16;
#define FIRST_LEN (28 + PAY + 4)      /* BTH + RETH + payload + ICRC */
#define MID_LEN (12 + PAY + 4)        /* BTH + payload + ICRC */
#define MSG_BYTES (FIRST_LEN + (NPKT - 1) * MID_LEN)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: udp_gso -r [-p PORT] [-d SECONDS] | -t HOST [-p PORT] [-d SECONDS] "
		"[-s uroce|uroce-old|mmsg|flat|gather|one] [-m 1024|2048|4096] [-c]\n");
	exit(2);
}

static int receiver(uint16_t port, int secs, bool crc)
{
	static uint8_t bufs[8][65536];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct mmsghdr m[8];
	struct iovec v[8];
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, sz = 4 << 20;
	uint64_t bytes = 0;
	uint32_t sum = 0;
	double first = 0, last = 0, start;

	if (fd < 0 || setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("udp_gso: receiver socket");
		return 1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	for (int i = 0; i < 8; i++) {
		v[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
		memset(&m[i], 0, sizeof(m[i]));
		m[i].msg_hdr.msg_iov = &v[i];
		m[i].msg_hdr.msg_iovlen = 1;
	}
	start = now();
	while (now() - start < secs + 1) {
		int n = recvmmsg(fd, m, 8, MSG_DONTWAIT, NULL);

		for (int i = 0; i < n; i++) {
			bytes += m[i].msg_len;
			if (crc)   /* what checking every packet's ICRC reads */
				sum ^= uroce_crc32(0, bufs[i], m[i].msg_len);
		}
		if (n > 0) {
			last = now();
			if (!first)
				first = last;
		}
	}
	printf("udp_gso recv gbps=%.2f msgs=%.0f secs=%.2f crc=%s\n",
	       last > first ? (double)bytes * 8 / 1e9 / (last - first) : 0.0,
	       (double)bytes / MSG_BYTES, last - first, crc ? "on" : "off");
	(void)sum;
	return 0;
}

/* One UDP_SEGMENT control message per msghdr. */
static void set_gso(struct msghdr *m, char *cbuf, size_t cap, uint16_t seg)
{
	struct cmsghdr *c;

	memset(cbuf, 0, cap);
	m->msg_control = cbuf;
	m->msg_controllen = CMSG_SPACE(sizeof(seg));
	c = CMSG_FIRSTHDR(m);
	c->cmsg_level = IPPROTO_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
}

static int sender(const char *host, uint16_t port, int secs, const char *shape, bool crc)
{
	static uint8_t hdr[MAX_PKT][128] __attribute__((aligned(64)));
	static uint8_t flat[2][65536] __attribute__((aligned(4096)));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct iovec iov[MAX_SEND][3 * MAX_PKT], giov[2][3 * MAX_PKT];
	unsigned gn[2] = { 0, 0 };
	struct mmsghdr mm[MAX_SEND];
	char cbuf[MAX_SEND][64];
	unsigned niov[MAX_SEND] = { 0 }, nseg[MAX_SEND] = { 0 }, nsend;
	size_t len[MAX_SEND] = { 0 }, seg[MAX_SEND] = { 0 };
	bool shut[MAX_SEND] = { false };
	int fd = socket(AF_INET, SOCK_DGRAM, 0), pmtu = IP_PMTUDISC_DO, sz = 4 << 20;
	uint8_t *app = aligned_alloc(4096, MSG);
	bool gather = !strcmp(shape, "gather");
	bool pieces = strcmp(shape, "flat") && strcmp(shape, "one");
	bool merged = !strcmp(shape, "uroce");   /* a tail and the next header: one piece */
	/* packets in the first send */
	unsigned split = strcmp(shape, "one") && strcmp(shape, "uroce") ? 2 : 1;
	/* merged: header k at area + 64k + 8, its tail in the 4 bytes before header k + 1 */
	static uint8_t area[(MAX_PKT + 1) * 64] __attribute__((aligned(64)));
	/* -c: each packet's header, its length and its tail (where the ICRC goes) */
	uint8_t *crc_hdr[MAX_PKT], *crc_tail[MAX_PKT];
	size_t crc_hlen[MAX_PKT];
	uint64_t msgs = 0, failed = 0;
	double start, t;

	if (!app || fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1)
		usage();
	if (strcmp(shape, "uroce") && strcmp(shape, "uroce-old") && strcmp(shape, "mmsg") &&
	    strcmp(shape, "flat") && strcmp(shape, "one") && !gather)
		usage();
	if ((PAY != 4096 || crc) && !merged) {
		fprintf(stderr, "udp_gso: -m and -c apply to -s uroce only\n");
		exit(2);
	}
	memset(app, 0x5a, MSG);
	memset(hdr, 0xa5, sizeof(hdr));
	memset(area, 0xa5, sizeof(area));
	(void)setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	/* merged (netio's shape): a send is a run of equal-sized packets, the last of a run
	 * may be shorter, GSO_SEGS and GSO_BYTES at most (netio_send's grouping) */
	nsend = merged ? 0 : 2;
	for (unsigned k = 0; k < NPKT; k++) {
		unsigned s = k < split ? 0 : 1;
		size_t h = k ? 12 : 28;

		if (merged) {
			size_t plen = h + PAY + 4;

			s = nsend - 1;   /* the open run, if any */
			/* a shorter packet followed by the m - 1 of its size starts a run
			 * there when that costs no extra send (netio's shorter_starts_run) */
			unsigned m = NPKT - k, cap = GSO_BYTES / plen < GSO_SEGS ? GSO_BYTES / plen : GSO_SEGS;

			if (!nsend || nseg[s] == GSO_SEGS || len[s] + plen > GSO_BYTES ||
			    plen > seg[s] || shut[s] || (plen < seg[s] && m > 1 && m % cap != 1)) {
				s = nsend++;
				seg[s] = plen;
			}
			shut[s] = plen < seg[s];   /* a shorter packet ends its run */
			nseg[s]++;
		}

		if (merged) {
			uint8_t *hk = area + k * 64 + 8;

			if (niov[s])   /* the previous packet's tail ends where this header begins */
				iov[s][niov[s] - 1].iov_len += h;
			else
				iov[s][niov[s]++] = (struct iovec){ hk, h };
			iov[s][niov[s]++] = (struct iovec){ app + (size_t)k * PAY, PAY };
			iov[s][niov[s]++] = (struct iovec){ hk + 64 - 4, 4 };
			crc_hdr[k] = hk;
			crc_hlen[k] = h;
			crc_tail[k] = hk + 64 - 4;
		} else if (pieces) {
			iov[s][niov[s]++] = (struct iovec){ hdr[k], h };
			iov[s][niov[s]++] = (struct iovec){ app + (size_t)k * PAY, PAY };
			iov[s][niov[s]++] = (struct iovec){ hdr[k] + 64, 4 };
		}
		len[s] += h + PAY + 4;
	}
	memset(mm, 0, sizeof(mm));
	for (unsigned s = 0; s < nsend; s++) {
		struct msghdr *m = &mm[s].msg_hdr;

		if (gather) {   /* the pieces stay in iov[s]; what is sent is flat[s] */
			memcpy(giov[s], iov[s], niov[s] * sizeof(*iov[s]));
			gn[s] = niov[s];
		}
		if (!pieces || gather) {
			memset(flat[s], 0x5a, len[s]);
			iov[s][0] = (struct iovec){ flat[s], len[s] };
			niov[s] = 1;
		}
		m->msg_name = &a;
		m->msg_namelen = sizeof(a);
		m->msg_iov = iov[s];
		m->msg_iovlen = niov[s];
		if (merged ? nseg[s] > 1 : len[s] > FIRST_LEN)   /* more than one packet: GSO */
			set_gso(m, cbuf[s], sizeof(cbuf[s]),
				merged ? (uint16_t)seg[s] : s == 0 ? FIRST_LEN : MID_LEN);
	}
	start = now();
	while ((t = now()) - start < secs) {
		for (unsigned s = 0; gather && s < 2; s++) {
			size_t off = 0;

			for (unsigned i = 0; i < gn[s]; i++) {
				memcpy(flat[s] + off, giov[s][i].iov_base, giov[s][i].iov_len);
				off += giov[s][i].iov_len;
			}
		}
		for (unsigned k = 0; crc && k < NPKT; k++) {   /* -c: the ICRC's reads, per packet */
			uint32_t c = uroce_crc32(0, crc_hdr[k], crc_hlen[k]);

			c = uroce_crc32(c, app + (size_t)k * PAY, PAY);
			memcpy(crc_tail[k], &c, 4);
		}
		if (!strcmp(shape, "mmsg")) {
			if (sendmmsg(fd, mm, 2, 0) != 2)
				failed++;
			else
				msgs++;
		} else {
			unsigned s = 0;

			while (s < nsend && sendmsg(fd, &mm[s].msg_hdr, 0) >= 0)
				s++;
			if (s < nsend)
				failed++;
			else
				msgs++;
		}
	}
	printf("udp_gso send shape=%s pmtu=%u sends=%u crc=%s gbps=%.2f msgs=%llu secs=%.2f failed=%llu\n",
	       shape, PAY, merged ? nsend : 2, crc ? "on" : "off",
	       (double)msgs * MSG_BYTES * 8 / 1e9 / (t - start), (unsigned long long)msgs, t - start,
	       (unsigned long long)failed);
	return 0;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *shape = "uroce";
	int recv_mode = 0, secs = 3, opt;
	bool crc = false;
	uint16_t port = 18700;

	while ((opt = getopt(argc, argv, "rt:p:d:s:m:c")) != -1) {
		switch (opt) {
		case 'c': crc = true; break;
		case 'r': recv_mode = 1; break;
		case 't': host = optarg; break;
		case 'p': port = (uint16_t)atoi(optarg); break;
		case 'd': secs = atoi(optarg); break;
		case 's': shape = optarg; break;
		case 'm':
			PAY = (unsigned)atoi(optarg);
			if (PAY != 1024 && PAY != 2048 && PAY != 4096)
				usage();
			NPKT = MSG / PAY;
			break;
		default: usage();
		}
	}
	if (secs <= 0 || recv_mode == !!host)
		usage();
	return recv_mode ? receiver(port, secs, crc) : sender(host, port, secs, shape, crc);
}
