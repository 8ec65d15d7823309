/* netio.c — the data path's sockets (netio.h, docs/netio.md, docs/transport.md "Sockets").
 *
 * Receive: the context's member of the device's SO_REUSEPORT group on UDP 4791, from uroced
 * (uroce_ipc_rx_socket).  The daemon keeps its own copy of that descriptor (it drains the
 * socket when our connection goes), so the file status flags are shared: we never set
 * O_NONBLOCK and read with MSG_DONTWAIT instead.  Datagrams are read in batches
 * (recvmmsg); with UDP_GRO the kernel may hand over several equal-size datagrams of one
 * flow as one buffer plus their size (cmsg UDP_GRO), which is split back here — each
 * segment is a complete RoCEv2 packet with its own ICRC.  Beside it, up to
 * UROCE_UDP_CONNECT sockets connected to one sender each ("connected receive sockets").
 *
 * Send: one unconnected UDP socket per QP, bound to the source GID's address and the QP's
 * source port.  Runs of equal-size packets to one destination go out in one sendmsg with
 * UDP_SEGMENT (GSO); the last of a run may be shorter.  Linux numbers the IPv4
 * Identification of the segments of one GSO send 0, 1, 2, ... (unconnected, DF), so segment
 * k's ICRC is computed for ID k (netio_icrc.c).
 *
 * Counters: atomics (relaxed).  The ones `uroce stat` shows live in the shared-memory block
 * registered with uroced (docs/daemon.md "Data-path counters"); the rest (drops by reason)
 * in the netio object.  Every datagram read is counted exactly once: as received (valid),
 * or as a drop under one reason.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "transport/capture.h"
#include "transport/fault.h"
#include "transport/netio.h"
#include "transport/shm.h"
#include "verbs/verbs.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX 62      /* Linux 5.0 */
#endif
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11         /* <linux/in6.h>; glibc's <netinet/in.h> lacks it */
#endif

#define ROCE_PORT 4791
#define SPORT_BASE 0xC000u
#define SPORT_RANGE 16384u           /* 0xC000-0xFFFF */
#define DEFAULT_SPORTS 256u          /* UROCE_UDP_SPORTS: port slots per source GID */
#define RX_BATCH 16                  /* datagrams per recvmmsg */
#define RX_BUF_GRO 65536             /* a coalesced datagram is at most 64 KiB */
#define RX_BUF_PLAIN 9216            /* largest RoCE packet (4096 MTU) fits; jumbo too */
#define SOCK_BUF (4 << 20)           /* asked for; the kernel caps at [rw]mem_max */
#define GSO_MAX_SEGS 64              /* UDP_MAX_SEGMENTS of older kernels (newer: 128) */
#define GSO_MAX_BYTES 65000          /* under 64 KiB - IP/UDP headers, either family */
#define TX_BATCH 64                  /* packets per sendmmsg in the fallback path */
#define TX_SOCK_BUCKETS 256          /* the send sockets' hash table (struct tx_sock) */
#define CONN_DEFAULT 8               /* UROCE_UDP_CONNECT: connected receive sockets */
#define CONN_MAX 64
#define CONN_COLD_EVERY 4            /* a spinning poll reads a cold socket every 4th time */
#define GROUP_SOCK (-1)              /* socket index of the group member (nio->fd) */

/* ---------------------------------------------------------------- counters */

/* Published in the shared block (names as `uroce stat` prints them), in this order. */
#define NETIO_PUB_COUNTERS(X)                                                           \
	X(TX_PACKETS, "tx_packets")                                                     \
	X(TX_BYTES, "tx_bytes")                                                         \
	X(TX_ERRORS, "tx_errors")                                                       \
	X(TX_GSO, "tx_gso_sends")                                                       \
	X(TX_SHORT, "tx_short")                                                         \
	X(RX_PACKETS, "rx_packets")                                                     \
	X(RX_BYTES, "rx_bytes")                                                         \
	X(RX_DROPS, "rx_drops")                                                         \
	X(RX_BAD_ICRC, "rx_bad_icrc")                                                   \
	X(RX_MISROUTED, "rx_misrouted")                                                 \
	X(RX_GRO, "rx_gro_datagrams")                                                   \
	X(RX_TRUNC, "rx_truncated")                                                     \
	X(FAULT_DROP, "fault_drop")                                                     \
	X(FAULT_DUP, "fault_dup")                                                       \
	X(FAULT_REORDER, "fault_reorder")                                               \
	X(FAULT_CORRUPT, "fault_corrupt")                                               \
	X(CAP_MISSED, "capture_missed")                                                 \
	X(RX_CONNECTED, "rx_connected")                                                 \
	X(RX_CONN_OPENED, "rx_conn_sockets")                                            \
	X(RX_CONN_SHARED, "rx_conn_shared")

enum netio_ctr {
#define X(n, s) C_##n,
	NETIO_PUB_COUNTERS(X)
#undef X
	C_NUM
};

/* The block also holds the shared-memory link's counters (shm.h), after netio's: the
 * context's two links to its peers, one `uroce stat` line. */
#define PUB_NUM (C_NUM + UROCE_SHM_C_NUM)

static const char *const netio_ctr_names[PUB_NUM] = {
#define X(n, s) s,
	NETIO_PUB_COUNTERS(X)
	UROCE_SHM_COUNTERS(X)
#undef X
};

_Static_assert(PUB_NUM <= UROCE_CNT_MAX, "the shared block holds at most UROCE_CNT_MAX counters");

/* ---------------------------------------------------------------- objects */

/* A connected receive socket's 4-tuple: the sender's address and port, our address (the
 * port is 4791). */
struct conn_key {
	uint8_t src[16], dst[16];
	uint16_t sport;
};

struct rx_conn {
	int fd;
	struct conn_key key;
	bool shared;                       /* a datagram for another process came: close it */
};

struct uroce_netio {
	struct uroce_context *ctx;
	int fd;
	uint32_t ifindex;                  /* for IPv6 link-local scope */
	bool gro;                          /* UDP_GRO enabled on the receive socket */
	bool gso;                          /* use UDP_SEGMENT on send (UROCE_NETIO_GSO=0: off) */

	pthread_mutex_t rx_lock;           /* try-locked by uroce_netio_poll */
	atomic_bool rx_missed;             /* a poller found rx_lock taken: the holder polls
					    * again for it before returning (see uroce_netio_poll) */
	atomic_bool grh_on;                /* the GRH cmsgs are on (uroce_netio_rx_grh) */
	bool rx_was_empty;                 /* the last drain read nothing (under rx_lock) */
	size_t rx_buf_size;
	uint8_t *rx_bufs;                  /* RX_BATCH * rx_buf_size */
	struct mmsghdr rx_msgs[RX_BATCH];
	struct iovec rx_iov[RX_BATCH];
	struct sockaddr_in6 rx_names[RX_BATCH];
	unsigned rx_dirty;                 /* rx_msgs[0..rx_dirty) may hold a previous call's
					    * lengths and flags (see uroce_netio_poll) */
	/* pktinfo, TOS, TTL, GRO size (112 bytes on x86-64), with room for a cmsg we did not
	 * ask for (a truncated list could lose the GRO size: see MSG_CTRUNC below). */
	_Alignas(struct cmsghdr) uint8_t rx_cmsg[RX_BATCH][CMSG_SPACE(sizeof(struct in6_pktinfo)) +
							  CMSG_SPACE(sizeof(int)) * 8];

	pthread_mutex_t fault_lock;        /* the decision sequence is per context */
	struct uroce_fault fault;

	struct uroce_counters *cnt;        /* registered with uroced; NULL if that failed */
	uint64_t own[PUB_NUM];             /* used when there is no shared block */
	uint64_t *c;                       /* the C_* counters: cnt's or own */
	uint64_t rx_drop[UROCE_RX_NUM];    /* by reason (not published: too many names) */

	/* The IPv4 Identifications each sender uses (uroce_icrc_rx_check), under rx_lock;
	 * rx_now is the clock of the batch being delivered (0: not read yet). */
	struct uroce_icrc_rx idrx;
	uint64_t rx_now;
	/* The ICRC base (uroce_icrc_base) of the last sender (source address and port, and
	 * our address), under rx_lock: a stream comes from one. */
	bool rx_base_ok;
	uint16_t rx_base_sport;
	uint8_t rx_base_src[16], rx_base_dst[16];
	uint32_t rx_base;
	struct uroce_cap *cap;             /* the capture tap (capture.h); NULL: none */

	/* Connected receive sockets ("connected receive sockets" below).  conn[] changes
	 * under both rx_lock and conn_lock; the poll reads it under rx_lock, the watch
	 * (uroce_netio_watch) under conn_lock. */
	pthread_mutex_t conn_lock;
	unsigned conn_max;                 /* UROCE_UDP_CONNECT (0: none) */
	unsigned nconn;
	struct rx_conn *conn;              /* conn_max of them */
	int hot;                           /* the socket a spinning poll reads (GROUP_SOCK or
					    * a conn index), the last one that had data */
	unsigned spins, cold_next;         /* spinning polls; the next cold socket to read */
	int rx_cur;                        /* the socket of the batch being delivered */
	bool want_conn;                    /* a packet asked for a socket to its 4-tuple */
	bool conn_dirty;                   /* a connected socket was found shared */
	bool conn_off;                     /* one was, or one failed to open: open no more */
	bool conn_crowded;                 /* the device had other clients at the last look */
	unsigned conn_crowd_pkts;          /* packets since (look again every 65,536) */
	struct conn_key want;
	int epfd;                          /* the progress thread's epoll set (-1: none) */
	bool watch_on;                     /* the sockets are in it (under conn_lock) */

