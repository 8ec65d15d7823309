/* cmd_capture.c — `uroce capture [-d DEV] [-q QPN] [-w FILE|-] [-c COUNT]`: the RoCEv2
 * packets uroce's processes send and receive on a device, on either link, as pcap
 * (docs/daemon.md "Capturing"; the rings: ipc/cap_proto.h).
 *
 * uroced hands this connection the capture ring of every process of our uid on the device
 * (all of them to root) and switches them on; they switch off when we exit.  Each round
 * reads every ring, builds an Ethernet/IP/UDP frame around each packet as the kernel would
 * have put it on the wire (a GSO send's segments are recorded one by one, each with its
 * own IPv4 Identification and ICRC; the shared-memory link's packets get the headers and
 * the ICRC the UDP path would have given them), and writes the frames in time order.
 * A packet both sent and received by captured processes of this host is one packet on one
 * link: its received copy is left out (a capture on a wire sees it once).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ipc/cap_proto.h"
#include "ipc/ipc.h"
#include "net/frame.h"
#include "wire/icrc.h"
#include "wire/wire.h"

#define ETH_LEN 14
#define IP4_LEN 20
#define IP6_LEN 40
#define UDP_LEN 8
#define FRAME_MAX (ETH_LEN + IP6_LEN + UDP_LEN + UROCE_CAP_PKT_MAX)
#define ASK_EVERY_NS 100000000ull      /* new rings: asked for this often, unless
					* $UROCE_CAPTURE_ASK_MS says otherwise (tests: a capture
					* that asks late must still keep every packet) */
#define HOLD_NS 20000000ull            /* a record waits this long for older ones */
#define DEDUP_BITS 16
#define DEDUP_PROBES 32
#define DEDUP_AGE_NS 2000000000ull     /* a sent packet's received copy comes within this */

struct ring {
	int fd;
	uint8_t *map;
	size_t size;
	struct uroce_cap_hdr *hdr;
	const uint8_t *data;
	uint32_t r;
	uint64_t head;
	int32_t pid;
	uint64_t missed_base;
	uint64_t blocked_ts;           /* the last read stopped at a pending record this old */
	bool dead;
};

struct rec {
	uint64_t ts, seq;
	uint64_t key;                  /* the packet and its addresses (dedup) */
	uint32_t sqpn, dqpn;
	uint8_t dir;
	uint32_t len;                  /* frame bytes */
	uint8_t *frame;
};

struct dedup_ent {
	uint64_t key, ts;
	int32_t count;                 /* > 0: sent copies not yet received; < 0: received
					* copies written before their sent copy was read */
};

