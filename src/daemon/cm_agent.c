/* cm_agent.c — the connection manager in uroced: the host side of src/cm (docs/cm.md).
 *
 * src/cm is the protocol with no I/O; this file gives it the daemon's:
 *   - QP1 receive: the daemon's own socket at index 0 of each device's receive group
 *     (rxgroup.c), where steering sends QP1 (and unknown QPNs and runts); each datagram
 *     goes to uroce_cm_recv_packet with its IP source and destination (IPV6_PKTINFO).
 *     The group of every device is created up front and after each device change, so a
 *     REQ for a host that never ran a verbs program is still answered (REJ 8 when
 *     nothing listens, as Linux's CM does).
 *   - QP1 send: one unconnected UDP socket per IP family, source port 0xD872 where it
 *     is free (rxe's QP1 port; receivers ignore it), the source address per packet
 *     (IP_PKTINFO / IPV6_PKTINFO), DF set so that IPv4 packets carry Identification 0,
 *     which is what the ICRC was computed with (as netio sends).
 *   - the clock: a timerfd in the epoll loop, armed for the core's next deadline.
 *   - route and address look-ups: rtnetlink RTM_GETROUTE in the daemon's namespace.
 *   - the device table, pushed to the core when it changes.
 * The IPC side (commands, channels, events) is cm_ipc.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cm/cm.h"
#include "cm/cm_priv.h"
#include "daemon/cm.h"
#include "daemon/uroced.h"
#include "ipc/cap_proto.h"
#include "net/frame.h"
#include "wire/wire.h"

#define QP1_SPORT 0xD872u   /* 0xC000 + hash_32(1, 14): rxe's QP1 source port [cap] */

static int64_t now_ms(void) { return uroced_now_ms(); }

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- `uroce capture` of QP1 (capture.c, docs/daemon.md "Capturing") ------------------------ */

/* A QP1 packet for the device's capture: what the IP and UDP headers said (IPv4: DF and
 * Identification 0, as our sockets send and as uroce's and rxe's QP1 packets carry it). */
static void cap_qp1(struct uroced *d, uint32_t dev_id, int64_t uid, bool rx, uint64_t ts,
		    const uint8_t sgid[16], uint16_t sport, const uint8_t dgid[16], uint8_t tclass,
		    uint8_t hop, const uint8_t *pkt, size_t len)
{
	struct uroce_cap_rec h;

	memset(&h, 0, sizeof(h));
	h.len = (uint32_t)len;
	h.dir = rx ? UROCE_CAP_RX : UROCE_CAP_TX;
	h.link = UROCE_CAP_UDP;
	h.flags = UROCE_CAP_F_ICRC;
	h.tclass = tclass;
	h.ts_ns = ts;
	memcpy(h.sgid, sgid, 16);
	memcpy(h.dgid, dgid, 16);
	h.sport = sport;
	h.dport = UROCE_UDP_PORT;
	h.hop_limit = hop;
	h.state = UROCE_CAP_ST_VALID;
	h.sqpn = rx ? UROCE_CAP_NO_QPN : UROCE_GSI_QPN;
	uroced_cap_qp1(d, dev_id, uid, &h, pkt);
}

/* ---- route and address look-ups ---------------------------------------------------------- */

static void nl_attr(struct nlmsghdr *h, size_t cap, unsigned short type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));

	if (NLMSG_ALIGN(h->nlmsg_len) + RTA_SPACE(len) > cap)
		return;
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	h->nlmsg_len = (uint32_t)(NLMSG_ALIGN(h->nlmsg_len) + RTA_SPACE(len));
}

static const void *sa_addr(const struct sockaddr *sa, size_t *len)
{
	if (sa->sa_family == AF_INET) {
		*len = 4;
		return &((const struct sockaddr_in *)sa)->sin_addr;
	}
	*len = 16;
	return &((const struct sockaddr_in6 *)sa)->sin6_addr;
}

/* The netdev that owns a local address (for a route that ends on lo). */
static uint32_t owner_ifindex(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *a;
	uint32_t idx = 0;

	if (getifaddrs(&ifa) < 0)
		return 0;
	for (a = ifa; a && !idx; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (cm_sa_addr_eq(a->ifa_addr, sa) ||
		    (sa->sa_family == AF_INET6 &&
		     !memcmp(&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr,
			     &((const struct sockaddr_in6 *)sa)->sin6_addr, 16)))
			idx = if_nametoindex(a->ifa_name);
	}
	freeifaddrs(ifa);
	return idx;
}