	/* The send sockets, shared by the QPs of a port slot (struct tx_sock). */
	pthread_mutex_t tx_lock;
	struct tx_sock *tx_socks[TX_SOCK_BUCKETS];
	unsigned tx_nsocks;                /* open now (under tx_lock; read relaxed for stats) */
	unsigned tx_nsocks_max;            /* the most open at once */
	unsigned sports;                   /* port slots per source GID (0: DEFAULT_SPORTS) */
};

struct uroce_netio_tx {
	struct uroce_netio *nio;
	struct tx_sock *sock;              /* shared with the other QPs of its key */
	int fd;                            /* sock's */
	unsigned slot;                     /* the QPN's port slot */
	int family;                        /* AF_INET (IPv4-mapped GID) or AF_INET6 */
	uint8_t sgid[16];
	uint16_t sport;
	bool gso;                          /* cleared when the kernel refuses UDP_SEGMENT */
	uint8_t tclass, hop_limit;         /* sock's GRH fields (uroce_netio_tx_set_grh) */
	uint32_t qpn;                      /* the QP it sends for (for a capture) */
	/* The ICRC base (uroce_icrc_base) of the last destination: an RC or UC QP sends to
	 * one, a UD QP often to the same one again.  Cleared when the port changes. */
	bool base_ok;
	uint16_t base_port;
	uint8_t base_gid[16];
	uint32_t base;

	/* Fault injection (only allocated when UROCE_FAULT is set). */
	uint8_t *scratch;                  /* a corrupted copy; never the caller's memory */
	uint8_t *held;                     /* reorder: a packet to send after the next one */
	size_t held_len;
	struct uroce_netaddr held_dst;
	bool has_held;
};

static inline void ctr_add(struct uroce_netio *nio, enum netio_ctr i, uint64_t v)
{
	__atomic_fetch_add(&nio->c[i], v, __ATOMIC_RELAXED);
}

/* A counter only the holder of rx_lock writes: a load and a store, not a locked add (two
 * per packet received); readers (uroced, uroce_netio_stats) still see whole values. */
static inline void ctr_add_rx(struct uroce_netio *nio, enum netio_ctr i, uint64_t v)
{
	__atomic_store_n(&nio->c[i], __atomic_load_n(&nio->c[i], __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

static inline uint64_t ctr_get(const struct uroce_netio *nio, enum netio_ctr i)
{
	return __atomic_load_n(&nio->c[i], __ATOMIC_RELAXED);
}

static inline bool gid_eq(const uint8_t a[16], const uint8_t b[16])
{
	uint64_t x[2], y[2];

	memcpy(x, a, 16);
	memcpy(y, b, 16);
	return !((x[0] ^ y[0]) | (x[1] ^ y[1]));
}

static bool gid_is_v4mapped(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };

	return !memcmp(gid, prefix, sizeof(prefix));
}

static bool gid_is_linklocal(const uint8_t gid[16])
{
	return gid[0] == 0xFE && (gid[1] & 0xC0) == 0x80;
}

static bool env_off(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no"));
}

static bool env_on(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "yes"));
}

/* ---------------------------------------------------------------- open / close */

static void setup_counters(struct uroce_netio *nio, struct uroce_context *ctx)
{
	uint64_t *block;

	nio->c = nio->own;
	if (!ctx->ipc || uroce_counters_create(netio_ctr_names, PUB_NUM, NULL, 0, 0, &nio->cnt))
		return;
	/* Without the daemon seeing it, the block is only overhead; keep counting privately.
	 * A registration failure is not an error of the data path. */
	if (uroce_ipc_counters_register(ctx->ipc, ctx->dev->ibdev.name, nio->cnt)) {
		uroce_counters_destroy(nio->cnt);
		nio->cnt = NULL;
		return;
	}
	block = uroce_counters_ctx(nio->cnt);
	if (block)
		nio->c = block;
}

/* The cmsgs a UD GRH needs (ud.c): TOS and TTL of IPv4 packets (the IP header as sent;
 * these SOL_IP options apply to IPv4 datagrams on a dual-stack socket), and the IPv6
 * traffic class, hop limit and flow label.  Each is a cmsg the kernel writes for every
 * datagram: about 0.1 us per receive call (measured with recvmmsg of one datagram),
 * which RC and UC, whose packets carry no GRH to the application, should not pay. */
static void grh_opts(int fd, int on)
{
	(void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IPV6, IPV6_FLOWINFO, &on, sizeof(on));
}

void uroce_netio_rx_grh(struct uroce_netio *nio)
{
	if (nio && !atomic_exchange(&nio->grh_on, true)) {
		grh_opts(nio->fd, 1);
		pthread_mutex_lock(&nio->conn_lock);
		for (unsigned i = 0; i < nio->nconn; i++)
			grh_opts(nio->conn[i].fd, 1);
		pthread_mutex_unlock(&nio->conn_lock);
	}
}

/* The receive socket's options and buffers (nio->fd set).  The options live on the socket,
 * which the daemon also holds; all of them are harmless for its draining (and the next
 * client sets them again).  0 or -errno. */
static int rx_setup(struct uroce_netio *nio)
{
	int one = 1, buf = SOCK_BUF;

	if (setsockopt(nio->fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)) < 0)
		return -errno;
	/* The GRH options start off: a member socket handed over again keeps what its last
	 * client set (uroce_netio_rx_grh). */
	grh_opts(nio->fd, 0);
	if (setsockopt(nio->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		(void)setsockopt(nio->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	nio->gro = !env_off("UROCE_NETIO_GRO") &&
		   setsockopt(nio->fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) == 0;
	nio->rx_buf_size = nio->gro ? RX_BUF_GRO : RX_BUF_PLAIN;
	nio->rx_bufs = malloc(RX_BATCH * nio->rx_buf_size);
	if (!nio->rx_bufs)
		return -ENOMEM;
	/* The message headers point at fixed buffers: set them up once; each poll resets only
	 * the lengths and flags the kernel wrote. */
	for (unsigned k = 0; k < RX_BATCH; k++) {
		struct msghdr *m = &nio->rx_msgs[k].msg_hdr;

		nio->rx_iov[k].iov_base = nio->rx_bufs + k * nio->rx_buf_size;
		nio->rx_iov[k].iov_len = nio->rx_buf_size;
		memset(m, 0, sizeof(*m));
		m->msg_name = &nio->rx_names[k];
		m->msg_iov = &nio->rx_iov[k];
		m->msg_iovlen = 1;
		m->msg_control = nio->rx_cmsg[k];
	}
	nio->rx_dirty = RX_BATCH;
	return 0;
}

/* A count from the environment: @def when unset or empty, else a number in [@lo, @hi]
 * (-EINVAL and a message naming @what otherwise). */
static int env_count(const char *name, unsigned def, unsigned lo, unsigned hi, const char *what,
		     unsigned *out)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	*out = def;
	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n < lo || n > hi) {
		fprintf(stderr, "uroce: %s=%s: want a number of %s, %u-%u\n", name, v, what, lo, hi);
		return -EINVAL;
	}
	*out = (unsigned)n;
	return 0;
}

/* UROCE_UDP_SPORTS: how many UDP source ports (and so send sockets) a context's QPs of one
 * source GID spread over, 1-16384 (see "send sockets" below). */
static int sports_env(unsigned *out)
{
	return env_count("UROCE_UDP_SPORTS", DEFAULT_SPORTS, 1, SPORT_RANGE, "ports", out);
}

/* UROCE_UDP_CONNECT: how many connected receive sockets a context may open, 0-CONN_MAX
 * (0: none; see "connected receive sockets" below). */
static int conn_env(unsigned *out)
{
	return env_count("UROCE_UDP_CONNECT", CONN_DEFAULT, 0, CONN_MAX, "sockets", out);
}

