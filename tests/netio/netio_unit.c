/* netio_unit.c — pieces of netio without a daemon.
 *
 *   test_netio_unit          the send path against a sendmsg that fails on demand (GSO runs
 *                            and their limits, segment k's ICRC for ID k, short counts on
 *                            EAGAIN/ENOBUFS, losses counted, other errors, the fallback
 *                            when the kernel refuses UDP_SEGMENT); the iovec ICRC against
 *                            the wire module's (contiguous, ID 0) and
 *                            against a full IPv4 header with Identification k (what a GSO
 *                            segment carries), the ICRC slot split over pieces, the
 *                            source-port hash range
 *   test_netio_unit sockets  (in a private network namespace, lo up) the send sockets: two
 *                            QPs of one port slot share one socket; a datagram sent to its
 *                            port is dropped by the filter, queued nowhere; another GRH
 *                            moves a QP to a socket of its own (TOS/TTL set there, not on
 *                            the shared one) and back; a program's exclusive socket on the
 *                            port cannot be joined, and a slot whose port is held that way
 *                            gets another port of the range; 1,000 QPs hold one socket per
 *                            slot they fall in, and the last close of each closes it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>

#include "check.h"

/* The send path against a sendmsg that records each call and fails on demand (SQLite's
 * way of testing failure paths): netio.c is compiled with sendmsg renamed. */
static ssize_t fake_sendmsg(int fd, const struct msghdr *m, int flags);
#define netio_sendmsg fake_sendmsg
#include "transport/netio.c"   /* statics: the port slots, put_icrc, send path */
#undef sendmsg

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 5));
}

static uint32_t sock_drops(int fd)
{
	uint32_t mi[SK_MEMINFO_VARS] = { 0 };
	socklen_t l = sizeof(mi);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &l) < 0)
		return 0;
	return mi[SK_MEMINFO_DROPS];
}

static uint16_t port_of(uint32_t qpn, unsigned slots)
{
	return slot_port(sport_slot(qpn, slots), slots, 0);
}