/* The hop limit a socket to dst would use (the route's, else the sysctl default). */
static uint8_t hop_limit(const struct sockaddr *dst, const struct sockaddr *src)
{
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), v = 0;
	socklen_t l = sizeof(v);
	struct sockaddr_storage d;

	if (fd < 0)
		return 64;
	memcpy(&d, dst, cm_sa_len(dst));
	cm_sa_set_port((struct sockaddr *)&d, UROCE_UDP_PORT);
	if (src && !cm_sa_any(src)) {
		struct sockaddr_storage s;

		memcpy(&s, src, cm_sa_len(src));
		cm_sa_set_port((struct sockaddr *)&s, 0);
		(void)bind(fd, (struct sockaddr *)&s, (socklen_t)cm_sa_len(src));
	}
	if (connect(fd, (struct sockaddr *)&d, (socklen_t)cm_sa_len(dst)) == 0) {
		if (dst->sa_family == AF_INET)
			getsockopt(fd, IPPROTO_IP, IP_TTL, &v, &l);
		else
			getsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v, &l);
	}
	close(fd);
	return v > 0 && v < 256 ? (uint8_t)v : 64;
}

/* RTM_GETROUTE, as rdma_resolve_ip's fib look-up. */
static int cm_route(void *ctx, const struct sockaddr *dst, const struct sockaddr *src, uint32_t oif,
		    struct uroce_cm_route *out)
{
	struct {
		struct nlmsghdr h;
		struct rtmsg r;
		char attrs[256];
	} req;
	char buf[4096];
	struct timeval tv = { .tv_sec = 1 };
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	const void *a;
	size_t alen;
	int fd, n, err = -ENETUNREACH;
	uint32_t scope = 0;

	(void)ctx;
	if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6)
		return -EINVAL;
	if (dst->sa_family == AF_INET6)
		scope = ((const struct sockaddr_in6 *)dst)->sin6_scope_id;
	memset(out, 0, sizeof(out[0]));
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.h.nlmsg_type = RTM_GETROUTE;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.r.rtm_family = (unsigned char)dst->sa_family;
	a = sa_addr(dst, &alen);
	req.r.rtm_dst_len = (unsigned char)(alen * 8);
	nl_attr(&req.h, sizeof(req), RTA_DST, a, alen);
	if (src && !cm_sa_any(src) && src->sa_family == dst->sa_family) {
		a = sa_addr(src, &alen);
		req.r.rtm_src_len = (unsigned char)(alen * 8);
		nl_attr(&req.h, sizeof(req), RTA_SRC, a, alen);
	}
	if (oif || scope) {
		uint32_t o = oif ? oif : scope;

		nl_attr(&req.h, sizeof(req), RTA_OIF, &o, sizeof(o));
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (sendto(fd, &req, req.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	n = (int)recv(fd, buf, sizeof(buf), 0);
	close(fd);
	if (n < 0)
		return -errno;
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
		struct rtmsg *r;
		struct rtattr *at;
		int rl;
		bool have_src = false;

		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);

			return e->error ? e->error : -ENETUNREACH;
		}
		if (h->nlmsg_type != RTM_NEWROUTE)
			continue;
		r = NLMSG_DATA(h);
		if (r->rtm_type == RTN_UNREACHABLE || r->rtm_type == RTN_BLACKHOLE)
			return -ENETUNREACH;
		if (r->rtm_type == RTN_PROHIBIT)
			return -EACCES;
		out->src.ss_family = dst->sa_family;
		at = RTM_RTA(r);
		rl = (int)RTM_PAYLOAD(h);
		for (; RTA_OK(at, rl); at = RTA_NEXT(at, rl)) {
			if (at->rta_type == RTA_OIF && RTA_PAYLOAD(at) >= 4) {
				memcpy(&out->ifindex, RTA_DATA(at), 4);
			} else if (at->rta_type == RTA_PREFSRC && RTA_PAYLOAD(at) >= (dst->sa_family == AF_INET ? 4u : 16u)) {
				if (dst->sa_family == AF_INET)
					memcpy(&((struct sockaddr_in *)&out->src)->sin_addr, RTA_DATA(at), 4);
				else
					memcpy(&((struct sockaddr_in6 *)&out->src)->sin6_addr, RTA_DATA(at), 16);
				have_src = true;
			} else if (at->rta_type == RTA_METRICS) {
				struct rtattr *m = RTA_DATA(at);
				int ml = (int)RTA_PAYLOAD(at);

				for (; RTA_OK(m, ml); m = RTA_NEXT(m, ml))
					if (m->rta_type == RTAX_HOPLIMIT && RTA_PAYLOAD(m) >= 4) {
						uint32_t hl;

						memcpy(&hl, RTA_DATA(m), 4);
						out->hop_limit = (uint8_t)hl;
					}
			}
		}
		if (src && !cm_sa_any(src) && src->sa_family == dst->sa_family) {
			memcpy(&out->src, src, cm_sa_len(src));
			have_src = true;
		}
		if (!have_src)
			return -EADDRNOTAVAIL;
		if (out->src.ss_family == AF_INET6 && cm_gid_linklocal(((struct sockaddr_in6 *)&out->src)->sin6_addr.s6_addr))
			((struct sockaddr_in6 *)&out->src)->sin6_scope_id = out->ifindex;
		/* A local destination routes through lo; like Linux's rdma_set_src_addr,
		 * take the netdev that owns the address instead (loopback addresses stay
		 * on lo). */
		if (r->rtm_type == RTN_LOCAL && !cm_sa_loopback(dst)) {
			uint32_t own = owner_ifindex(dst);

			if (own)
				out->ifindex = own;
		}
		if (!out->hop_limit)
			out->hop_limit = hop_limit(dst, (struct sockaddr *)&out->src);
		return 0;
	}
	return err;
}