int uroce_netio_open(struct uroce_context *ctx, struct uroce_netio **out)
{
	struct uroce_netio *nio;
	char err[128];
	int ret;

	if (!ctx || !out || !ctx->dev)
		return -EINVAL;
	if (!ctx->ipc)
		return -ENOTCONN;
	nio = calloc(1, sizeof(*nio));
	if (!nio)
		return -ENOMEM;
	nio->ctx = ctx;
	nio->fd = -1;
	nio->epfd = -1;
	nio->hot = GROUP_SOCK;
	nio->rx_cur = GROUP_SOCK;
	pthread_mutex_init(&nio->rx_lock, NULL);
	pthread_mutex_init(&nio->conn_lock, NULL);
	pthread_mutex_init(&nio->fault_lock, NULL);
	nio->ifindex = uroce_devview_ifindex(&ctx->dev->view);

	ret = uroce_fault_parse(&nio->fault, getenv(UROCE_FAULT_ENV), err, sizeof(err));
	if (ret) {
		/* A typo in a test's fault spec must not silently test nothing. */
		fprintf(stderr, "uroce: %s: %s\n", UROCE_FAULT_ENV, err);
		goto fail;
	}
	nio->gso = !env_off("UROCE_NETIO_GSO");
	pthread_mutex_init(&nio->tx_lock, NULL);
	ret = sports_env(&nio->sports);
	if (!ret)
		ret = conn_env(&nio->conn_max);
	if (ret)
		goto fail;
	if (nio->conn_max && !(nio->conn = calloc(nio->conn_max, sizeof(*nio->conn)))) {
		ret = -ENOMEM;
		goto fail;
	}
	/* For IPv4 senders whose Identifications follow no pattern (docs/netio.md): accept
	 * any ID the ICRC allows, with 16 bits of checking, as before issue #17. */
	nio->idrx.any_id = env_on("UROCE_NETIO_ICRC_ANY_ID");

	ret = uroce_ipc_rx_socket(ctx->ipc, ctx->dev->ibdev.name, &nio->fd);
	if (!ret)
		ret = rx_setup(nio);
	if (ret)
		goto fail;
	setup_counters(nio, ctx);
	if (uroce_cap_open(ctx, &nio->c[C_CAP_MISSED], &nio->cap))
		nio->cap = NULL;   /* an older daemon: no capture, the data path is the same */
	*out = nio;
	return 0;
fail:
	if (nio->fd >= 0)
		close(nio->fd);
	free(nio->rx_bufs);
	free(nio->conn);
	pthread_mutex_destroy(&nio->tx_lock);
	pthread_mutex_destroy(&nio->rx_lock);
	pthread_mutex_destroy(&nio->conn_lock);
	pthread_mutex_destroy(&nio->fault_lock);
	free(nio);
	return ret;
}

static void tx_socks_free(struct uroce_netio *nio);

void uroce_netio_close(struct uroce_netio *nio)
{
	if (!nio)
		return;
	if (nio->fd >= 0)
		close(nio->fd);
	for (unsigned i = 0; i < nio->nconn; i++)
		close(nio->conn[i].fd);
	free(nio->conn);
	/* The daemon keeps the block mapped until the connection closes; our mapping goes. */
	if (nio->cnt)
		uroce_counters_destroy(nio->cnt);
	uroce_cap_close(nio->cap);
	free(nio->rx_bufs);
	tx_socks_free(nio);
	pthread_mutex_destroy(&nio->tx_lock);
	pthread_mutex_destroy(&nio->rx_lock);
	pthread_mutex_destroy(&nio->conn_lock);
	pthread_mutex_destroy(&nio->fault_lock);
	free(nio);
}

int uroce_netio_fd(const struct uroce_netio *nio)
{
	return nio ? nio->fd : -1;
}

uint64_t *uroce_netio_shm_counters(struct uroce_netio *nio)
{
	return nio ? nio->c + C_NUM : NULL;
}

struct uroce_cap *uroce_netio_cap(struct uroce_netio *nio)
{
	return nio ? nio->cap : NULL;
}

uint16_t uroce_netio_tx_sport(const struct uroce_netio_tx *tx)
{
	return tx ? tx->sport : 0;
}

/* ---------------------------------------------------------------- send sockets */

/* The UDP source port is spread by a hash of the QPN over Soft-RoCE's range (0xC000-0xFFFF),
 * so that ECMP and RSS see different flows for different QPs (RoCEv2 A17.4.3 leaves the
 * port to the sender, for entropy).  A port needs a socket bound to it, and a socket is a
 * file descriptor: with a port per QP, 20,000 QPs needed 20,000 descriptors.  So the range
 * is cut into nio->sports slots (UROCE_UDP_SPORTS, default DEFAULT_SPORTS), the QPs of a
 * slot share one socket (struct tx_sock), and a context holds at most that many send
 * sockets per source GID and GRH, however many QPs it has.  16384 slots is a port per hash
 * value, as Soft-RoCE.  @probe > 0 gives the next candidates when the port is held by a
 * socket we cannot share it with. */
#define SPORT_PROBES 32

static unsigned sport_slot(uint32_t qpn, unsigned slots)
{
	uint32_t h = (qpn * 0x9E3779B1u) >> 18;  /* Fibonacci hashing: the top bits mix all of qpn */

	return (unsigned)(((uint64_t)h * slots) >> 14);
}

static uint16_t slot_port(unsigned slot, unsigned slots, unsigned probe)
{
	return (uint16_t)(SPORT_BASE | ((slot * (SPORT_RANGE / slots) + probe * 0x9E5u) & 0x3FFFu));
}

static void to_sockaddr(const uint8_t gid[16], uint16_t port, uint32_t ifindex,
			struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (gid_is_v4mapped(gid)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, gid + 12, 4);
		*len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, gid, 16);
		if (gid_is_linklocal(gid))
			s6->sin6_scope_id = ifindex;
		*len = sizeof(*s6);
	}
}

/* One send socket, shared by the senders whose source GID, port slot and GRH fields are
 * the same.  IP takes the GRH's traffic class and hop limit from the socket's options, so
 * they are part of the key (a sender whose GRH changes moves to another socket). */
struct tx_sock {
	struct tx_sock *next;              /* the bucket's chain, under nio->tx_lock */
	unsigned refs;                     /* senders on it, under nio->tx_lock */
	int fd;
	uint8_t sgid[16];
	unsigned slot;
	uint16_t sport;                    /* bound: the slot's port, or a probe's */
	uint8_t tclass, hop_limit;
};

static unsigned tx_sock_bucket(const uint8_t sgid[16], unsigned slot, uint8_t tclass,
			       uint8_t hop_limit)
{
	uint32_t h = slot * 0x9E3779B1u ^ (uint32_t)tclass << 8 ^ hop_limit;

	for (int i = 12; i < 16; i++)
		h = h * 31 + sgid[i];
	return h % TX_SOCK_BUCKETS;
}

static int grh_setsockopt(int fd, int family, uint8_t traffic_class, uint8_t hop_limit)
{
	int tc = traffic_class, hl = hop_limit ? hop_limit : -1;   /* -1: route default */
	int r;

	/* The AH's hop limit applies to multicast destinations too (IBA 8.3 GRH HopLmt);
	 * the kernel keeps a separate TTL for those, default 1: set both. */
	if (family == AF_INET)
		r = setsockopt(fd, IPPROTO_IP, IP_TOS, &tc, sizeof(tc)) ||
		    setsockopt(fd, IPPROTO_IP, IP_TTL, &hl, sizeof(hl)) ||
		    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &hl, sizeof(hl));
	else
		r = setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tc, sizeof(tc)) ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hl, sizeof(hl)) ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hl, sizeof(hl));
	return r ? -errno : 0;
}