static int test_sockets(void)
{
	static const uint8_t lo4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1 };
	static struct uroce_netio nio;   /* 2 KiB of buckets: not on the stack */
	struct uroce_netio_tx *t1 = NULL, *t2 = NULL, *t3 = NULL, *many[1000] = { NULL };
	uint32_t q1 = 1000, q2, q3;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char buf[64];
	unsigned slots_seen = 0, opened = 0;
	bool seen[DEFAULT_SPORTS] = { false };
	int s, ex, ret;

	memset(&nio, 0, sizeof(nio));
	nio.gso = true;
	nio.sports = DEFAULT_SPORTS;
	for (q2 = q1 + 1; sport_slot(q2, DEFAULT_SPORTS) != sport_slot(q1, DEFAULT_SPORTS); q2++)
		;
	CHECK(uroce_netio_tx_open(&nio, lo4, q1, 0, 0, &t1) == 0, "first QP");
	ret = uroce_netio_tx_open(&nio, lo4, q2, 0, 0, &t2);
	CHECK(ret == 0, "second QP in the same slot (port %#x): %d", port_of(q1, DEFAULT_SPORTS), ret);
	if (!t1 || !t2)
		return check_summary();
	CHECK(t1->sport == t2->sport && t1->sport == port_of(q1, DEFAULT_SPORTS), "same port");
	CHECK(t1->fd == t2->fd && nio.tx_nsocks == 1, "one socket for a slot's QPs (%u open)",
	      nio.tx_nsocks);

	/* Send to that port: the filter drops it, nothing queues. */
	s = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_port = htons(t1->sport);
	for (int i = 0; i < 8; i++)
		CHECK(sendto(s, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa)) == 1, "sendto");
	{
		struct timespec ts;
		uint64_t end;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		end = (uint64_t)ts.tv_sec * 1000 + 5000;
		while (sock_drops(t1->fd) < 8) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if ((uint64_t)ts.tv_sec * 1000 > end)
				break;
			poll(NULL, 0, 1);
		}
	}
	CHECK(sock_drops(t1->fd) == 8, "drops %u, want 8", sock_drops(t1->fd));
	CHECK(recv(t1->fd, buf, sizeof(buf), MSG_DONTWAIT) < 0 && errno == EAGAIN, "nothing queued");

	/* Another GRH: IP takes it from the socket, so the QP moves to a socket of its own
	 * on the same port (SO_REUSEPORT), and back to the shared one with the old GRH. */
	CHECK(uroce_netio_tx_set_grh(t2, 0x28, 33) == 0, "set_grh");
	CHECK(t2->fd != t1->fd && t2->sport == t1->sport && nio.tx_nsocks == 2,
	      "another GRH: own socket on the same port (%u open)", nio.tx_nsocks);
	{
		int tos = -1, ttl = -1;
		socklen_t l = sizeof(int);

		getsockopt(t2->fd, IPPROTO_IP, IP_TOS, &tos, &l);
		getsockopt(t2->fd, IPPROTO_IP, IP_TTL, &ttl, &l);
		CHECK(tos == 0x28 && ttl == 33, "TOS %#x TTL %d on the moved socket", tos, ttl);
		getsockopt(t1->fd, IPPROTO_IP, IP_TOS, &tos, &l);
		CHECK(tos == 0, "the shared socket keeps TOS 0 (%#x)", tos);
	}
	CHECK(uroce_netio_tx_set_grh(t2, 0x28, 33) == 0 && nio.tx_nsocks == 2, "same GRH again: no change");
	CHECK(uroce_netio_tx_set_grh(t2, 0, 0) == 0 && t2->fd == t1->fd && nio.tx_nsocks == 1,
	      "back to the first GRH: shared again (%u open)", nio.tx_nsocks);

	/* An exclusive socket cannot join the port... */
	ex = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(bind(ex, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == EADDRINUSE,
	      "exclusive bind to a QP's port must fail");
	close(ex);
	/* ...and a port held exclusively makes a new slot's socket probe further. */
	for (q3 = 77; sport_slot(q3, DEFAULT_SPORTS) == sport_slot(q1, DEFAULT_SPORTS); q3++)
		;
	ex = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_port = htons(port_of(q3, DEFAULT_SPORTS));
	CHECK(bind(ex, (struct sockaddr *)&sa, sizeof(sa)) == 0, "hold port %#x", port_of(q3, DEFAULT_SPORTS));
	ret = uroce_netio_tx_open(&nio, lo4, q3, 0, 0, &t3);
	CHECK(ret == 0 && t3 && t3->sport != port_of(q3, DEFAULT_SPORTS) && t3->sport >= 0xC000,
	      "QP with a held port: %d, port %#x", ret, t3 ? t3->sport : 0);
	close(ex);
	close(s);
	uroce_netio_tx_close(t1);
	uroce_netio_tx_close(t2);
	uroce_netio_tx_close(t3);
	CHECK(nio.tx_nsocks == 0, "every socket closed with its last QP (%u open)", nio.tx_nsocks);

	/* A sender opened with its AV's GRH starts on that GRH's socket: no default-GRH
	 * socket is made on the way (the most open at once stays 1). */
	nio.tx_nsocks_max = 0;
	ret = uroce_netio_tx_open(&nio, lo4, q1, 0x28, 33, &t1);
	CHECK(ret == 0 && nio.tx_nsocks == 1 && nio.tx_nsocks_max == 1,
	      "open with a GRH: %d, %u open, %u at most", ret, nio.tx_nsocks, nio.tx_nsocks_max);
	if (t1) {
		int tos = -1, ttl = -1;
		socklen_t l = sizeof(int);

		getsockopt(t1->fd, IPPROTO_IP, IP_TOS, &tos, &l);
		getsockopt(t1->fd, IPPROTO_IP, IP_TTL, &ttl, &l);
		CHECK(tos == 0x28 && ttl == 33, "TOS %#x TTL %d on the socket opened with them", tos, ttl);
		CHECK(uroce_netio_tx_set_grh(t1, 0x28, 33) == 0 && nio.tx_nsocks_max == 1,
		      "its own GRH again: no change");
	}
	uroce_netio_tx_close(t1);
	CHECK(nio.tx_nsocks == 0, "closed (%u open)", nio.tx_nsocks);
	nio.tx_nsocks_max = 0;

	/* 1,000 QPs: one socket per slot they fall in, never more than the slots. */
	for (unsigned i = 0; i < 1000; i++) {
		unsigned sl = sport_slot(5000 + i, DEFAULT_SPORTS);

		if (uroce_netio_tx_open(&nio, lo4, 5000 + i, 0, 0, &many[i]) == 0)
			opened++;
		if (!seen[sl])
			slots_seen++;
		seen[sl] = true;
	}
	CHECK(opened == 1000, "1000 QPs opened (%u)", opened);
	CHECK(nio.tx_nsocks == slots_seen && slots_seen <= DEFAULT_SPORTS && slots_seen > DEFAULT_SPORTS / 2,
	      "%u sockets for 1000 QPs in %u slots", nio.tx_nsocks, slots_seen);
	for (unsigned i = 0; i < 1000; i++)
		uroce_netio_tx_close(many[i]);
	CHECK(nio.tx_nsocks == 0 && nio.tx_nsocks_max == slots_seen, "all closed (%u open, %u at most)",
	      nio.tx_nsocks, nio.tx_nsocks_max);
	return check_summary();
}

