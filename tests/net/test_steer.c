/* test_steer.c — the reuseport steering program (src/net/steer.c).
 *
 * 1. The program, evaluated by steer.c's interpreter, agrees with a naive reference (a linear
 *    search of the rules) on random and edge-case QPNs and lengths.
 * 2. The kernel agrees: a real SO_REUSEPORT group on 127.0.0.1 delivers each datagram to
 *    the socket the rules name, by bind order, and short datagrams and the multicast QPN
 *    0xFFFFFF to the default socket.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "check.h"
#include "net/steer.h"


static uint32_t reference(const struct uroce_steer_rule *r, size_t n, uint16_t dflt,
			  uint32_t qpn, size_t len)
{
	if (len < 12 || qpn == 0xFFFFFF)   /* the multicast QPN is nobody's */
		return dflt;
	for (size_t i = 0; i < n; i++)
		if (qpn >= r[i].qpn_lo && qpn <= r[i].qpn_hi)
			return r[i].index;
	return dflt;
}

static void bth(uint8_t *p, uint32_t qpn, uint8_t byte4)
{
	memset(p, 0, 12);
	p[0] = 0x04; /* RC SEND_ONLY */
	p[4] = byte4;  /* FECN/BECN/reserved: must not disturb the QPN */
	p[5] = (uint8_t)(qpn >> 16);
	p[6] = (uint8_t)(qpn >> 8);
	p[7] = (uint8_t)qpn;
}

static void test_program(void)
{
	/* Ranges given out of order, touching the 24-bit edges. */
	const struct uroce_steer_rule rules[] = {
		{ 0x000100, 0x0001FF, 1 },
		{ 0xFFFF00, 0xFFFFFF, 3 },
		{ 0x000002, 0x000002, 2 },
		{ 0x123400, 0x1234FF, 4 },
	};
	const size_t n = sizeof(rules) / sizeof(rules[0]);
	struct sock_filter prog[64];
	int len = uroce_steer_build(rules, n, 0, prog, 64);
	CHECK(len == 8 + 4 * (int)n, "len %d", len);

	uint32_t edges[] = { 0, 1, 2, 3, 0xFF, 0x100, 0x1FF, 0x200, 0x1233FF, 0x123400,
			     0x1234FF, 0x123500, 0xFFFEFF, 0xFFFF00, 0xFFFFFE, 0xFFFFFF };
	uint8_t pkt[64];
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		bth(pkt, edges[i], 0xFF);
		uint32_t got = uroce_steer_eval(prog, (size_t)len, pkt, 40);
		uint32_t want = reference(rules, n, 0, edges[i], 40);
		CHECK(got == want, "qpn 0x%06x: got %u want %u", edges[i], got, want);
	}
	srandom(7);
	for (int i = 0; i < 200000; i++) {
		uint32_t q = (uint32_t)random() & 0xFFFFFF;
		if (i & 1) /* half of them near a rule */
			q = (rules[i % n].qpn_lo + (uint32_t)(random() % 0x300) - 0x100) & 0xFFFFFF;
		size_t plen = (size_t)(random() % 64);
		bth(pkt, q, (uint8_t)random());
		uint32_t got = uroce_steer_eval(prog, (size_t)len, pkt, plen);
		uint32_t want = reference(rules, n, 0, q, plen);
		if (got != want)
			CHECK(0, "qpn 0x%06x len %zu: got %u want %u", q, plen, got, want);
	}

	/* Bad rule sets. */
	struct uroce_steer_rule overlap[] = { { 10, 20, 1 }, { 20, 30, 2 } };
	CHECK(uroce_steer_build(overlap, 2, 0, prog, 64) == -EINVAL, "overlap");
	struct uroce_steer_rule inverted[] = { { 30, 20, 1 } };
	CHECK(uroce_steer_build(inverted, 1, 0, prog, 64) == -EINVAL, "inverted");
	struct uroce_steer_rule wide[] = { { 0, 0x1000000, 1 } };
	CHECK(uroce_steer_build(wide, 1, 0, prog, 64) == -EINVAL, "beyond 24 bits");
	CHECK(uroce_steer_build(rules, n, 0, prog, 8) == -E2BIG, "capacity");

	/* The largest rule set that fits BPF_MAXINSNS still steers its last rule. */
	struct uroce_steer_rule *many = calloc(UROCE_STEER_MAX_RULES + 1, sizeof(*many));
	struct sock_filter *big = calloc(BPF_MAXINSNS + 8, sizeof(*big));
	for (size_t i = 0; i <= UROCE_STEER_MAX_RULES; i++)
		many[i] = (struct uroce_steer_rule){ (uint32_t)(i * 4 + 2), (uint32_t)(i * 4 + 3),
						     (uint16_t)(i % 7 + 1) };
	CHECK(uroce_steer_build(many, UROCE_STEER_MAX_RULES + 1, 0, big, BPF_MAXINSNS + 8) == -E2BIG,
	      "too many rules");
	len = uroce_steer_build(many, UROCE_STEER_MAX_RULES, 0, big, BPF_MAXINSNS + 8);
	CHECK(len > 0 && len <= BPF_MAXINSNS, "max rules len %d", len);
	const struct uroce_steer_rule *last = &many[UROCE_STEER_MAX_RULES - 1];
	bth(pkt, last->qpn_hi, 0);
	CHECK(uroce_steer_eval(big, (size_t)len, pkt, 12) == last->index, "last rule");
	bth(pkt, last->qpn_hi + 1, 0);
	CHECK(uroce_steer_eval(big, (size_t)len, pkt, 12) == 0, "past last rule");
	free(many);
	free(big);
}