/* A new send socket bound to @want's port (or a probe's), with the GRH's options. */
static int tx_sock_new(struct uroce_netio *nio, const uint8_t sgid[16], unsigned slot,
		       uint8_t tclass, uint8_t hop_limit, uint16_t want, struct tx_sock **out)
{
	/* A socket that is never meant to receive: this filter rejects every datagram, so
	 * nothing queues up on it (and a process that joins its port's reuseport group by
	 * binding the same address and port with SO_REUSEPORT under our uid loses the share
	 * the kernel hashes here — nothing of uroce is ever sent to these ports). */
	static struct sock_filter drop_all[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
	struct sock_fprog prog = { .len = 1, .filter = drop_all };
	int family = gid_is_v4mapped(sgid) ? AF_INET : AF_INET6;
	struct sockaddr_storage ss;
	struct tx_sock *s;
	socklen_t sl;
	int one = 1, pmtu, buf = SOCK_BUF, ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memcpy(s->sgid, sgid, 16);
	s->slot = slot;
	s->tclass = tclass;
	s->hop_limit = hop_limit;
	s->fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (s->fd < 0) {
		ret = -errno;
		goto fail;
	}
	if (family == AF_INET6 &&
	    setsockopt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) {
		ret = -errno;
		goto fail;
	}
	/* Other uroce processes (and this one's other GRH keys) bind the same ports. */
	if (setsockopt(s->fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    setsockopt(s->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0) {
		ret = -errno;
		goto fail;
	}
	/* DF set and never fragment locally: IPv4 packets of an unconnected socket then carry
	 * Identification 0, which is what the ICRC was computed with (docs/wire.md). */
	if (family == AF_INET) {
		pmtu = IP_PMTUDISC_DO;
		ret = setsockopt(s->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		pmtu = IPV6_PMTUDISC_DO;
		ret = setsockopt(s->fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	}
	if (ret < 0) {
		ret = -errno;
		goto fail;
	}
	if (setsockopt(s->fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
		(void)setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if ((tclass || hop_limit) && (ret = grh_setsockopt(s->fd, family, tclass, hop_limit)))
		goto fail;
	/* The slot's port, or, if another program holds it without SO_REUSEPORT (or as
	 * another user), another one of the range: a QP must be able to send. */
	for (unsigned probe = 0;; probe++) {
		s->sport = probe ? slot_port(slot, nio->sports, probe) : want;
		to_sockaddr(sgid, s->sport, nio->ifindex, &ss, &sl);
		if (bind(s->fd, (struct sockaddr *)&ss, sl) == 0)
			break;
		if (errno != EADDRINUSE || probe + 1 == SPORT_PROBES) {
			ret = -errno;
			goto fail;
		}
	}
	*out = s;
	return 0;
fail:
	if (s->fd >= 0)
		close(s->fd);
	free(s);
	return ret;
}

/* The send socket of (@sgid, @slot, GRH), shared or new; @want: the port a new one tries
 * first.  Under nio->tx_lock. */
static int tx_sock_get(struct uroce_netio *nio, const uint8_t sgid[16], unsigned slot,
		       uint8_t tclass, uint8_t hop_limit, uint16_t want, struct tx_sock **out)
{
	unsigned b = tx_sock_bucket(sgid, slot, tclass, hop_limit);
	struct tx_sock *s;
	int ret;

	for (s = nio->tx_socks[b]; s; s = s->next)
		if (s->slot == slot && s->tclass == tclass && s->hop_limit == hop_limit &&
		    !memcmp(s->sgid, sgid, 16))
			break;
	if (!s) {
		ret = tx_sock_new(nio, sgid, slot, tclass, hop_limit, want, &s);
		if (ret)
			return ret;
		s->next = nio->tx_socks[b];
		nio->tx_socks[b] = s;
		if (__atomic_add_fetch(&nio->tx_nsocks, 1, __ATOMIC_RELAXED) > nio->tx_nsocks_max)
			__atomic_store_n(&nio->tx_nsocks_max, nio->tx_nsocks, __ATOMIC_RELAXED);
	}
	s->refs++;
	*out = s;
	return 0;
}

static void tx_sock_put(struct uroce_netio *nio, struct tx_sock *s)
{
	struct tx_sock **pp;

	if (!s || --s->refs)
		return;
	for (pp = &nio->tx_socks[tx_sock_bucket(s->sgid, s->slot, s->tclass, s->hop_limit)];
	     *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	__atomic_sub_fetch(&nio->tx_nsocks, 1, __ATOMIC_RELAXED);
	close(s->fd);
	free(s);
}

/* Every send socket still open (a context closed with QPs alive). */
static void tx_socks_free(struct uroce_netio *nio)
{
	for (unsigned b = 0; b < TX_SOCK_BUCKETS; b++)
		while (nio->tx_socks[b]) {
			struct tx_sock *s = nio->tx_socks[b];

			nio->tx_socks[b] = s->next;
			close(s->fd);
			free(s);
		}
}

static void tx_use(struct uroce_netio_tx *tx, struct tx_sock *s)
{
	tx->sock = s;
	tx->fd = s->fd;
	tx->sport = s->sport;
	tx->base_ok = false;
	tx->tclass = s->tclass;
	tx->hop_limit = s->hop_limit;
}

static unsigned nio_sports(const struct uroce_netio *nio)
{
	return nio->sports ? nio->sports : DEFAULT_SPORTS;
}

int uroce_netio_tx_open(struct uroce_netio *nio, const uint8_t sgid[16], uint32_t qpn,
			uint8_t traffic_class, uint8_t hop_limit, struct uroce_netio_tx **out)
{
	struct uroce_netio_tx *tx;
	struct tx_sock *s;
	unsigned slots, slot;
	int ret;

	if (!nio || !sgid || !out)
		return -EINVAL;
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	tx->nio = nio;
	tx->qpn = qpn;
	memcpy(tx->sgid, sgid, 16);
	tx->gso = nio->gso;
	tx->family = gid_is_v4mapped(sgid) ? AF_INET : AF_INET6;
	slots = nio_sports(nio);
	slot = sport_slot(qpn, slots);
	tx->slot = slot;
	pthread_mutex_lock(&nio->tx_lock);
	ret = tx_sock_get(nio, sgid, slot, traffic_class, hop_limit, slot_port(slot, slots, 0),
			  &s);
	pthread_mutex_unlock(&nio->tx_lock);
	if (ret)
		goto fail;
	tx_use(tx, s);
	if (nio->fault.enabled) {
		tx->scratch = malloc(RX_BUF_GRO);
		tx->held = malloc(RX_BUF_GRO);
		if (!tx->scratch || !tx->held) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	*out = tx;
	return 0;
fail:
	if (tx->sock) {
		pthread_mutex_lock(&nio->tx_lock);
		tx_sock_put(nio, tx->sock);
		pthread_mutex_unlock(&nio->tx_lock);
	}
	free(tx->scratch);
	free(tx->held);
	free(tx);
	return ret;
}

/* The sender moves to the socket of its new GRH fields (the same port if that socket is
 * new and the port free).  Called under the QP's lock, like its sends; a UD QP calls it
 * before each packet, so an unchanged GRH costs nothing. */
int uroce_netio_tx_set_grh(struct uroce_netio_tx *tx, uint8_t traffic_class, uint8_t hop_limit)
{
	struct uroce_netio *nio;
	struct tx_sock *s;
	int ret;

	if (!tx)
		return -EINVAL;
	if (tx->tclass == traffic_class && tx->hop_limit == hop_limit)
		return 0;
	nio = tx->nio;
	pthread_mutex_lock(&nio->tx_lock);
	ret = tx_sock_get(nio, tx->sgid, tx->slot, traffic_class, hop_limit, tx->sport, &s);
	if (!ret) {
		tx_sock_put(nio, tx->sock);
		tx_use(tx, s);
	}
	pthread_mutex_unlock(&nio->tx_lock);
	return ret;
}

void uroce_netio_tx_close(struct uroce_netio_tx *tx)
{
	if (!tx)
		return;
	pthread_mutex_lock(&tx->nio->tx_lock);
	tx_sock_put(tx->nio, tx->sock);
	pthread_mutex_unlock(&tx->nio->tx_lock);
	free(tx->scratch);
	free(tx->held);  /* a packet still held back for reordering is lost, like a drop */
	free(tx);
}

/* ---------------------------------------------------------------- send */

static void icrc_addr_for(const struct uroce_netio_tx *tx, const struct uroce_netaddr *dst,
			  struct uroce_icrc_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = tx->family;
	if (tx->family == AF_INET) {
		memcpy(&a->src.v4, tx->sgid + 12, 4);
		memcpy(&a->dst.v4, dst->gid + 12, 4);
	} else {
		memcpy(&a->src.v6, tx->sgid, 16);
		memcpy(&a->dst.v6, dst->gid, 16);
	}
	a->sport = tx->sport;
	a->dport = dst->port;
}

/* The ICRC slot: the last UROCE_ICRC_LEN bytes of the packet, which may straddle the
 * last pieces (the contract says "of the last piece"; a short last piece is handled). */
static void put_icrc(struct uroce_txpkt *p, uint32_t icrc)
{
	uint8_t v[UROCE_ICRC_LEN];
	size_t need = UROCE_ICRC_LEN;
	const struct iovec *t = &p->iov[p->iovcnt - 1];

	/* The slot is at the end of the last piece (the engine's tail): the common case. */
	if (t->iov_len >= UROCE_ICRC_LEN) {
		uroce_put_le32((uint8_t *)t->iov_base + t->iov_len - UROCE_ICRC_LEN, icrc);
		return;
	}
	uroce_put_le32(v, icrc);
	for (unsigned i = p->iovcnt; i-- > 0 && need;) {
		size_t k = p->iov[i].iov_len < need ? p->iov[i].iov_len : need;

		memcpy((uint8_t *)p->iov[i].iov_base + p->iov[i].iov_len - k, v + need - k, k);
		need -= k;
	}
}

static void gather(const struct uroce_txpkt *p, uint8_t *dst)
{
	size_t off = 0;

	for (unsigned i = 0; i < p->iovcnt; i++) {
		memcpy(dst + off, p->iov[i].iov_base, p->iov[i].iov_len);
		off += p->iov[i].iov_len;
	}
}

/* Errors that mean "the network dropped it" for the transport (which retransmits): count,
 * consider the packet gone.  EAGAIN/ENOBUFS stop the send with a short count instead. */
static bool tx_err_is_loss(int e)
{
	switch (e) {
	case ENETUNREACH:
	case EHOSTUNREACH:
	case ENETDOWN:
	case EHOSTDOWN:
	case ECONNREFUSED:
	case EMSGSIZE:
	case EPERM:       /* a firewall rule */
	case EADDRNOTAVAIL: /* the source address went away */
		return true;
	default:
		return false;
	}
}

static bool tx_err_is_full(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS;
}

/* sendmsg through syscall(2), like the receive's recvmmsg: glibc's wrapper is a
 * cancellation point, and its enable/disable pair was ~0.6% of ib_write_bw's sender (the
 * engine is not a cancellation point).  The unit test defines its own. */
#ifndef netio_sendmsg
#define netio_sendmsg(fd, m, flags) syscall(SYS_sendmsg, (fd), (m), (flags))
#endif

/* One sendmsg of @cnt packets (iovs concatenated), GSO at @seg when cnt > 1.
 * Returns 0 (sent or lost), -EAGAIN (full), or another -errno. */
static int send_iov(struct uroce_netio_tx *tx, const struct uroce_netaddr *dst,
		    struct iovec *iov, unsigned iovcnt, unsigned cnt, size_t bytes, uint16_t seg)
{
	struct uroce_netio *nio = tx->nio;
	struct sockaddr_storage ss;
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { 0 };
	struct uroce_cap_tx ct;
	ssize_t r;

	to_sockaddr(dst->gid, dst->port, nio->ifindex, &ss, &m.msg_namelen);
	m.msg_name = &ss;
	m.msg_iov = iov;
	m.msg_iovlen = iovcnt;
	if (cnt > 1) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = IPPROTO_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	}
	ct.n = 0;
	if (uroce_cap_on(nio->cap))   /* each segment as the kernel cuts it, before it goes */
		uroce_cap_udp_tx_begin(nio->cap, &ct, tx->qpn, tx->sgid, tx->sport, dst->gid, dst->port,
				       tx->tclass, tx->hop_limit, iov, iovcnt, cnt, bytes, seg);
	do
		r = netio_sendmsg(tx->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (ct.n)
		uroce_cap_udp_tx_end(nio->cap, &ct, r >= 0);
	if (r >= 0) {
		ctr_add(nio, C_TX_PACKETS, cnt);
		ctr_add(nio, C_TX_BYTES, bytes);
		if (cnt > 1)
			ctr_add(nio, C_TX_GSO, 1);
		return 0;
	}
	if (tx_err_is_full(errno)) {
		ctr_add(nio, C_TX_SHORT, 1);
		return -EAGAIN;
	}
	if (tx_err_is_loss(errno)) {
		ctr_add(nio, C_TX_ERRORS, cnt);
		return 0;
	}
	return -errno;
}

/* One packet through fault injection.  The ICRC is already in place (so a corrupted copy
 * is one whose ICRC no longer matches).  Returns 0 or -EAGAIN / -errno from the send. */
static int send_one_fault(struct uroce_netio_tx *tx, const struct uroce_netaddr *dst,
			  struct uroce_txpkt *p)
{
	struct uroce_netio *nio = tx->nio;
	struct uroce_fault_action a;
	struct iovec iov[4];
	unsigned iovcnt = p->iovcnt;
	int ret;

	pthread_mutex_lock(&nio->fault_lock);
	a = uroce_fault_decide(&nio->fault, p->len);
	pthread_mutex_unlock(&nio->fault_lock);

	if (a.flags & UROCE_FAULT_DROP) {
		ctr_add(nio, C_FAULT_DROP, 1);
		return 0;
	}
	memcpy(iov, p->iov, sizeof(iov));
	if (a.flags & UROCE_FAULT_CORRUPT) {
		/* Never the caller's memory: the pieces may be the application's buffers. */
		gather(p, tx->scratch);
		uroce_fault_corrupt(tx->scratch, p->len, &a);
		iov[0].iov_base = tx->scratch;
		iov[0].iov_len = p->len;
		iovcnt = 1;
		ctr_add(nio, C_FAULT_CORRUPT, 1);
	}
	if (a.flags & UROCE_FAULT_REORDER) {
		if (tx->has_held) {
			/* Still holding an earlier one: send that first (it is overtaken by
			 * nothing), then hold this one. */
			struct iovec h = { tx->held, tx->held_len };

			ret = send_iov(tx, &tx->held_dst, &h, 1, 1, tx->held_len, 0);
			if (ret)
				return ret;
			tx->has_held = false;
		}
		/* Copy: the caller reuses its buffers once we return. */
		{
			size_t off = 0;

			for (unsigned i = 0; i < iovcnt; i++) {
				memcpy(tx->held + off, iov[i].iov_base, iov[i].iov_len);
				off += iov[i].iov_len;
			}
		}
		tx->held_len = p->len;
		tx->held_dst = *dst;
		tx->has_held = true;
		ctr_add(nio, C_FAULT_REORDER, 1);
		if (a.flags & UROCE_FAULT_DUP) {
			/* The duplicate goes now, the original after the next packet. */
			ctr_add(nio, C_FAULT_DUP, 1);
			return send_iov(tx, dst, iov, iovcnt, 1, p->len, 0);
		}
		return 0;
	}
	ret = send_iov(tx, dst, iov, iovcnt, 1, p->len, 0);
	if (!ret && (a.flags & UROCE_FAULT_DUP)) {
		ctr_add(nio, C_FAULT_DUP, 1);
		ret = send_iov(tx, dst, iov, iovcnt, 1, p->len, 0);
	}
	if (!ret && tx->has_held) {
		struct iovec h = { tx->held, tx->held_len };

		ret = send_iov(tx, &tx->held_dst, &h, 1, 1, tx->held_len, 0);
		tx->has_held = false;   /* sent, or lost to a full buffer like any packet */
		if (ret == -EAGAIN)
			ret = 0;
	}
	return ret;
}

/* Packet p[0], shorter than the run it follows, and the packets of its size after it:
 * does p[0] start a run of its own, or end the run before it?  It starts one when that
 * costs no extra send.  Then a 64 KiB WRITE at MTU 4096 leaves as FIRST alone and 15
 * MIDDLE/LAST rather than FIRST + MIDDLE and 14: two sendmsg either way, and the kernel
 * delivers one segment alone more cheaply than a pair (bench/udp_gso -s one against
 * -s flat).  At MTU 1024 the 63 MIDDLE/LAST of 1,040 bytes need two sends after FIRST
 * (GSO_MAX_BYTES holds 62), but only one after FIRST + MIDDLE: that ends the run, and the
 * message takes two sends, not three (bench/udp_gso -m 1024: 28 against 50 Gbit/s). */
static bool shorter_starts_run(const struct uroce_txpkt *p, unsigned n)
{
	size_t cap = GSO_MAX_BYTES / p[0].len;
	unsigned m = 1;

	if (cap > GSO_MAX_SEGS)
		cap = GSO_MAX_SEGS;
	while (m < n && p[m].len == p[0].len)
		m++;
	/* The m packets take ceil(m / cap) runs from here, the m - 1 after p[0] take
	 * ceil((m - 1) / cap): the same unless m is one more than a multiple of cap. */
	return m > 1 && m % cap != 1;
}

int uroce_netio_send(struct uroce_netio_tx *tx, const struct uroce_netaddr *dst,
		     struct uroce_txpkt *pkts, unsigned n)
{
	struct uroce_icrc_addr ia;
	struct iovec iov[GSO_MAX_SEGS * 4];
	unsigned i = 0;
	int ret;

	if (!tx || !dst || (!pkts && n))
		return -EINVAL;
	for (unsigned k = 0; k < n; k++)
		if (pkts[k].iovcnt == 0 || pkts[k].iovcnt > 4 ||
		    pkts[k].len < UROCE_BTH_LEN + UROCE_ICRC_LEN || pkts[k].len > GSO_MAX_BYTES)
			return -EINVAL;
	/* The GID family must match the socket's: an IPv4 QP cannot reach an IPv6 GID. */
	if (gid_is_v4mapped(dst->gid) != (tx->family == AF_INET))
		return -EAFNOSUPPORT;
	if (!tx->base_ok || tx->base_port != dst->port || !gid_eq(tx->base_gid, dst->gid)) {
		icrc_addr_for(tx, dst, &ia);
		tx->base = uroce_icrc_base(&ia);
		tx->base_port = dst->port;
		memcpy(tx->base_gid, dst->gid, 16);
		tx->base_ok = true;
	}

	if (tx->nio->fault.enabled) {
		icrc_addr_for(tx, dst, &ia);
		for (; i < n; i++) {
			put_icrc(&pkts[i], uroce_netio_icrc(&ia, 0, pkts[i].iov, pkts[i].iovcnt,
							    pkts[i].len));
			ret = send_one_fault(tx, dst, &pkts[i]);
			if (ret == -EAGAIN)
				return (int)i;
			if (ret)
				return i ? (int)i : ret;
		}
		return (int)n;
	}

	while (i < n) {
		/* A run: packets of pkts[i]'s size, the last possibly shorter, within the GSO
		 * limits.  Segment k of a GSO send leaves with IPv4 ID k. */
		size_t seg = pkts[i].len, bytes = 0, pre_len = 0;
		unsigned cnt = 0, iovcnt = 0;
		uint32_t pre0 = 0;   /* the pseudo-header's CRC for pre_len bytes, ID 0 */

		while (i + cnt < n && cnt < GSO_MAX_SEGS && bytes + pkts[i + cnt].len <= GSO_MAX_BYTES) {
			struct uroce_txpkt *p = &pkts[i + cnt];
			const struct iovec *pi = p->iov;
			unsigned pn = p->iovcnt;

			if (p->len > seg || (cnt && !tx->gso))
				break;
			if (cnt && p->len < seg && shorter_starts_run(pkts + i + cnt, n - i - cnt))
				break;
			if (p->len != pre_len) {
				pre0 = uroce_icrc_pre_base(tx->base, tx->family, 0, p->len);
				pre_len = p->len;
			}
			put_icrc(p, uroce_netio_icrc_pre(cnt ? uroce_icrc_with_id(pre0, tx->family, (uint16_t)cnt)
							     : pre0,
							 p->iov, p->iovcnt, p->len));
			/* A piece that continues the previous one in memory (the engine lays a
			 * packet's tail right before the next packet's headers) extends it: the
			 * kernel's copy costs per piece. */
			if (iovcnt && (const uint8_t *)iov[iovcnt - 1].iov_base + iov[iovcnt - 1].iov_len ==
				      (const uint8_t *)pi->iov_base) {
				iov[iovcnt - 1].iov_len += pi->iov_len;
				pi++;
				pn--;
			}
			for (unsigned j = 0; j < pn; j++)   /* at most 4: no memcpy call */
				iov[iovcnt++] = pi[j];
			bytes += p->len;
			cnt++;
			if (p->len < seg)
				break;   /* a shorter packet ends the run */
		}
		ret = send_iov(tx, dst, iov, iovcnt, cnt, bytes, (uint16_t)seg);
		if (cnt > 1 && (ret == -EIO || ret == -EINVAL || ret == -ENOPROTOOPT ||
				ret == -EOPNOTSUPP)) {
			/* The kernel refused GSO (no checksum offload on the route: EIO; a
			 * segment larger than the route's MTU or an old kernel: EINVAL,
			 * ENOPROTOOPT): from now on one packet per call.  The ICRCs of packets
			 * 1.. were computed for IDs 1..: they are redone below. */
			tx->gso = false;
			continue;
		}
		if (ret == -EAGAIN)
			return (int)i;
		if (ret)
			return i ? (int)i : ret;
		i += cnt;
	}
	return (int)n;
}

/* ---------------------------------------------------------------- receive */

struct rx_meta {
	uint8_t dst[16];
	bool have_dst;
	int tos, ttl;              /* IPv4 TOS and TTL, or IPv6 traffic class and hop limit */
	uint32_t flow_label;
	int gso_size;
};

static void parse_cmsgs(struct msghdr *m, struct rx_meta *meta)
{
	memset(meta, 0, sizeof(*meta));
	meta->ttl = 64;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			memcpy(meta->dst, &pi.ipi6_addr, 16);
			meta->have_dst = true;
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS &&
			   c->cmsg_len >= CMSG_LEN(1)) {
			meta->tos = *(uint8_t *)CMSG_DATA(c);
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			memcpy(&meta->ttl, CMSG_DATA(c), sizeof(int));
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			memcpy(&meta->tos, CMSG_DATA(c), sizeof(int));
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			memcpy(&meta->ttl, CMSG_DATA(c), sizeof(int));
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_FLOWINFO &&
			   c->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
			uint32_t fi;

			memcpy(&fi, CMSG_DATA(c), sizeof(fi));
			meta->flow_label = ntohl(fi) & 0xFFFFF;
		} else if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO &&
			   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			memcpy(&meta->gso_size, CMSG_DATA(c), sizeof(int));
		}
	}
}

static void count_drop(struct uroce_netio *nio, enum uroce_rx_err e)
{
	__atomic_fetch_add(&nio->rx_drop[e], 1, __ATOMIC_RELAXED);
	ctr_add(nio, C_RX_DROPS, 1);
	if (e == UROCE_RX_BAD_ICRC || e == UROCE_RX_BAD_ICRC_ID)
		ctr_add(nio, C_RX_BAD_ICRC, 1);
}

static void conn_consider(struct uroce_netio *nio, const struct uroce_rxpkt *p);

/* Validate and deliver one RoCEv2 packet; @id_hint is the IPv4 Identification its sender
 * most likely gave it (its index in a GRO buffer: uroce_icrc_rx_check).  Returns fn's
 * result (non-zero: stop). */
static int rx_one(struct uroce_netio *nio, const uint8_t *buf, size_t len,
		  const struct sockaddr_in6 *from, const struct rx_meta *meta, uint16_t id_hint,
		  uroce_netio_rx_fn fn, void *arg)
{
	struct uroce_icrc_addr ia = { 0 };
	/* The structural checks without the ICRC, which is checked below with the hint: the
	 * same checks in the same order as uroce_pkt_validate with the address (it checks the
	 * ICRC last). */
	struct uroce_rx_ctx rc = { .mtu = 0, .addr = NULL };
	struct uroce_rxpkt p;
	enum uroce_rx_err e;

	/* Every field is set below before fn sees it; p.pkt by uroce_pkt_validate, which
	 * zeroes it first. */
	memcpy(p.src.gid, &from->sin6_addr, 16);
	p.src.port = ntohs(from->sin6_port);
	memcpy(p.dgid, meta->dst, 16);
	if (gid_is_v4mapped(p.src.gid)) {
		ia.family = AF_INET;
		memcpy(&ia.src.v4, p.src.gid + 12, 4);
		memcpy(&ia.dst.v4, p.dgid + 12, 4);
	} else {
		ia.family = AF_INET6;
		memcpy(&ia.src.v6, p.src.gid, 16);
		memcpy(&ia.dst.v6, p.dgid, 16);
	}
	ia.sport = p.src.port;
	ia.dport = ROCE_PORT;
	e = uroce_pkt_validate(buf, len, &rc, &p.pkt);
	if (e == UROCE_RX_OK) {
		/* RoCEv2 Annex A17.3.3: a bad ICRC is a silent drop.  Over IPv4 the ICRC is
		 * checked for the Identifications this sender uses, not for any (issue #17:
		 * any would let 2^-16 of the corrupted packets through; docs/wire.md). */
		if (!nio->rx_base_ok || nio->rx_base_sport != ia.sport ||
		    !gid_eq(nio->rx_base_src, p.src.gid) || !gid_eq(nio->rx_base_dst, p.dgid)) {
			nio->rx_base = uroce_icrc_base(&ia);
			nio->rx_base_sport = ia.sport;
			memcpy(nio->rx_base_src, p.src.gid, 16);
			memcpy(nio->rx_base_dst, p.dgid, 16);
			nio->rx_base_ok = true;
		}
		p.pkt.icrc_status = uroce_icrc_rx_check_base(&nio->idrx, &ia, nio->rx_base, buf, len,
							     id_hint, &nio->rx_now, &p.pkt.ip_id);
		if (p.pkt.icrc_status == UROCE_ICRC_BAD)
			e = UROCE_RX_BAD_ICRC;
		else if (p.pkt.icrc_status == UROCE_ICRC_BAD_ID)
			e = UROCE_RX_BAD_ICRC_ID;
	}
	if (uroce_cap_on(nio->cap))   /* dropped ones too: what arrived */
		uroce_cap_udp_rx(nio->cap, p.src.gid, p.src.port, p.dgid, (uint8_t)meta->tos,
				 (uint8_t)meta->ttl, ia.family == AF_INET6 ? meta->flow_label : 0,
				 p.pkt.icrc_status == UROCE_ICRC_OK_ID ? p.pkt.ip_id
				 : e == UROCE_RX_OK ? 0 : id_hint, buf, len);
	if (e != UROCE_RX_OK) {
		count_drop(nio, e);
		return 0;
	}
	p.buf = buf;
	p.len = len;
	p.traffic_class = (uint8_t)meta->tos;
	p.hop_limit = (uint8_t)meta->ttl;
	p.flow_label = ia.family == AF_INET6 ? meta->flow_label : 0;
	ctr_add_rx(nio, C_RX_PACKETS, 1);   /* written here only, under rx_lock */
	ctr_add_rx(nio, C_RX_BYTES, len);
	if (nio->conn_max)
		conn_consider(nio, &p);
	return fn(arg, &p);
}

/* ---------------------------------------------------------------- connected receive sockets
 *
 * Every datagram to the group member pays the kernel a full lookup: the input route, then
 * the socket lookup, which in a reuseport group hashes the 4-tuple and runs the steering
 * program.  A socket connected to the sender's address and port is found before both, by
 * early demultiplexing, which also keeps the route (docs/transport.md "Sockets"; about
 * 0.4 us of a ping-pong hop across a veth, bench/udp_roce_pp -x).  So when an RC packet
 * comes to the group member from a 4-tuple we have no socket for, the poll
 * opens one: bound to our address and 4791 (SO_REUSEADDR: not a member of the group, whose
 * program numbers its members), connected to the sender.  At most conn_max per context
 * (UROCE_UDP_CONNECT), for the first 4-tuples that come; the others stay on the group.
 *
 * A connected socket takes every datagram of its 4-tuple, whatever its destination QP:
 * should the sender also talk from that port to a QP of another process on this device
 * (a peer whose QPs share a source port), that QP's packets come here.  So a socket opens
 * only while this context is the device's only client (conn_alone).  For a client that
 * comes later: the engine counts a datagram for a QP we do not have as misrouted; on a
 * connected socket that closes the socket (rx_conn_shared), no socket opens again in
 * this context, and the datagrams already taken are lost, as on a wire: RC retransmits
 * them to the group, which steers them right.
 */

/* The netio whose connected socket's batch this thread is delivering (under its rx_lock). */
static _Thread_local struct uroce_netio *rx_delivering;

static int sock_fd(const struct uroce_netio *nio, int idx)
{
	return idx == GROUP_SOCK ? nio->fd : nio->conn[idx].fd;
}

static bool key_eq(const struct conn_key *a, const struct conn_key *b)
{
	return a->sport == b->sport && gid_eq(a->src, b->src) && gid_eq(a->dst, b->dst);
}

/* The poll's note: @p came to the group member; ask for a socket to its 4-tuple if it is
 * RC (IBA 9.2: transport bits 000) and there is room.  Under rx_lock. */
static void conn_consider(struct uroce_netio *nio, const struct uroce_rxpkt *p)
{
	struct conn_key k;

	if (nio->rx_cur != GROUP_SOCK || nio->want_conn || nio->nconn >= nio->conn_max ||
	    nio->conn_off || (nio->conn_crowded && (++nio->conn_crowd_pkts & 0xFFFF)) ||
	    (p->pkt.bth.opcode >> 5) != 0 || gid_is_linklocal(p->src.gid) ||
	    gid_is_v4mapped(p->src.gid) != gid_is_v4mapped(p->dgid))
		return;
	memcpy(k.src, p->src.gid, 16);
	memcpy(k.dst, p->dgid, 16);
	k.sport = p->src.port;
	for (unsigned i = 0; i < nio->nconn; i++)
		if (key_eq(&nio->conn[i].key, &k))
			return;   /* open, but this one was read from the group before it was */
	nio->want = k;
	nio->want_conn = true;
}

/* Put @fd in the progress thread's epoll set as the group member is (under conn_lock):
 * edge-triggered, tagged so the engine knows it for one of ours (uroce_netio_is_event). */
static void conn_watch_fd(struct uroce_netio *nio, int fd, int op)
{
	struct epoll_event ev = { .events = nio->watch_on ? EPOLLIN | EPOLLET : 0 };

	ev.data.u64 = UROCE_NETIO_CONN_TAG | (uint32_t)fd;
	if (nio->epfd >= 0)
		(void)epoll_ctl(nio->epfd, op, fd, &ev);
}

/* Whether this context is the only client receiving on its device's group (the daemon's
 * count of the members it handed out).  Only then can no other process's QP share a
 * 4-tuple with ours when the socket opens; a client that comes later is what the
 * misrouted check is for.  An IPC round trip: once per socket opened, and while the
 * device is crowded, once per 65,536 packets. */
static bool conn_alone(struct uroce_netio *nio)
{
	struct uroce_dev_stats *st = NULL;
	unsigned n = 0;
	bool alone = false;

	if (uroce_ipc_dev_stats(nio->ctx->ipc, &st, &n))
		return false;
	for (unsigned i = 0; i < n; i++)
		if (!strncmp(st[i].name, nio->ctx->dev->ibdev.name, sizeof(st[i].name)))
			alone = st[i].rx_sockets <= 1;
	free(st);
	return alone;
}

/* Open a socket for nio->want.  Under rx_lock.  Any failure leaves the 4-tuple on the
 * group, where it was, and opens no more (an address another program holds without
 * SO_REUSEADDR, say, fails for every 4-tuple alike). */
static void conn_open(struct uroce_netio *nio)
{
	struct sockaddr_in6 me = { .sin6_family = AF_INET6, .sin6_port = htons(ROCE_PORT) };
	struct sockaddr_in6 peer = { .sin6_family = AF_INET6, .sin6_port = htons(nio->want.sport) };
	int fd, one = 1, off = 0, buf = SOCK_BUF;
	int ifindex = (int)nio->ifindex;

	nio->want_conn = false;
	nio->conn_crowded = !conn_alone(nio);
	if (nio->conn_crowded)
		return;
	memcpy(&me.sin6_addr, nio->want.dst, 16);
	memcpy(&peer.sin6_addr, nio->want.src, 16);
	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		nio->conn_off = true;
		return;
	}
	/* As the group member: dual stack (the same sockaddr_in6 names), the destination
	 * address reported, no multicast (bound to a unicast address anyway), the buffer. */
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)) < 0 ||
	    (nio->gro && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)) < 0))
		goto fail;
	(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof(off));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	/* The group's device, as its members (best effort: an unbound socket to our own
	 * address and 4791 still only matches datagrams of its 4-tuple). */
	if (ifindex)
		(void)setsockopt(fd, SOL_SOCKET, SO_BINDTOIFINDEX, &ifindex, sizeof(ifindex));
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    connect(fd, (struct sockaddr *)&peer, sizeof(peer)) < 0)
		goto fail;
	pthread_mutex_lock(&nio->conn_lock);
	/* Looked at under the lock: uroce_netio_rx_grh sets the flag, then takes the lock to
	 * reach the sockets open. */
	if (atomic_load(&nio->grh_on))
		grh_opts(fd, 1);
	nio->conn[nio->nconn].fd = fd;
	nio->conn[nio->nconn].key = nio->want;
	nio->conn[nio->nconn].shared = false;
	nio->nconn++;
	conn_watch_fd(nio, fd, EPOLL_CTL_ADD);
	pthread_mutex_unlock(&nio->conn_lock);
	ctr_add(nio, C_RX_CONN_OPENED, 1);
	return;