/* ---- the fake sendmsg ---- */
#define FAKE_MAX 64
static struct {
	bool on;                      /* false: pass through to the real sendmsg */
	int fail_call, fail_errno;    /* make call number fail_call (0-based) fail */
	bool fail_gso_only;           /* ...only calls carrying UDP_SEGMENT */
	unsigned calls;
	size_t bytes[FAKE_MAX];
	int gso[FAKE_MAX];            /* segment size, 0 without UDP_SEGMENT */
	size_t iovlen[FAKE_MAX];      /* pieces handed to the kernel */
	unsigned icrc_bad;            /* segments whose ICRC is not the one for ID k */
	struct uroce_icrc_addr addr;
} fk;

static ssize_t fake_sendmsg(int fd, const struct msghdr *m, int flags)
{
	uint8_t buf[70000];
	size_t len = 0;
	int gso = 0;
	unsigned call;

	if (!fk.on)
		return sendmsg(fd, m, flags);
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c; c = CMSG_NXTHDR((struct msghdr *)m, c))
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_SEGMENT) {
			uint16_t g;

			memcpy(&g, CMSG_DATA(c), sizeof(g));
			gso = g;
		}
	call = fk.calls++;
	if ((int)call == fk.fail_call && (!fk.fail_gso_only || gso)) {
		errno = fk.fail_errno;
		return -1;
	}
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		memcpy(buf + len, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
		len += m->msg_iov[i].iov_len;
	}
	if (call < FAKE_MAX) {
		fk.bytes[call] = len;
		fk.gso[call] = gso;
		fk.iovlen[call] = m->msg_iovlen;
	}
	/* Segment k must carry the ICRC for IPv4 ID k (what the kernel will give it). */
	for (size_t off = 0, k = 0; off < len; k++) {
		size_t l = gso && len - off > (size_t)gso ? (size_t)gso : len - off;
		struct iovec v = { buf + off, l };

		if (uroce_netio_icrc(&fk.addr, (uint16_t)k, &v, 1, l) != uroce_get_le32(buf + off + l - 4))
			fk.icrc_bad++;
		off += l;
		if (!gso)
			break;
	}
	return (ssize_t)len;
}

static void fake_reset(void)
{
	bool on = fk.on;
	struct uroce_icrc_addr a = fk.addr;

	memset(&fk, 0, sizeof(fk));
	fk.on = on;
	fk.addr = a;
	fk.fail_call = -1;
}