/* The kernel's view: three sockets in one reuseport group, steered by the program. */
static void test_kernel(void)
{
	enum { NSOCK = 3 };
	int s[NSOCK];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int one = 1;
	for (int i = 0; i < NSOCK; i++) {
		s[i] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		CHECK(s[i] >= 0, "socket: %s", strerror(errno));
		CHECK(setsockopt(s[i], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == 0, "reuseport");
		/* The first bind picks a free port; the others join its group. */
		CHECK(bind(s[i], (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
		if (i == 0)
			CHECK(getsockname(s[0], (struct sockaddr *)&a, &alen) == 0, "getsockname");
	}
	const struct uroce_steer_rule rules[] = { { 0x100, 0x1FF, 1 }, { 0x200, 0x2FF, 2 },
						  { 0xFFFFC0, 0xFFFFFF, 2 } };
	CHECK(uroce_steer_attach(s[2], rules, 3, 0) == 0, "attach: %s", strerror(errno));

	int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct { uint32_t qpn; size_t len; int want; } cases[] = {
		{ 0x100, 40, 1 }, { 0x1FF, 40, 1 }, { 0x200, 40, 2 }, { 0x2AB, 1000, 2 },
		{ 0x001, 40, 0 }, { 0x300, 40, 0 }, { 0x150, 8, 0 }, { 0x250, 0, 0 },
		{ 0xFFFFFE, 40, 2 }, { 0xFFFFFF, 40, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t pkt[1024];
		memset(pkt, 0xA5, sizeof(pkt));
		bth(pkt, cases[i].qpn, 0);
		pkt[8] = (uint8_t)i; /* tag in the PSN field */
		ssize_t w = sendto(tx, pkt, cases[i].len, 0, (struct sockaddr *)&a, sizeof(a));
		CHECK(w == (ssize_t)cases[i].len, "sendto");
		struct pollfd pfd[NSOCK];
		for (int k = 0; k < NSOCK; k++)
			pfd[k] = (struct pollfd){ .fd = s[k], .events = POLLIN };
		int got = -1;
		if (poll(pfd, NSOCK, 2000) > 0) {
			for (int k = 0; k < NSOCK; k++) {
				if (pfd[k].revents & POLLIN) {
					uint8_t buf[2048];
					ssize_t r = recv(s[k], buf, sizeof(buf), 0);
					CHECK(r == (ssize_t)cases[i].len, "recv len %zd", r);
					CHECK(r < 12 || buf[8] == (uint8_t)i, "tag");
					CHECK(got == -1, "delivered twice");
					got = k;
				}
			}
		}
		CHECK(got == cases[i].want, "case %zu qpn 0x%x len %zu: socket %d, want %d", i,
		      cases[i].qpn, cases[i].len, got, cases[i].want);
	}
	close(tx);
	for (int i = 0; i < NSOCK; i++)
		close(s[i]);
}

int main(void)
{
	test_program();
	test_kernel();
	return check_summary();
}