static int cm_local_addr(void *ctx, const struct sockaddr *sa, uint32_t *ifindex)
{
	(void)ctx;
	if (cm_sa_loopback(sa)) {
		/* 127/8 and ::1 are lo's (the local table routes all of 127/8 there). */
		*ifindex = if_nametoindex("lo");
		return *ifindex ? 0 : -EADDRNOTAVAIL;
	}
	*ifindex = owner_ifindex(sa);
	return *ifindex ? 0 : -EADDRNOTAVAIL;
}

static void cm_note_log(void *ctx, const char *line)
{
	(void)ctx;
	if (uroced_verbose)
		uroced_log("cm: %s\n", line);
}

static uint32_t cm_random(void *ctx, enum uroce_cm_rand what)
{
	uint32_t v;

	(void)ctx;
	(void)what;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)now_ms() * 2654435761u ^ (uint32_t)getpid();
	return v;
}

/* ---- QP1 send ----------------------------------------------------------------------------- */

static int tx_socket(int family, uint16_t *sport)
{
	static struct sock_filter drop_all[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
	struct sock_fprog prog = { .len = 1, .filter = drop_all };
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1, pmtu;

	if (fd < 0)
		return -errno;
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	/* Never receives: nothing of RoCE is ever addressed to a source port. */
	setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (family == AF_INET) {
		pmtu = IP_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	} else {
		pmtu = IPV6_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	}
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	cm_sa_set_port((struct sockaddr *)&ss, QP1_SPORT);
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		/* Someone else (another user's QP) has it: any port will do. */
		cm_sa_set_port((struct sockaddr *)&ss, 0);
		if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
	}
	sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*sport = cm_sa_port((struct sockaddr *)&ss);
	return fd;
}

/* Append one control message; mh->msg_control has room for all of them. */
static void add_cmsg(struct msghdr *mh, int level, int type, const void *data, size_t len)
{
	struct cmsghdr *c = (struct cmsghdr *)((char *)mh->msg_control + mh->msg_controllen);

	c->cmsg_level = level;
	c->cmsg_type = type;
	c->cmsg_len = CMSG_LEN(len);
	memcpy(CMSG_DATA(c), data, len);
	mh->msg_controllen += CMSG_SPACE(len);
}