static int test_sendpath(void)
{
	static uint8_t pkts[80][9000];
	struct uroce_txpkt t[80];
	struct uroce_netio nio;
	struct uroce_netio_tx tx;
	struct uroce_netaddr dst = { .gid = { [10] = 0xFF, [11] = 0xFF, 192, 0, 2, 2 }, .port = 4791 };
	struct uroce_netio_stats st;
	size_t sizes[80];
	int n = 0, ret;

	memset(&nio, 0, sizeof(nio));
	nio.c = nio.own;
	memset(&tx, 0, sizeof(tx));
	tx.nio = &nio;
	tx.fd = -1;
	tx.family = AF_INET;
	memcpy(tx.sgid, dst.gid, 16);
	tx.sgid[15] = 1;
	tx.sport = 0xC123;
	icrc_addr_for(&tx, &dst, &fk.addr);
	fk.on = true;

	/* 70 x 1000, 500, 3 x 1000, 200, 200: runs of 64 (segment limit), 6+1 (a shorter
	 * packet ends a run), 3, then 2 (a shorter packet followed by one of its size starts
	 * the next run instead of ending this one). */
	for (int i = 0; i < 70; i++)
		sizes[n++] = 1000;
	sizes[n++] = 500;
	for (int i = 0; i < 3; i++)
		sizes[n++] = 1000;
	sizes[n++] = 200;
	sizes[n++] = 200;
	for (int i = 0; i < n; i++) {
		fill(pkts[i], sizes[i], (unsigned)i);
		t[i] = (struct uroce_txpkt){ .iov = { { pkts[i], sizes[i] } }, .iovcnt = 1, .len = sizes[i] };
	}
#define SEND_CASE(want_ret)                                                               \
	do {                                                                              \
		ret = uroce_netio_send(&tx, &dst, t, (unsigned)n);                        \
		CHECK(ret == (want_ret), "send returned %d, want %d", ret, (want_ret));   \
	} while (0)
	tx.gso = true;
	fake_reset();
	SEND_CASE(n);
	CHECK(fk.calls == 4, "%u sendmsg calls, want 4", fk.calls);
	CHECK(fk.bytes[0] == 64000 && fk.gso[0] == 1000, "run 1: %zu bytes gso %d", fk.bytes[0], fk.gso[0]);
	CHECK(fk.bytes[1] == 6500 && fk.gso[1] == 1000, "run 2: %zu bytes gso %d", fk.bytes[1], fk.gso[1]);
	CHECK(fk.bytes[2] == 3000 && fk.gso[2] == 1000, "run 3: %zu bytes gso %d", fk.bytes[2], fk.gso[2]);
	CHECK(fk.bytes[3] == 400 && fk.gso[3] == 200, "run 4: %zu bytes gso %d", fk.bytes[3], fk.gso[3]);
	CHECK(fk.icrc_bad == 0, "%u segments with the wrong ICRC", fk.icrc_bad);
	uroce_netio_stats(&nio, &st);
	CHECK(st.tx_packets == (uint64_t)n && st.tx_gso_sends == 4, "tx_packets %llu gso %llu",
	      (unsigned long long)st.tx_packets, (unsigned long long)st.tx_gso_sends);

	/* A full socket buffer on the second run: the first run's 64 count as sent. */
	fake_reset();
	fk.fail_call = 1;
	fk.fail_errno = EAGAIN;
	SEND_CASE(64);
	fake_reset();
	fk.fail_call = 0;
	fk.fail_errno = ENOBUFS;
	SEND_CASE(0);
	uroce_netio_stats(&nio, &st);
	CHECK(st.tx_short == 2, "tx_short %llu", (unsigned long long)st.tx_short);

	/* The network dropped it: counted, reported as sent. */
	fake_reset();
	fk.fail_call = 2;
	fk.fail_errno = EHOSTUNREACH;
	SEND_CASE(n);
	uroce_netio_stats(&nio, &st);
	CHECK(st.tx_errors == 3, "tx_errors %llu, want the 3 packets of run 3",
	      (unsigned long long)st.tx_errors);

	/* Other errors: -errno when nothing went, the count otherwise. */
	fake_reset();
	fk.fail_call = 0;
	fk.fail_errno = EBADF;
	SEND_CASE(-EBADF);
	fake_reset();
	fk.fail_call = 1;
	fk.fail_errno = EBADF;
	SEND_CASE(64);

	/* The kernel refuses UDP_SEGMENT: one packet per call from then on, every ICRC for
	 * ID 0 (the packets of the refused run were computed for IDs 1.. and are redone). */
	fake_reset();
	fk.fail_call = 0;
	fk.fail_errno = EIO;
	fk.fail_gso_only = true;
	SEND_CASE(n);
	CHECK(!tx.gso, "GSO off after EIO");
	CHECK(fk.calls == 1 + (unsigned)n, "%u calls, want %d", fk.calls, 1 + n);
	CHECK(fk.icrc_bad == 0, "%u packets with the wrong ICRC after the fallback", fk.icrc_bad);

	/* Big packets: a run stops at 65000 bytes (7 x 9000). */
	tx.gso = true;
	for (int i = 0; i < 10; i++) {
		fill(pkts[i], 9000, (unsigned)i);
		t[i] = (struct uroce_txpkt){ .iov = { { pkts[i], 9000 } }, .iovcnt = 1, .len = 9000 };
	}
	n = 10;
	fake_reset();
	SEND_CASE(10);
	CHECK(fk.calls == 2 && fk.bytes[0] == 63000 && fk.bytes[1] == 27000, "9000-byte runs: %u calls, %zu + %zu",
	      fk.calls, fk.bytes[0], fk.bytes[1]);
	CHECK(fk.icrc_bad == 0, "%u segments with the wrong ICRC", fk.icrc_bad);

	/* A 64 KiB WRITE and the next message's FIRST, as the requester hands them over:
	 * FIRST (BTH + RETH + payload + ICRC) and 63 or 15 MIDDLE/LAST (BTH + payload +
	 * ICRC).  At path MTU 4096, FIRST goes alone and the 15 together (two sends either
	 * way); at 1024 the 63 do not fit one send (65,520 bytes), so FIRST takes the first
	 * MIDDLE along and the other 62 go together: two sends, where FIRST alone would
	 * leave the LAST alone in a third. */
	{
		static const struct { size_t pay, segs; size_t b0, g0, b1; } mtu[] = {
			{ 4096, 16, 4128, 0, 15 * 4112 },
			{ 1024, 64, 1056 + 1040, 1056, 62 * 1040 },
		};

		for (int c = 0; c < 2; c++) {
			n = 0;
			for (size_t k = 0; k <= mtu[c].segs; k++) {
				size_t len = (k == 0 || k == mtu[c].segs ? 28 : 12) + mtu[c].pay + 4;

				fill(pkts[n], len, (unsigned)k);
				t[n] = (struct uroce_txpkt){ .iov = { { pkts[n], len } }, .iovcnt = 1, .len = len };
				n++;
			}
			fake_reset();
			SEND_CASE(n);
			CHECK(fk.calls == 3, "MTU %zu: %u sends, want 3", mtu[c].pay, fk.calls);
			CHECK(fk.bytes[0] == mtu[c].b0 && fk.gso[0] == (int)mtu[c].g0,
			      "MTU %zu: first send %zu bytes gso %d", mtu[c].pay, fk.bytes[0], fk.gso[0]);
			CHECK(fk.bytes[1] == mtu[c].b1 && fk.gso[1] == (int)(12 + mtu[c].pay + 4),
			      "MTU %zu: second send %zu bytes gso %d", mtu[c].pay, fk.bytes[1], fk.gso[1]);
			CHECK(fk.bytes[2] == 28 + mtu[c].pay + 4, "MTU %zu: the next FIRST %zu bytes",
			      mtu[c].pay, fk.bytes[2]);
			CHECK(fk.icrc_bad == 0, "%u segments with the wrong ICRC", fk.icrc_bad);
		}
	}

	/* Packets in pieces, the engine's way: headers, payload elsewhere, tail.  Where a
	 * packet's tail ends at the next packet's headers the two go as one piece; elsewhere
	 * each piece is its own.  Either way every segment carries its ICRC. */
	{
		static uint8_t hdrs[9 * 64], pay[8][256];   /* packet 7's tail ends in the ninth 64 */
		bool contig[2] = { true, false };

		for (int c = 0; c < 2; c++) {
			for (int i = 0; i < 8; i++) {
				uint8_t *h = hdrs + i * 64 + 8, *tl = contig[c] ? h + 64 - 4 : h + 32;

				fill(h, 12, (unsigned)i);
				fill(pay[i], 256, (unsigned)i + 100);
				t[i] = (struct uroce_txpkt){ .iov = { { h, 12 }, { pay[i], 256 }, { tl, 4 } },
							     .iovcnt = 3, .len = 272 };
			}
			n = 8;
			fake_reset();
			SEND_CASE(8);
			CHECK(fk.calls == 1 && fk.bytes[0] == 8 * 272 && fk.gso[0] == 272,
			      "pieces: %u calls, %zu bytes, gso %d", fk.calls, fk.bytes[0], fk.gso[0]);
			CHECK(fk.iovlen[0] == (contig[c] ? 17u : 24u), "%s tails: %zu pieces, want %u",
			      contig[c] ? "adjacent" : "separate", fk.iovlen[0], contig[c] ? 17u : 24u);
			CHECK(fk.icrc_bad == 0, "%u segments with the wrong ICRC", fk.icrc_bad);
		}
	}
#undef SEND_CASE
	fk.on = false;
	return 0;
}

