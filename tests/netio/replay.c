/* replay.c — Linux Soft-RoCE's packets through netio's receive path.
 *
 *   test_netio_replay PCAP...      (in a private network namespace, lo up: nsrun.sh)
 *
 * Every RoCEv2 frame of the golden captures (tests/data, real rdma_rxe traffic with
 * hashed non-zero IPv4 Identifications) is sent again over lo from its own source address
 * and port, with its TOS, TTL and DF, to a receive socket set up exactly as
 * uroce_netio_open sets up the daemon's (rx_setup), and drained with uroce_netio_poll.
 * Checks for each: delivered (not dropped), the ICRC verifies by solving for the
 * Identification and the ID is one netio's receive check expects from that sender (Linux's
 * counter: uroce_icrc_rx_check), the recovered ID is the one in the capture, the IPv4 header netio hands
 * to UD receivers equals the captured header byte for byte, source GID/port and
 * destination GID are the capture's.  No daemon: this is the receive pipeline, not the
 * steering (tested in test_netio). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "net/frame.h"
#include "net/pcap_io.h"
#include "transport/netio.c"   /* statics: struct uroce_netio, rx_setup */
#include "transport/ud.h"

struct cap {
	uint8_t ip[60];
	size_t ip_len;
	uint8_t payload[9000];
	size_t len;
	struct in_addr src, dst;
	uint16_t sport;
	unsigned idx;
	uint64_t t_us;          /* capture time */
};

struct walk {
	const char *file;
	struct cap *caps;
	unsigned n, cap;
};

static int on_frame(void *arg, unsigned idx, const struct timeval *ts, const uint8_t *frame,
		    size_t len, int linktype)
{
	struct walk *w = arg;
	struct uroce_frame f;
	struct cap *c;

	if (uroce_pcap_frame(frame, len, linktype, &f) || f.family != AF_INET ||
	    f.dport != UROCE_UDP_PORT || f.ip_len > 60 || f.payload_len > sizeof(c->payload))
		return 0;   /* not RoCEv2 over IPv4 (ARP, ICMP errors, ...) */
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 64;
		w->caps = realloc(w->caps, w->cap * sizeof(*w->caps));
	}
	c = &w->caps[w->n++];
	memcpy(c->ip, f.ip, f.ip_len);
	c->ip_len = f.ip_len;
	memcpy(c->payload, f.payload, f.payload_len);
	c->len = f.payload_len;
	c->src = f.src.v4;
	c->dst = f.dst.v4;
	c->sport = f.sport;
	c->idx = idx;
	c->t_us = (uint64_t)ts->tv_sec * 1000000u + (uint64_t)ts->tv_usec;
	return 0;
}

struct expect {
	const char *file;
	const struct cap *c;
	unsigned got;
};