fail:
	close(fd);
	nio->conn_off = true;
}

/* After a poll's deliveries: close the sockets found shared, open the one asked for.  What
 * a closed socket still held is lost, as datagrams on a wire.  Under rx_lock. */
static void conn_settle(struct uroce_netio *nio)
{
	nio->conn_dirty = false;
	for (unsigned i = 0; i < nio->nconn;) {
		if (!nio->conn[i].shared) {
			i++;
			continue;
		}
		pthread_mutex_lock(&nio->conn_lock);
		(void)epoll_ctl(nio->epfd, EPOLL_CTL_DEL, nio->conn[i].fd, NULL);
		close(nio->conn[i].fd);
		nio->conn[i] = nio->conn[--nio->nconn];
		pthread_mutex_unlock(&nio->conn_lock);
		ctr_add(nio, C_RX_CONN_SHARED, 1);
		nio->hot = GROUP_SOCK;
		nio->conn_off = true;
	}
	if (nio->want_conn)
		conn_open(nio);
}

void uroce_netio_watch(struct uroce_netio *nio, int epfd, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN | EPOLLET : 0 };

	if (!nio)
		return;
	pthread_mutex_lock(&nio->conn_lock);
	ev.data.fd = nio->fd;
	(void)epoll_ctl(epfd, nio->epfd == epfd ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, nio->fd, &ev);
	nio->epfd = epfd;
	nio->watch_on = on;
	for (unsigned i = 0; i < nio->nconn; i++)
		conn_watch_fd(nio, nio->conn[i].fd, EPOLL_CTL_MOD);
	pthread_mutex_unlock(&nio->conn_lock);
}