struct capture {
	struct ring *rings;
	size_t nrings;
	struct rec *pend;
	size_t npend, cappend;
	uint64_t seq;
	struct dedup_ent *dedup;
	FILE *out;                     /* pcap; NULL: one line per packet on stdout */
	uint32_t qpn;                  /* -q; UINT32_MAX: all */
	uint64_t limit, written, dups, bad_rings, gone_missed;
	unsigned idx;
	bool final;                    /* the last read: pending records count as sent */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool v4mapped(const uint8_t g[16])
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(g, pfx, 12);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t csum_fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static uint32_t csum_add(uint32_t s, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

/* The frame as the kernel sends it from a uroce socket: Ethernet (lo's zero addresses),
 * IPv4 with DF, the TOS/TTL and Identification recorded, or IPv6 with the traffic class,
 * flow label and hop limit recorded; UDP (checksum 0 over IPv4, as uroce's sockets send
 * it on lo; computed over IPv6, where it is mandatory).  The ICRC slot is the packet's
 * own unless it holds none (the shared-memory link without UROCE_SHM_ICRC): then the
 * ICRC for these headers (RoCEv2 A17.3.3).  Returns the frame length. */
static size_t build_frame(const struct uroce_cap_rec *h, const uint8_t *pkt, uint8_t *f)
{
	bool v4 = v4mapped(h->sgid);
	size_t ipl = v4 ? IP4_LEN : IP6_LEN, len = h->len;
	uint8_t *ip = f + ETH_LEN, *udp = ip + ipl, *pl = udp + UDP_LEN;
	uint8_t ttl = h->hop_limit ? h->hop_limit : 64;

	memset(f, 0, ETH_LEN);
	put16(f + 12, v4 ? 0x0800 : 0x86dd);
	if (v4) {
		memset(ip, 0, IP4_LEN);
		ip[0] = 0x45;
		ip[1] = h->tclass;
		put16(ip + 2, (uint16_t)(IP4_LEN + UDP_LEN + len));
		put16(ip + 4, h->ip_id);
		put16(ip + 6, 0x4000);
		ip[8] = ttl;
		ip[9] = 17;
		memcpy(ip + 12, h->sgid + 12, 4);
		memcpy(ip + 16, h->dgid + 12, 4);
		put16(ip + 10, csum_fold(csum_add(0, ip, IP4_LEN)));
	} else {
		uint32_t w = 6u << 28 | (uint32_t)h->tclass << 20 | (h->flow_label & 0xfffff);

		ip[0] = (uint8_t)(w >> 24);
		ip[1] = (uint8_t)(w >> 16);
		ip[2] = (uint8_t)(w >> 8);
		ip[3] = (uint8_t)w;
		put16(ip + 4, (uint16_t)(UDP_LEN + len));
		ip[6] = 17;
		ip[7] = ttl;
		memcpy(ip + 8, h->sgid, 16);
		memcpy(ip + 24, h->dgid, 16);
	}
	put16(udp, h->sport);
	put16(udp + 2, h->dport);
	put16(udp + 4, (uint16_t)(UDP_LEN + len));
	put16(udp + 6, 0);
	memcpy(pl, pkt, len);
	if (!(h->flags & UROCE_CAP_F_ICRC) && len >= UROCE_BTH_LEN + UROCE_ICRC_LEN) {
		uint32_t icrc;

		if (!uroce_icrc_frame(v4 ? AF_INET : AF_INET6, ip, ipl, udp, pl, len, &icrc))
			uroce_put_le32(pl + len - UROCE_ICRC_LEN, icrc);
	}
	if (!v4) {
		/* The pseudo-header (RFC 8200 8.1), the UDP header and the payload. */
		uint32_t s = csum_add(0, ip + 8, 32);
		uint16_t c;

		s += 17 + (uint32_t)(UDP_LEN + len);
		s = csum_add(s, udp, UDP_LEN + len);
		c = csum_fold(s);
		put16(udp + 6, c ? c : 0xffff);
	}
	return ETH_LEN + ipl + UDP_LEN + len;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* ---- the rings ---- */

static int ring_add(struct capture *c, int fd, const struct uroce_cap_info *info)
{
	struct ring *grown, *r;
	struct uroce_cap_hdr h;
	struct stat st;
	void *map;

	if (fstat(fd, &st) < 0 || st.st_size < (off_t)UROCE_CAP_HDR_BYTES ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != UROCE_CAP_MAGIC ||
	    h.version != UROCE_CAP_VERSION || h.ring_bytes < UROCE_CAP_RING_MIN ||
	    h.ring_bytes > UROCE_CAP_RING_MAX || (h.ring_bytes & (h.ring_bytes - 1)) ||
	    (uint64_t)st.st_size < UROCE_CAP_HDR_BYTES + (uint64_t)h.ring_bytes) {
		fprintf(stderr, "uroce capture: pid %d: not a capture ring, skipped\n", (int)info->pid);
		close(fd);
		return -EINVAL;
	}
	map = mmap(NULL, UROCE_CAP_HDR_BYTES + (size_t)h.ring_bytes, PROT_READ | PROT_WRITE,
		   MAP_SHARED, fd, 0);
	grown = realloc(c->rings, (c->nrings + 1) * sizeof(*grown));
	if (map == MAP_FAILED || !grown) {
		if (map != MAP_FAILED)
			munmap(map, UROCE_CAP_HDR_BYTES + (size_t)h.ring_bytes);
		if (grown)
			c->rings = grown;
		close(fd);
		return -ENOMEM;
	}
	c->rings = grown;
	r = &c->rings[c->nrings++];
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->map = map;
	r->size = UROCE_CAP_HDR_BYTES + (size_t)h.ring_bytes;
	r->hdr = map;
	r->data = r->map + UROCE_CAP_HDR_BYTES;
	r->r = h.ring_bytes;
	r->pid = info->pid;
	/* uroced moved head to tail when it switched the ring on for us. */
	r->head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE);
	r->missed_base = __atomic_load_n(&r->hdr->missed_base, __ATOMIC_ACQUIRE);
	return 0;
}

/* Every ring uroced has for us now.  0, or the IPC error (the daemon went away). */
static int ask_rings(struct capture *c, struct uroce_ipc *ipc, const char *dev)
{
	struct uroce_cap_info info;
	int fd, err;

	while (!(err = uroce_ipc_cap_next(ipc, dev, &info, &fd)))
		ring_add(c, fd, &info);
	return err == -ENOENT ? 0 : err;
}

static uint64_t ring_missed(const struct ring *r)
{
	uint64_t m = __atomic_load_n(&r->hdr->missed, __ATOMIC_ACQUIRE);

	return m > r->missed_base ? m - r->missed_base : 0;
}

static void ring_drop(struct capture *c, size_t i)
{
	struct ring *r = &c->rings[i];

	c->gone_missed += ring_missed(r);
	munmap(r->map, r->size);
	close(r->fd);
	c->rings[i] = c->rings[--c->nrings];
}

static int pend_add(struct capture *c, const struct uroce_cap_rec *h, const uint8_t *pkt)
{
	struct rec *e;
	uint8_t *f = malloc(ETH_LEN + IP6_LEN + UDP_LEN + h->len);

	if (!f)
		return -ENOMEM;
	if (c->npend == c->cappend) {
		size_t cap = c->cappend ? c->cappend * 2 : 1024;
		struct rec *g = realloc(c->pend, cap * sizeof(*g));

		if (!g) {
			free(f);
			return -ENOMEM;
		}
		c->pend = g;
		c->cappend = cap;
	}
	e = &c->pend[c->npend++];
	e->ts = h->ts_ns;
	e->seq = c->seq++;
	e->dir = h->dir;
	e->sqpn = h->sqpn;
	e->dqpn = h->len >= UROCE_BTH_LEN ? (uint32_t)pkt[5] << 16 | (uint32_t)pkt[6] << 8 | pkt[7] : 0;
	e->frame = f;
	e->len = (uint32_t)build_frame(h, pkt, f);
	/* The same packet between the same ends (the ICRC slot is the packet's as built: both
	 * copies of a shm packet without one hold zero). */
	e->key = fnv(fnv(0xcbf29ce484222325ull, h->sgid, 16), h->dgid, 16);
	e->key = fnv(e->key, (const uint8_t *)&h->sport, 2);
	e->key = fnv(e->key, pkt, h->len) | 1;
	return 0;
}

/* Everything published in ring @i.  A ring that breaks the rules is given up (its
 * process is not trusted: every length and index is checked before use). */
static void ring_read(struct capture *c, size_t i)
{
	struct ring *r = &c->rings[i];
	uint64_t tail = __atomic_load_n(&r->hdr->tail, __ATOMIC_ACQUIRE);
	uint64_t head = r->head;

	r->blocked_ts = 0;
	if (tail < head || tail - head > r->r)
		goto broken;
	while (head < tail) {
		uint32_t at = (uint32_t)(head & (r->r - 1)), need;
		struct uroce_cap_rec h;

		if (r->r - at < sizeof(uint32_t))
			goto broken;
		memcpy(&h.len, r->data + at, sizeof(h.len));
		if (h.len == UROCE_CAP_REC_WRAP) {
			head += r->r - at;
			continue;
		}
		if (r->r - at < sizeof(h) || h.len > UROCE_CAP_PKT_MAX)
			goto broken;
		memcpy(&h, r->data + at, sizeof(h));
		need = uroce_cap_rec_size(h.len);
		if (need > r->r - at || need > tail - head)
			goto broken;
		/* A UDP send not settled yet (cap_proto.h): wait for it, unless it is old (a
		 * producer that stopped) or this is the last read. */
		h.state = __atomic_load_n(r->data + at + offsetof(struct uroce_cap_rec, state),
					  __ATOMIC_ACQUIRE);
		if (h.state == UROCE_CAP_ST_PENDING && !c->final &&
		    now_ns() - h.ts_ns < UROCE_CAP_PENDING_MAX_NS) {
			r->blocked_ts = h.ts_ns ? h.ts_ns : 1;
			break;
		}
		if (h.state == UROCE_CAP_ST_CANCELLED) {
			head += need;
			continue;
		}
		if (pend_add(c, &h, r->data + at + sizeof(h)))
			break;   /* out of memory: read it next round */
		head += need;
	}
	r->head = head;
	__atomic_store_n(&r->hdr->head, head, __ATOMIC_RELEASE);
	return;
broken:
	fprintf(stderr, "uroce capture: pid %d: its ring is inconsistent, no longer read\n", (int)r->pid);
	c->bad_rings++;
	r->dead = true;
}

/* ---- output ---- */

static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A sent packet is remembered; its received copy (a captured process of this host got it)
 * finds it and is left out.  The other way round too: a ring handed over late (the
 * sender's process ended before the capture asked for its ring; docs/daemon.md) brings
 * sent copies whose received copies are written already, and those are left out instead,
 * so that each packet is written once and in time order.  Bounded: a full neighbourhood
 * forgets, and the copy is then written twice rather than a packet lost. */
static bool dedup_near(uint64_t a, uint64_t b)
{
	return (a > b ? a - b : b - a) < DEDUP_AGE_NS;
}

/* One copy (@sign +1 sent, -1 received): true if it is the other copy of a packet seen
 * already, which is then left out. */
static bool dedup_copy(struct capture *c, uint64_t key, uint64_t ts, int sign)
{
	size_t mask = (1u << DEDUP_BITS) - 1, free_at = SIZE_MAX;

	for (size_t k = 0; k < DEDUP_PROBES; k++) {
		struct dedup_ent *e = &c->dedup[(key + k) & mask];

		if (e->count && e->key == key && dedup_near(ts, e->ts)) {
			bool other = (e->count > 0) != (sign > 0);

			e->count += sign;
			if (!other)
				e->ts = ts;
			return other;
		}
		if (free_at == SIZE_MAX && (!e->count || !dedup_near(ts, e->ts)))
			free_at = (key + k) & mask;
	}
	if (free_at != SIZE_MAX)
		c->dedup[free_at] = (struct dedup_ent){ key, ts, sign };
	return false;
}

static int write_rec(struct capture *c, const struct rec *e)
{
	if (c->out) {
		uint32_t h[4] = { (uint32_t)(e->ts / 1000000000ull),
				  (uint32_t)(e->ts % 1000000000ull / 1000), e->len, e->len };

		if (fwrite(h, sizeof(h), 1, c->out) != 1 || fwrite(e->frame, e->len, 1, c->out) != 1)
			return -EIO;
	} else {
		uroce_decode_live(++c->idx, e->ts, e->frame, e->len);
	}
	c->written++;
	return 0;
}

/* Write the records older than @upto (all: UINT64_MAX) in time order. */
static int flush_pending(struct capture *c, uint64_t upto)
{
	size_t n = 0;
	int err = 0;

	if (!c->npend)
		return c->out && fflush(c->out) ? -EIO : 0;
	qsort(c->pend, c->npend, sizeof(*c->pend), rec_cmp);
	for (; n < c->npend && c->pend[n].ts <= upto; n++) {
		struct rec *e = &c->pend[n];
		bool keep;

		keep = !dedup_copy(c, e->key, e->ts, e->dir == UROCE_CAP_TX ? 1 : -1);
		c->dups += !keep;
		if (keep && c->qpn != UINT32_MAX && e->dqpn != c->qpn && e->sqpn != c->qpn)
			keep = false;
		if (keep && !err && (!c->limit || c->written < c->limit))
			err = write_rec(c, e);
		free(e->frame);
	}
	if (n) {
		memmove(c->pend, c->pend + n, (c->npend - n) * sizeof(*c->pend));
		c->npend -= n;
	}
	if (c->out && fflush(c->out))
		err = -EIO;
	else if (!c->out)
		fflush(stdout);
	return err;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: uroce capture [-d DEV] [-q QPN] [-w FILE|-] [-c COUNT]\n"
		"  The RoCEv2 packets uroce's processes send and receive on DEV (default: the first\n"
		"  device), over UDP and over the same-host shared-memory link, each as a wire\n"
		"  carries it (a GSO send as its segments), with its ICRC.  Only the processes of\n"
		"  your user (all of them for root).  Stops at COUNT packets, on SIGINT/SIGTERM, or\n"
		"  when uroced goes away; says on stderr how many packets it missed.\n"
		"  -w FILE   pcap (Ethernet) to FILE, '-' for stdout (| tshark -r - -d udp.port==4791,infiniband)\n"
		"            without -w: one line per packet, as `uroce decode` prints them\n"
		"  -q QPN    only packets to QPN or sent by QPN\n"
		"  -c COUNT  stop after COUNT packets\n");
}

int uroce_cmd_capture(int argc, char **argv)
{
	struct capture c = { .qpn = UINT32_MAX };
	const char *dev = NULL, *path = NULL;
	struct uroce_dev_info *devs = NULL;
	struct uroce_ipc *ipc = NULL;
	struct sigaction sa;
	uint64_t next_ask = 0, missed = 0, ask_every = ASK_EVERY_NS, asked = 0;
	const char *ask_env = getenv("UROCE_CAPTURE_ASK_MS");
	uint32_t session = 0;
	unsigned ndevs = 0;
	bool ipc_gone = false;
	int opt, err, status = 0;
	char devname[UROCE_DEV_NAME_MAX];

	while ((opt = getopt(argc, argv, "+d:q:w:c:h")) != -1) {
		char *end;

		switch (opt) {
		case 'd':
			dev = optarg;
			break;
		case 'q':
			errno = 0;
			c.qpn = (uint32_t)strtoul(optarg, &end, 0);
			if (errno || *end || !*optarg || c.qpn > 0xffffff) {
				fprintf(stderr, "uroce capture: -q %s: not a QPN (0..0xffffff)\n", optarg);
				return 1;
			}
			break;
		case 'w':
			path = optarg;
			break;
		case 'c':
			errno = 0;
			c.limit = strtoull(optarg, &end, 0);
			if (errno || *end || !*optarg || !c.limit) {
				fprintf(stderr, "uroce capture: -c %s: not a count\n", optarg);
				return 1;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}
	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	if (err) {
		fprintf(stderr, "uroce capture: cannot reach uroced: %s\n", strerror(-err));
		return 1;
	}
	if (!dev) {
		if (uroce_ipc_devices(ipc, &devs, &ndevs) || !ndevs) {
			fprintf(stderr, "uroce capture: no uroce device\n");
			uroce_ipc_close(ipc);
			free(devs);
			return 1;
		}
		snprintf(devname, sizeof(devname), "%s", devs[0].name);
		free(devs);
		dev = devname;
	}
	err = uroce_ipc_cap_start(ipc, dev, &session);
	if (err) {
		fprintf(stderr, "uroce capture: %s: %s\n", dev,
			err == -EBUSY ? "another capture of this device is running"
			: err == -EOPNOTSUPP ? "uroced does not know captures (older daemon)"
					     : strerror(-err));
		uroce_ipc_close(ipc);
		return 1;
	}
	if (path && !strcmp(path, "-")) {
		c.out = stdout;
	} else if (path) {
		c.out = fopen(path, "wb");
		if (!c.out) {
			fprintf(stderr, "uroce capture: %s: %s\n", path, strerror(errno));
			uroce_ipc_close(ipc);
			return 1;
		}
	}
	if (c.out) {
		/* libpcap's file header: microsecond timestamps, Ethernet. */
		uint32_t gh[6] = { 0xa1b2c3d4u, 2u | 4u << 16, 0, 0, 262144, 1 };

		if (fwrite(gh, sizeof(gh), 1, c.out) != 1 || fflush(c.out)) {
			fprintf(stderr, "uroce capture: writing the pcap header failed\n");
			status = 1;
			goto out;
		}
	}
	c.dedup = calloc(1u << DEDUP_BITS, sizeof(*c.dedup));
	if (!c.dedup) {
		status = 1;
		goto out;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);   /* a reader that went away: the write fails, we stop */
	if (ask_env && *ask_env) {
		char *end;
		unsigned long ms = strtoul(ask_env, &end, 10);

		if (*end || ms < 1 || ms > 3600000) {
			fprintf(stderr, "uroce capture: UROCE_CAPTURE_ASK_MS=%s: not 1..3600000\n", ask_env);
			status = 2;
			goto out;
		}
		ask_every = ms * 1000000ull;
	}
	fprintf(stderr, "uroce capture: capturing on %s\n", dev);

	while (!stop && !(c.limit && c.written >= c.limit)) {
		uint64_t t = now_ns(), upto;
		size_t before = c.npend;
		struct pollfd pfd = { .fd = uroce_ipc_fd(ipc), .events = POLLIN };

		if (t >= next_ask) {
			if (ask_rings(&c, ipc, dev)) {
				ipc_gone = true;   /* the daemon went away: what was read is written */
				stop = 1;
			}
			/* Every ring registered before this round is ours now; one registered
			 * later records only packets younger than @t. */
			asked = t;
			next_ask = t + ask_every;
		}
		for (size_t i = 0; i < c.nrings;) {
			bool gone = __atomic_load_n(&c.rings[i].hdr->gone, __ATOMIC_ACQUIRE);

			if (!c.rings[i].dead)
				ring_read(&c, i);
			/* A ring whose process is gone, read to its end, is let go of. */
			if (c.rings[i].dead || (gone && c.rings[i].head ==
					       __atomic_load_n(&c.rings[i].hdr->tail, __ATOMIC_ACQUIRE)))
				ring_drop(&c, i);
			else
				i++;
		}
		upto = t > HOLD_NS ? t - HOLD_NS : 0;
		/* Nothing younger than the last round of asking: a ring uroced has not handed
		 * over yet may hold older packets than those (time order across rings). */
		if (upto > asked)
			upto = asked;
		for (size_t i = 0; i < c.nrings; i++)   /* nothing younger than a pending send */
			if (c.rings[i].blocked_ts && c.rings[i].blocked_ts - 1 < upto)
				upto = c.rings[i].blocked_ts - 1;
		if (flush_pending(&c, upto)) {
			fprintf(stderr, "uroce capture: writing failed: %s\n", strerror(errno));
			status = 1;
			break;
		}
		if (!ipc_gone && poll(&pfd, 1, 0) == 1) {
			ipc_gone = true;   /* EOF: uroced is gone; read what the rings hold, stop */
			stop = 1;
		}
		if (c.npend == before && !stop) {
			struct timespec ts = { 0, 2000000 };

			nanosleep(&ts, NULL);
		}
	}
	/* The rings uroced has not handed over yet: a program that ended (or started) since
	 * the last ask, which for one shorter than the asking period is all of its packets. */
	if (!ipc_gone && ask_rings(&c, ipc, dev))
		ipc_gone = true;
	/* What the rings still hold (sends in flight settled: up to 100 ms), then everything
	 * pending. */
	for (int k = 0; k < 100; k++) {
		bool blocked = false;

		for (size_t i = 0; i < c.nrings; i++)
			if (!c.rings[i].dead) {
				ring_read(&c, i);
				blocked |= c.rings[i].blocked_ts != 0;
			}
		if (!blocked)
			break;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	c.final = true;
	for (size_t i = 0; i < c.nrings; i++)
		if (!c.rings[i].dead)
			ring_read(&c, i);
	if (flush_pending(&c, UINT64_MAX))
		status = 1;
	missed = c.gone_missed;
	for (size_t i = 0; i < c.nrings; i++)
		missed += ring_missed(&c.rings[i]);
	fprintf(stderr, "uroce capture: %" PRIu64 " packets captured, %" PRIu64
			" missed (rings full)%s\n",
		c.written, missed, ipc_gone ? "; uroced went away" : "");
out:
	while (c.nrings)
		ring_drop(&c, c.nrings - 1);
	free(c.rings);
	free(c.pend);
	free(c.dedup);
	if (c.out && c.out != stdout)
		fclose(c.out);
	uroce_ipc_close(ipc);
	return status;
}