static void cm_send(void *ctx, const struct uroce_cm_tx *tx)
{
	struct uroced *d = ctx;
	struct uroced_cm *g = d->cm;
	bool v4 = cm_gid_v4mapped(tx->sgid);
	int fd = v4 ? g->tx4 : g->tx6;
	uint16_t sport = v4 ? g->sport4 : g->sport6;
	const struct uroce_dev *dev = uroce_dev_find_id(&d->devs, tx->dev_id);
	uint32_t ifindex = dev ? dev->info.ifindex : 0;
	uint8_t pkt[UROCE_CM_QP1_PKT_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + 2 * CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct sockaddr_storage to;
	struct iovec iov = { .iov_base = pkt };
	struct msghdr mh = { .msg_name = &to, .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.buf };
	int len, tc = tx->traffic_class, hl = tx->hop_limit;
	uint64_t ts;

	if (fd < 0) {
		g->tx_errors++;
		return;
	}
	len = uroce_cm_build_packet(tx, sport, g->psn++, pkt, sizeof(pkt));
	if (len < 0) {
		g->tx_errors++;
		return;
	}
	iov.iov_len = (size_t)len;
	cm_gid_to_sa(tx->dgid, ifindex, &to);
	cm_sa_set_port((struct sockaddr *)&to, UROCE_UDP_PORT);
	mh.msg_namelen = (socklen_t)cm_sa_len((struct sockaddr *)&to);
	memset(&ctl, 0, sizeof(ctl));
	mh.msg_controllen = 0;
	if (v4) {
		struct in_pktinfo pi = { 0 };

		memcpy(&pi.ipi_spec_dst, tx->sgid + 12, 4);
		add_cmsg(&mh, IPPROTO_IP, IP_PKTINFO, &pi, sizeof(pi));
		add_cmsg(&mh, IPPROTO_IP, IP_TOS, &tc, sizeof(tc));
		if (hl)
			add_cmsg(&mh, IPPROTO_IP, IP_TTL, &hl, sizeof(hl));
	} else {
		struct in6_pktinfo pi = { 0 };

		memcpy(&pi.ipi6_addr, tx->sgid, 16);
		if (cm_gid_linklocal(tx->sgid) || cm_gid_linklocal(tx->dgid))
			pi.ipi6_ifindex = ifindex;
		add_cmsg(&mh, IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof(pi));
		add_cmsg(&mh, IPPROTO_IPV6, IPV6_TCLASS, &tc, sizeof(tc));
		if (hl)
			add_cmsg(&mh, IPPROTO_IPV6, IPV6_HOPLIMIT, &hl, sizeof(hl));
	}
	ts = realtime_ns();
	if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* Lost like any datagram: the retransmission timer covers it. */
		g->tx_errors++;
		if (uroced_verbose)
			uroced_log("cm: send to QP1: %s\n", strerror(errno));
		return;  /* not on the wire: not captured (as netio cancels its record) */
	}
	if (!hl) {
		/* The socket's default, which is what the kernel used. */
		socklen_t l = sizeof(hl);

		if (v4 ? getsockopt(fd, IPPROTO_IP, IP_TTL, &hl, &l) :
			 getsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hl, &l))
			hl = 64;
		if (hl <= 0 || hl > 255)
			hl = 64;
	}
	cap_qp1(d, tx->dev_id, tx->uid, false, ts, tx->sgid, sport, tx->dgid, (uint8_t)tc,
		(uint8_t)hl, pkt, (size_t)len);
}

/* ---- QP1 receive ---------------------------------------------------------------------------- */