bool uroce_netio_is_event(const struct uroce_netio *nio, uint64_t data)
{
	return nio && (data == (uint64_t)(uint32_t)nio->fd ||
		       (data & ~(uint64_t)UINT32_MAX) == UROCE_NETIO_CONN_TAG);
}

/* ---------------------------------------------------------------- the poll */

/* Read and deliver what socket @idx holds, up to the budget (done, dgrams, stop: the
 * poll's running totals).  @spin: read one datagram. */
static void drain_sock(struct uroce_netio *nio, int idx, int budget, int *done, int *dgrams,
		       bool *stop, bool spin, uroce_netio_rx_fn fn, void *arg)
{
	int fd = sock_fd(nio, idx);

	nio->rx_cur = idx;
	while (*done < budget && !*stop) {
		unsigned want = (unsigned)(budget - *done) < RX_BATCH ? (unsigned)(budget - *done) : RX_BATCH;
		int got;

		if (spin)
			want = 1;

		/* recvmmsg writes back each filled header's name and control lengths and flags
		 * (and the iovecs never): reset those of the headers the last call filled, and
		 * the first in any case (a failed call may have written it).  An empty poll, the
		 * common case of a busy-polling application, then touches one header. */
		for (unsigned k = 0; k < nio->rx_dirty || k == 0; k++) {
			struct msghdr *m = &nio->rx_msgs[k].msg_hdr;

			m->msg_namelen = sizeof(nio->rx_names[k]);
			m->msg_controllen = sizeof(nio->rx_cmsg[k]);
			m->msg_flags = 0;
		}
		/* The system call itself, not glibc's recvmmsg: that is a cancellation point,
		 * which switches asynchronous cancellation on and off around every call --
		 * 13% of a busy poller's user time in ib_write_lat -- and ibv_poll_cq is not
		 * one. */
		do
			got = (int)syscall(SYS_recvmmsg, fd, nio->rx_msgs, want, MSG_DONTWAIT, NULL);
		while (got < 0 && errno == EINTR);
		nio->rx_dirty = got > 0 ? (unsigned)got : 1;
		if (got <= 0)
			break;   /* EAGAIN: drained; other errors (none expected) end the drain too */
		*dgrams += got;
		nio->hot = idx;
		if (idx != GROUP_SOCK)
			ctr_add_rx(nio, C_RX_CONNECTED, (uint64_t)got);
		nio->rx_now = 0;   /* read by the ICRC check if it needs it (uroce_icrc_rx_check) */
		if (idx != GROUP_SOCK)
			rx_delivering = nio;
		for (int k = 0; k < got; k++) {
			struct msghdr *m = &nio->rx_msgs[k].msg_hdr;
			const uint8_t *buf = nio->rx_iov[k].iov_base;
			size_t len = nio->rx_msgs[k].msg_len;
			struct rx_meta meta;

			if (m->msg_flags & MSG_TRUNC) {
				ctr_add(nio, C_RX_TRUNC, 1);
				(*done)++;
				continue;
			}
			parse_cmsgs(m, &meta);
			if (m->msg_flags & MSG_CTRUNC) {
				/* Without every cmsg we may not know the GRO segment size, and
				 * a coalesced buffer read as one packet would fail validation
				 * as a whole: count it as truncated instead. */
				ctr_add(nio, C_RX_TRUNC, 1);
				(*done)++;
				continue;
			}
			if (!meta.have_dst || m->msg_namelen < sizeof(struct sockaddr_in6)) {
				/* Cannot check the ICRC without both addresses. */
				count_drop(nio, UROCE_RX_BAD_ICRC);
				(*done)++;
				continue;
			}
			if (meta.gso_size > 0 && (size_t)meta.gso_size < len) {
				/* Coalesced by GRO: equal-size segments, the last may be shorter. */
				uint16_t seg = 0;

				ctr_add(nio, C_RX_GRO, 1);
				for (size_t off = 0; off < len; off += (size_t)meta.gso_size, seg++) {
					size_t l = len - off < (size_t)meta.gso_size ? len - off
										    : (size_t)meta.gso_size;

					(*done)++;
					/* After a stop, the rest of a coalesced buffer is still
					 * delivered: it has been read and cannot be put back. */
					if (rx_one(nio, buf + off, l, &nio->rx_names[k], &meta, seg, fn,
						   arg))
						*stop = true;
				}
			} else {
				(*done)++;
				if (rx_one(nio, buf, len, &nio->rx_names[k], &meta, 0, fn, arg))
					*stop = true;
			}
			/* Datagrams already read in this batch are delivered even after a stop. */
		}
		rx_delivering = NULL;
		if ((unsigned)got < want || spin)
			break;   /* the socket is empty, or a short read (@spin) */
	}
}