int main(int argc, char **argv)
{
	uint8_t pkt[600], ip[20], udp[8];
	struct uroce_icrc_addr a4 = { .family = AF_INET, .sport = 0xC123, .dport = 4791 };
	struct uroce_icrc_addr a6 = { .family = AF_INET6, .sport = 0xFFFF, .dport = 4791 };

	if (argc > 1 && !strcmp(argv[1], "sockets"))
		return test_sockets();
	test_sendpath();

	inet_pton(AF_INET, "192.0.2.1", &a4.src.v4);
	inet_pton(AF_INET, "192.0.2.2", &a4.dst.v4);
	inet_pton(AF_INET6, "2001:db8::1", &a6.src.v6);
	inet_pton(AF_INET6, "fe80::2", &a6.dst.v6);

	for (size_t len = 16; len <= sizeof(pkt); len += 4) {
		fill(pkt, len, (unsigned)len);
		for (int f = 0; f < 2; f++) {
			const struct uroce_icrc_addr *a = f ? &a6 : &a4;
			uint32_t want = uroce_icrc_compute(a, pkt, len);
			struct iovec one = { pkt, len };

			CHECK(uroce_netio_icrc(a, 0, &one, 1, len) == want, "len %zu fam %d one piece", len, f);
			/* Every split into three pieces, the BTH straddling included (sampled). */
			for (size_t c1 = 0; c1 <= len; c1 += (len > 64 ? 7 : 1))
				for (size_t c2 = c1; c2 <= len; c2 += (len > 64 ? 13 : 1)) {
					struct iovec v[3] = { { pkt, c1 }, { pkt + c1, c2 - c1 },
							      { pkt + c2, len - c2 } };

					CHECK(uroce_netio_icrc(a, 0, v, 3, len) == want,
					      "len %zu split %zu/%zu", len, c1, c2);
				}
		}
		/* IPv4 with Identification k: the ICRC over the real header agrees. */
		for (uint16_t id = 0; id < 70; id += 23) {
			struct iovec one = { pkt, len };
			uint32_t c;

			memset(ip, 0, sizeof(ip));
			ip[0] = 0x45;
			ip[1] = 0x2E;                  /* any TOS: masked */
			uroce_put_be16(ip + 2, (uint16_t)(28 + len));
			uroce_put_be16(ip + 4, id);
			uroce_put_be16(ip + 6, 0x4000);
			ip[8] = 17;                    /* any TTL */
			ip[9] = 17;
			memcpy(ip + 12, &a4.src.v4, 4);
			memcpy(ip + 16, &a4.dst.v4, 4);
			uroce_put_be16(udp, a4.sport);
			uroce_put_be16(udp + 2, a4.dport);
			uroce_put_be16(udp + 4, (uint16_t)(8 + len));
			uroce_put_be16(udp + 6, 0x1234);
			CHECK(uroce_icrc_frame(AF_INET, ip, 20, udp, pkt, len, &c) == 0, "frame");
			CHECK(uroce_netio_icrc(&a4, id, &one, 1, len) == c, "len %zu ID %u", len, id);
		}
	}
	CHECK(uroce_netio_icrc(&a4, 0, NULL, 0, 15) == 0, "short packet");

	/* The ICRC slot across the last pieces. */
	{
		uint8_t x[20] = { 0 }, y[2] = { 0 }, z[2] = { 0 };
		struct uroce_txpkt t = { .iov = { { x, 20 }, { y, 2 }, { z, 2 } }, .iovcnt = 3, .len = 24 };

		put_icrc(&t, 0x11223344);
		CHECK(y[0] == 0x44 && y[1] == 0x33 && z[0] == 0x22 && z[1] == 0x11 && x[19] == 0,
		      "ICRC slot split over two pieces, little-endian");
	}
	/* Source ports: Soft-RoCE's range, spread, with a slot per hash value (16384) and with
	 * the default slots; every slot's port is distinct. */
	{
		bool used[SPORT_RANGE] = { false };
		unsigned distinct = 0;

		for (unsigned sl = 0; sl < DEFAULT_SPORTS; sl++) {
			uint16_t p = slot_port(sl, DEFAULT_SPORTS, 0);

			distinct += !used[p - 0xC000];
			used[p - 0xC000] = true;
		}
		CHECK(distinct == DEFAULT_SPORTS, "%u distinct ports for %u slots", distinct, DEFAULT_SPORTS);
		CHECK(slot_port(DEFAULT_SPORTS - 1, DEFAULT_SPORTS, 0) >= 0xFF00, "slots span the range");
	}
	{
		unsigned seen_low = 0, seen_high = 0;

		for (uint32_t q = 2; q < 5000; q++) {
			uint16_t p = port_of(q, SPORT_RANGE);

			CHECK(p >= 0xC000, "QPN %u port %#x", q, p);
			seen_low += p < 0xE000;
			seen_high += p >= 0xE000;
		}
		CHECK(seen_low > 1000 && seen_high > 1000, "ports spread over the range");
	}
	return check_summary();
}