void uroced_cm_rx(struct uroced *d, struct uroce_dev *dev)
{
	struct uroced_cm *g = d->cm;

	/* Bounded work per wake-up (epoll reports the rest again). */
	for (unsigned k = 0; k < 256; k++) {
		uint8_t buf[2048];
		struct sockaddr_in6 from;
		union {
			char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + 3 * CMSG_SPACE(sizeof(int)) + 64];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov,
				     .msg_iovlen = 1, .msg_control = ctl.buf,
				     .msg_controllen = sizeof(ctl.buf) };
		uint8_t dst[16] = { 0 }, tclass = 0, hop = 0;
		ssize_t n = recvmsg(dev->rx_fd[0], &mh, MSG_DONTWAIT);
		size_t len;
		uint16_t sport;
		int64_t uid;
		uint64_t ts;

		if (n < 0)
			break;
		ts = realtime_ns();
		dev->stats.rx_default++;
		if (!g)
			continue;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
			    c->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				memcpy(dst, &pi.ipi6_addr, 16);
			} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS &&
				   c->cmsg_len >= CMSG_LEN(1)) {
				tclass = *CMSG_DATA(c);
			} else if (c->cmsg_len >= CMSG_LEN(sizeof(int)) &&
				   ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
				    (c->cmsg_level == IPPROTO_IPV6 &&
				     (c->cmsg_type == IPV6_TCLASS || c->cmsg_type == IPV6_HOPLIMIT)))) {
				int v;

				memcpy(&v, CMSG_DATA(c), sizeof(v));
				if (c->cmsg_type == IPV6_TCLASS)
					tclass = (uint8_t)v;
				else
					hop = (uint8_t)v;
			}
		len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf);
		sport = ntohs(from.sin6_port);
		/* Only what this socket is for is captured: QP1 packets (the rest is datagrams
		 * for QPNs nobody owns, counted in rx_default). */
		if (len >= UROCE_BTH_LEN && uroce_get_be24(buf + 5) == UROCE_GSI_QPN) {
			/* The owner before the packet runs (a REJ or DREP may end its
			 * connection), or after it (a REQ makes one). */
			uid = uroce_cm_packet_uid(g->core, buf, len, from.sin6_addr.s6_addr);
			uroce_cm_recv_packet(g->core, (uint64_t)now_ms(), dev->id, buf, len,
					     from.sin6_addr.s6_addr, dst, sport);
			if (uid < 0)
				uid = uroce_cm_packet_uid(g->core, buf, len, from.sin6_addr.s6_addr);
			cap_qp1(d, dev->id, uid, true, ts, from.sin6_addr.s6_addr, sport, dst, tclass,
				hop, buf, len);
		} else {
			uroce_cm_recv_packet(g->core, (uint64_t)now_ms(), dev->id, buf, len,
					     from.sin6_addr.s6_addr, dst, sport);
		}
	}
	uroced_cm_after(d);
}

/* ---- devices --------------------------------------------------------------------------------- */

static int is_loopback(const char *netdev)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), lo = 0;

	if (fd < 0)
		return !strcmp(netdev, "lo");
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, netdev, strnlen(netdev, IFNAMSIZ - 1));
	if (!ioctl(fd, SIOCGIFFLAGS, &ifr))
		lo = !!(ifr.ifr_flags & IFF_LOOPBACK);
	close(fd);
	return lo;
}

void uroced_cm_sync_devices(struct uroced *d)
{
	struct uroced_cm *g = d->cm;
	struct uroce_cm_dev *v;
	unsigned n = d->devs.n;

	if (!g)
		return;
	/* Every device answers on QP1 from the start: its receive group exists. */
	for (unsigned i = 0; i < n; i++)
		if (d->devs.dev[i]->info.ifindex)
			uroced_rx_ensure(d, d->devs.dev[i]);
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return;
	for (unsigned i = 0; i < n; i++) {
		v[i].id = d->devs.dev[i]->id;
		v[i].info = d->devs.dev[i]->info;
		v[i].loopback = d->devs.dev[i]->info.ifindex && is_loopback(d->devs.dev[i]->info.netdev);
	}
	if (n == g->nsnap && !memcmp(v, g->snap, n * sizeof(*v))) {
		free(v);
		return;
	}
	uroce_cm_set_devices(g->core, (uint64_t)now_ms(), v, n);
	free(g->snap);
	g->snap = v;
	g->nsnap = n;
	uroced_cm_after(d);
}

/* ---- the clock -------------------------------------------------------------------------------- */