/* The sockets other than the hot one, in turn: the group member is index nconn here. */
static int next_cold(struct uroce_netio *nio)
{
	for (unsigned n = 0; n <= nio->nconn; n++) {
		unsigned c = nio->cold_next++ % (nio->nconn + 1);
		int idx = c == nio->nconn ? GROUP_SOCK : (int)c;

		if (idx != nio->hot)
			return idx;
	}
	return GROUP_SOCK;
}

/* @spin: the caller is an application thread that polls again at once (uroce_netio_poll_spin).
 * After a drain that found the socket empty, it reads a single datagram and returns: what
 * comes to a busy poller after a quiet spell is most often one datagram (the peer's reply;
 * GRO makes a burst one datagram too), and asking recvmmsg for RX_BATCH makes the kernel
 * look for a second one, about 0.1 us of a ping-pong's half round trip (measured with one
 * datagram waiting: 0.52 us for one slot, 0.63 us for 16).  Anything more is read by the
 * next poll, which asks for a batch since this one was not empty.  The progress thread
 * never reads short: its edge-triggered epoll would not report what it left behind.
 *
 * With connected sockets, a spinning poll reads the hot socket (the last that had data)
 * and, every CONN_COLD_EVERY-th time it finds that empty, one other in turn: a system call
 * a poll, mostly, as with the group member alone.  Any other poll reads every socket. */