static int on_rx(void *arg, struct uroce_rxpkt *p)
{
	struct expect *e = arg;
	const struct cap *c = e->c;
	uint16_t id = uroce_get_be16(c->ip + 4);
	uint8_t grh[UROCE_UD_GRH_LEN];

	e->got++;
	uroce_ud_grh_area(p, grh);
	CHECK(p->len == c->len && !memcmp(p->buf, c->payload, c->len), "%s #%u: payload", e->file, c->idx);
	CHECK(p->pkt.icrc_status == (id ? UROCE_ICRC_OK_ID : UROCE_ICRC_OK), "%s #%u: ICRC status %d (ID %#x)",
	      e->file, c->idx, p->pkt.icrc_status, id);
	CHECK(p->pkt.ip_id == id, "%s #%u: recovered ID %#x, captured %#x", e->file, c->idx, p->pkt.ip_id, id);
	CHECK(c->ip_len != 20 || !memcmp(grh + 20, c->ip, 20),
	      "%s #%u: IPv4 header for the GRH area differs from the captured one", e->file, c->idx);
	CHECK(p->traffic_class == c->ip[1] && p->hop_limit == c->ip[8] && p->flow_label == 0,
	      "%s #%u: traffic class %#x hop limit %u", e->file, c->idx, p->traffic_class, p->hop_limit);
	CHECK(!memcmp(p->src.gid + 12, &c->src, 4) && p->src.port == c->sport &&
	      !memcmp(p->dgid + 12, &c->dst, 4), "%s #%u: addresses", e->file, c->idx);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void add_addr(struct in_addr a)
{
	static struct in_addr done[64];
	static unsigned n;
	char cmd[128], s[INET_ADDRSTRLEN];

	for (unsigned i = 0; i < n; i++)
		if (done[i].s_addr == a.s_addr)
			return;
	if (n < 64)
		done[n++] = a;

	inet_ntop(AF_INET, &a, s, sizeof(s));
	snprintf(cmd, sizeof(cmd), "ip addr add %s/32 dev lo 2>/dev/null", s);
	if (system(cmd)) {
		/* already there */
	}
}

int main(int argc, char **argv)
{
	struct uroce_netio *nio = calloc(1, sizeof(*nio));
	struct sockaddr_in6 any = { .sin6_family = AF_INET6, .sin6_port = htons(4791) };
	int zero = 0, total = 0;
	struct uroce_netio_stats st;

	nio->c = nio->own;
	pthread_mutex_init(&nio->rx_lock, NULL);
	nio->fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (nio->fd < 0 || setsockopt(nio->fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) ||
	    bind(nio->fd, (struct sockaddr *)&any, sizeof(any)) || rx_setup(nio)) {
		perror("receive socket");
		return 1;
	}
	for (int a = 1; a < argc; a++) {
		struct walk w = { .file = argv[a] };
		char err[256];
		const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];

		CHECK(uroce_pcap_foreach(argv[a], on_frame, &w, err, sizeof(err)) == 0, "%s: %s", argv[a], err);
		for (unsigned i = 0; i < w.n; i++) {
			const struct cap *c = &w.caps[i];
			struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = c->src,
						   .sin_port = htons(c->sport) };
			struct sockaddr_in dst = { .sin_family = AF_INET, .sin_addr = c->dst,
						   .sin_port = htons(4791) };
			int one = 1, tos = c->ip[1], ttl = c->ip[8];
			int pmtu = (c->ip[6] & 0x40) ? IP_PMTUDISC_DO : IP_PMTUDISC_DONT;
			struct expect e = { .file = base, .c = c };
			int s;

			/* A pause of the capture (rdma_cm's retries seconds apart) is a pause here
			 * too, shortened: netio's receive check allows a Linux sender's counter to
			 * move further the longer it was silent, any ID after 65 ms (docs/wire.md). */
			if (i && c->t_us - w.caps[i - 1].t_us > 100000)
				usleep(70000);
			add_addr(c->src);
			add_addr(c->dst);
			s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
			setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			setsockopt(s, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
			setsockopt(s, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
			setsockopt(s, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
			CHECK(bind(s, (struct sockaddr *)&src, sizeof(src)) == 0, "%s #%u: bind", base, c->idx);
			CHECK(sendto(s, c->payload, c->len, 0, (struct sockaddr *)&dst, sizeof(dst)) ==
			      (ssize_t)c->len, "%s #%u: sendto: %s", base, c->idx, strerror(errno));
			close(s);
			if (total == 0) {
				/* The try-lock: while another thread drains, poll returns 0 at once
				 * and leaves the datagram for that thread. */
				struct pollfd pfd = { .fd = nio->fd, .events = POLLIN };

				CHECK(poll(&pfd, 1, 5000) == 1, "first datagram waiting");
				pthread_mutex_lock(&nio->rx_lock);
				CHECK(uroce_netio_poll(nio, 4, on_rx, &e) == 0 && e.got == 0,
				      "poll while another thread drains returns 0");
				pthread_mutex_unlock(&nio->rx_lock);
			}
			/* Until it is delivered or counted as a drop (bounded). */
			uint64_t drops0 = __atomic_load_n(&nio->c[C_RX_DROPS], __ATOMIC_RELAXED);

			for (uint64_t end = now_ms() + 5000; !e.got && now_ms() < end;) {
				struct pollfd pfd = { .fd = nio->fd, .events = POLLIN };

				if (__atomic_load_n(&nio->c[C_RX_DROPS], __ATOMIC_RELAXED) != drops0)
					break;
				if (uroce_netio_poll(nio, 4, on_rx, &e) == 0)
					poll(&pfd, 1, 100);
			}
			CHECK(e.got == 1, "%s #%u: delivered %u times", base, c->idx, e.got);
			total++;
		}
		printf("%s: %u RoCEv2 frames replayed\n", base, w.n);
		free(w.caps);
		/* The captures are separate sessions, hours apart: the senders' ID counters moved
		 * on in between.  netio's receive check takes any ID from a Linux sender silent
		 * for 65 ms or more (docs/wire.md), as it would have been here. */
		usleep(70000);
	}
	uroce_netio_stats(nio, &st);
	for (int r = 0; r < UROCE_RX_NUM; r++)
		CHECK(st.rx_drop[r] == 0, "%llu drops for %s", (unsigned long long)st.rx_drop[r],
		      uroce_rx_err_name(r));
	CHECK(total > 100 && st.rx_packets == (uint64_t)total, "%d replayed, %llu received", total,
	      (unsigned long long)st.rx_packets);
	uroce_netio_close(nio);
	return check_summary();
}