static void arm(struct uroced *d)
{
	struct uroced_cm *g = d->cm;
	int64_t next = uroce_cm_next_timer(g->core);
	struct itimerspec its;

	if (next == g->armed)
		return;
	memset(&its, 0, sizeof(its));
	if (next >= 0) {
		/* CLOCK_MONOTONIC ms, as uroced_now_ms(); 0 would disarm. */
		int64_t t = next > 0 ? next : 1;

		its.it_value.tv_sec = t / 1000;
		its.it_value.tv_nsec = (t % 1000) * 1000000;
	}
	if (timerfd_settime(g->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		g->armed = next;
}

bool uroced_cm_is_timer(const struct uroced *d, const void *tag)
{
	return d->cm && tag == &d->cm->timer_tag;
}

void uroced_cm_timer(struct uroced *d)
{
	struct uroced_cm *g = d->cm;
	uint64_t expirations;

	if (read(g->tfd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		uroced_log("cm: timerfd: %s\n", strerror(errno));
	g->armed = -2;  /* re-arm whatever comes next */
	uroce_cm_tick(g->core, (uint64_t)now_ms());
	uroced_cm_after(d);
}

/* After anything the core did: write the events, follow its timers. */
void uroced_cm_after(struct uroced *d)
{
	if (!d->cm)
		return;
	uroced_cm_flush_events(d);
	arm(d);
}

int uroced_cm_busy(const struct uroced *d)
{
	return d->cm && uroce_cm_busy(d->cm->core);
}

/* ---- life ------------------------------------------------------------------------------------- */

int uroced_cm_init(struct uroced *d)
{
	static const struct uroce_cm_ops ops = {
		.send_mad = cm_send,
		.route = cm_route,
		.local_addr = cm_local_addr,
		.random = cm_random,
		.note = cm_note_log,
	};
	struct uroce_cm_config cfg;
	struct uroced_cm *g = calloc(1, sizeof(*g));
	struct epoll_event ev = { 0 };
	FILE *f;
	int err;

	if (!g)
		return -ENOMEM;
	uroce_cm_config_default(&cfg);
	/* The namespace's ephemeral range, as cma_alloc_any_port takes it. */
	f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		unsigned lo, hi;

		if (fscanf(f, "%u %u", &lo, &hi) == 2 && lo > 0 && lo <= hi && hi < 65536) {
			cfg.port_low = (uint16_t)lo;
			cfg.port_high = (uint16_t)hi;
		}
		fclose(f);
	}
	f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
	if (f) {
		if (fscanf(f, "%d", &cfg.bindv6only) != 1)
			cfg.bindv6only = 0;
		fclose(f);
	}
	/* How long a REQ that finds no listener waits for one (docs/cm.md, "Requests
	 * before their listener"); 0 refuses at once as Linux does. */
	{
		const char *env = getenv("UROCE_CM_LISTEN_GRACE_MS");
		char *end;
		unsigned long v;

		if (env && *env) {
			errno = 0;
			v = strtoul(env, &end, 10);
			if (!errno && !*end && v <= 60000)
				cfg.listen_grace_ms = (uint32_t)v;
			else
				uroced_log("ignoring UROCE_CM_LISTEN_GRACE_MS=%s (0..60000 ms)", env);
		}
	}
	g->tx4 = g->tx6 = g->tfd = -1;
	g->armed = -2;
	d->cm = g;
	err = uroce_cm_create(&cfg, &ops, d, &g->core);
	if (err)
		goto fail;
	g->tx4 = tx_socket(AF_INET, &g->sport4);
	g->tx6 = tx_socket(AF_INET6, &g->sport6);
	if (g->tx4 < 0 && g->tx6 < 0) {
		err = g->tx4;
		goto fail;
	}
	g->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (g->tfd < 0) {
		err = -errno;
		goto fail;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &g->timer_tag;
	if (epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, g->tfd, &ev) < 0) {
		err = -errno;
		goto fail;
	}
	g->psn = cm_random(NULL, UROCE_CM_RAND_PSN) & 0xFFFFFF;
	uroced_cm_sync_devices(d);
	return 0;
fail:
	uroced_cm_fini(d);
	return err;
}

void uroced_cm_fini(struct uroced *d)
{
	struct uroced_cm *g = d->cm;

	if (!g)
		return;
	uroce_cm_destroy(g->core);
	if (g->tx4 >= 0)
		close(g->tx4);
	if (g->tx6 >= 0)
		close(g->tx6);
	if (g->tfd >= 0)
		close(g->tfd);
	free(g->snap);
	free(g);
	d->cm = NULL;
}