static int netio_poll(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg,
		      bool spin)
{
	int done = 0, dgrams = 0;
	bool stop = false;

	if (!nio || !fn || budget <= 0)
		return 0;
	if (pthread_mutex_trylock(&nio->rx_lock)) {
		/* Another thread is draining: it will deliver what is there.  Say so, so that
		 * it reads once more before leaving: the progress thread's epoll is
		 * edge-triggered, and a datagram that arrived after the holder's last
		 * recvmmsg woke a thread that found the lock taken — without this flag it
		 * would wait for the next arrival (or a retransmission).  The store is
		 * seq_cst and precedes a second try-lock, so either we get the lock or the
		 * holder, which clears the flag only after its unlock, sees it. */
		atomic_store(&nio->rx_missed, true);
		if (pthread_mutex_trylock(&nio->rx_lock))
			return 0;
	}
	spin = spin && nio->rx_was_empty;
again:
	/* Cleared only when set: a seq_cst store is an XCHG, on every poll of a busy poller.
	 * Only the holder clears it, so a flag set after this load stays set for the holder's
	 * look after its unlock, as after an unconditional clear. */
	if (atomic_load_explicit(&nio->rx_missed, memory_order_relaxed))
		atomic_store(&nio->rx_missed, false);
	if (!nio->nconn) {
		drain_sock(nio, GROUP_SOCK, budget, &done, &dgrams, &stop, spin, fn, arg);
	} else if (spin) {
		drain_sock(nio, nio->hot, budget, &done, &dgrams, &stop, spin, fn, arg);
		if (!dgrams && ++nio->spins % CONN_COLD_EVERY == 0)
			drain_sock(nio, next_cold(nio), budget, &done, &dgrams, &stop, spin, fn, arg);
	} else {
		int first = nio->hot;

		drain_sock(nio, first, budget, &done, &dgrams, &stop, false, fn, arg);
		for (int idx = GROUP_SOCK; idx < (int)nio->nconn; idx++)
			if (idx != first)
				drain_sock(nio, idx, budget, &done, &dgrams, &stop, false, fn, arg);
	}
	nio->rx_cur = GROUP_SOCK;
	if (nio->want_conn || nio->conn_dirty)
		conn_settle(nio);
	nio->rx_was_empty = dgrams == 0;
	pthread_mutex_unlock(&nio->rx_lock);
	if (done < budget && !stop && atomic_load(&nio->rx_missed) &&
	    !pthread_mutex_trylock(&nio->rx_lock)) {
		spin = false;   /* the other poller may be the progress thread: read it all */
		goto again;     /* a poller gave up on the lock meanwhile: read once more for it */
	}
	/* A GRO buffer may take us past the budget; callers read "== budget" as "maybe more". */
	return done > budget ? budget : done;
}

int uroce_netio_poll(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg)
{
	return netio_poll(nio, budget, fn, arg, false);
}

int uroce_netio_poll_spin(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg)
{
	return netio_poll(nio, budget, fn, arg, true);
}

/* ---------------------------------------------------------------- counters */

void uroce_netio_stats(const struct uroce_netio *nio, struct uroce_netio_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!nio)
		return;
	out->tx_packets = ctr_get(nio, C_TX_PACKETS);
	out->tx_bytes = ctr_get(nio, C_TX_BYTES);
	out->tx_errors = ctr_get(nio, C_TX_ERRORS);
	out->rx_packets = ctr_get(nio, C_RX_PACKETS);
	out->rx_bytes = ctr_get(nio, C_RX_BYTES);
	for (int e = 0; e < UROCE_RX_NUM; e++)
		out->rx_drop[e] = __atomic_load_n(&nio->rx_drop[e], __ATOMIC_RELAXED);
	out->rx_misrouted = ctr_get(nio, C_RX_MISROUTED);
	out->fault_drop = ctr_get(nio, C_FAULT_DROP);
	out->fault_dup = ctr_get(nio, C_FAULT_DUP);
	out->fault_reorder = ctr_get(nio, C_FAULT_REORDER);
	out->fault_corrupt = ctr_get(nio, C_FAULT_CORRUPT);
	out->tx_gso_sends = ctr_get(nio, C_TX_GSO);
	out->tx_short = ctr_get(nio, C_TX_SHORT);
	out->rx_gro_datagrams = ctr_get(nio, C_RX_GRO);
	out->rx_truncated = ctr_get(nio, C_RX_TRUNC);
	out->rx_connected = ctr_get(nio, C_RX_CONNECTED);
	out->rx_conn_sockets = ctr_get(nio, C_RX_CONN_OPENED);
	out->rx_conn_shared = ctr_get(nio, C_RX_CONN_SHARED);
	out->tx_sockets = __atomic_load_n(&nio->tx_nsocks, __ATOMIC_RELAXED);
	out->tx_sockets_max = __atomic_load_n(&nio->tx_nsocks_max, __ATOMIC_RELAXED);
	{
		/* The kernel's own count for this socket (sk_drops): the namespace-wide
		 * UdpRcvbufErrors cannot tell a data receiver's overflow from its peer's. */
		uint32_t mi[SK_MEMINFO_VARS];
		socklen_t l = sizeof(mi);

		if (!getsockopt(nio->fd, SOL_SOCKET, SO_MEMINFO, mi, &l) &&
		    l > SK_MEMINFO_DROPS * sizeof(uint32_t))
			out->rx_socket_drops = mi[SK_MEMINFO_DROPS];
	}
}

/* Called by the engine from a poll's delivery (under rx_lock) or from the shared-memory
 * link's, maybe in another thread at the same time: only the first is about rx_cur. */
void uroce_netio_count_misrouted(struct uroce_netio *nio)
{
	if (!nio)
		return;
	ctr_add(nio, C_RX_MISROUTED, 1);
	if (rx_delivering == nio) {   /* this thread is delivering a connected socket's batch */
		nio->conn[nio->rx_cur].shared = true;
		nio->conn_dirty = true;
	}
}
