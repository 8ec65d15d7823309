/* mcast.c — UD multicast attachments (mcast.h, docs/ud-uc.md "Multicast").
 *
 * Receiving a group takes two sockets per (context, group):
 *  - the context's member of the device's SO_REUSEPORT group (where netio reads) joins the
 *    IP group, so the kernel queues a copy of each datagram there;
 *  - a companion socket, bound to the group address itself and port 4791, joins it too and
 *    drops everything it is given (a filter that accepts nothing).
 * Why the companion: Linux delivers a multicast datagram to every socket that matches it
 * (port, bound device, membership) and does not consult a reuseport group — except when
 * exactly one socket matches.  Then early demux picks that socket and, on current kernels,
 * the reuseport lookup runs again over its group with our steering program, which sends
 * QPN 0xFFFFFF to the group's default member (the daemon) instead.  Seen on 6.18: a lone
 * member in a namespace got nothing, uroced's rx_default counted every datagram.  With a
 * companion each joined context contributes two matching sockets, so the lone-member case
 * never occurs and every joined member gets its copy.  The companion is bound to the group
 * address, so it never competes for unicast datagrams.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/mcast.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

#define ROCE_PORT 4791                  /* RoCEv2 Annex A17: UDP destination port */

/* One attachment (QP, GID). */
struct att {
	struct att *next;
	const struct uroce_qp *qp;
	uint8_t gid[16];
};

/* One group joined by a context: its member socket joined it, and the companion. */
struct grp {
	struct grp *next;
	const struct uroce_context *ctx;
	uint8_t gid[16];
	int companion;                  /* -1: could not be opened (see companion_open) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct att *atts;
static struct grp *grps;

static bool v4mapped(const uint8_t *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };

	return !memcmp(g, prefix, sizeof(prefix));
}

bool uroce_mcast_gid_ok(const uint8_t gid[16])
{
	if (v4mapped(gid))
		return (gid[12] & 0xF0) == 0xE0;        /* 224.0.0.0/4 */
	return gid[0] == 0xFF;                          /* ff00::/8 */
}

/* Join or leave the IP group on @fd.  IP_MULTICAST_ALL / IPV6_MULTICAST_ALL off first, so
 * the socket matches only the groups it joined (uroced creates its members that way too;
 * this covers a daemon that did not). */
static int membership(int fd, int ifindex, const uint8_t gid[16], bool join)
{
	int zero = 0;

	if (v4mapped(gid)) {
		struct ip_mreqn m = { .imr_ifindex = ifindex };

		memcpy(&m.imr_multiaddr, gid + 12, 4);
		(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
		if (setsockopt(fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &m, sizeof(m)))
			return -errno;
		return 0;
	}
	struct ipv6_mreq m6 = { .ipv6mr_interface = (unsigned)ifindex };

	memcpy(&m6.ipv6mr_multiaddr, gid, 16);
	(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof(zero));
	if (setsockopt(fd, IPPROTO_IPV6, join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &m6, sizeof(m6)))
		return -errno;
	return 0;
}

/*
 * The companion socket of @gid on @ifindex (file comment): bound to the group address and
 * port 4791 on the device, joined, accepting nothing.  Binding next to uroced's members on
 * [::]:4791 needs SO_REUSEPORT and, by the kernel's rule for reuseport, the daemon's uid;
 * the companion's own reuseport group (companions of other contexts) is never consulted
 * while two sockets match.  Returns the fd or -errno.
 */
static int companion_open(int ifindex, const uint8_t gid[16])
{
	static struct sock_filter drop_all[] = { BPF_STMT(BPF_RET | BPF_K, 0) };
	struct sock_fprog prog = { .len = 1, .filter = drop_all };
	struct sockaddr_storage ss;
	socklen_t sl;
	char ifname[IF_NAMESIZE];
	int fd, one = 1, zero = 0, err;
	bool v4 = v4mapped(gid);

	memset(&ss, 0, sizeof(ss));
	if (v4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(ROCE_PORT);
		memcpy(&s4->sin_addr, gid + 12, 4);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(ROCE_PORT);
		memcpy(&s6->sin6_addr, gid, 16);
		s6->sin6_scope_id = (uint32_t)ifindex;  /* ff02:: and other scoped groups */
		sl = sizeof(*s6);
	}
	fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if ((!v4 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	if (v4)
		(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
	else
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof(zero));
	/* On the device, like the members: it then matches only that device's datagrams.
	 * Unprivileged processes may bind an unbound socket to a device (Linux >= 5.7); if
	 * that is refused the companion still works, matching the group on any device. */
	if (if_indextoname((unsigned)ifindex, ifname))
		(void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname, (socklen_t)strlen(ifname) + 1);
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0)
		goto fail;
	err = membership(fd, ifindex, gid, true);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

static struct grp *grp_find(const struct uroce_context *ctx, const uint8_t gid[16])
{
	for (struct grp *g = grps; g; g = g->next)
		if (g->ctx == ctx && !memcmp(g->gid, gid, 16))
			return g;
	return NULL;
}

/* The context's first attachment to @gid: companion first, then the member, so that from
 * the moment the member matches, two sockets of ours do.  Caller holds lock. */
static int grp_join(const struct uroce_context *ctx, const uint8_t gid[16], int fd, int ifindex)
{
	struct grp *g = calloc(1, sizeof(*g));
	int ret;

	if (!g)
		return -ENOMEM;
	g->ctx = ctx;
	memcpy(g->gid, gid, 16);
	/* Without a companion (another uid than uroced's holds the port) the member alone
	 * still receives whenever a second socket of the host joined the group; a lone
	 * member loses the datagrams to the daemon, which counts them (rx_default). */
	g->companion = companion_open(ifindex, gid);
	if (g->companion < 0)
		g->companion = -1;
	ret = membership(fd, ifindex, gid, true);
	if (ret) {
		if (g->companion >= 0)
			close(g->companion);
		free(g);
		return ret;
	}
	g->next = grps;
	grps = g;
	return 0;
}

/* The context's last attachment to @gid went: member leaves first, then the companion
 * (the reverse of grp_join).  @fd < 0: the member socket is gone already. */
static void grp_leave(const struct uroce_context *ctx, const uint8_t gid[16], int fd, int ifindex)
{
	for (struct grp **pp = &grps; *pp; pp = &(*pp)->next) {
		struct grp *g = *pp;

		if (g->ctx != ctx || memcmp(g->gid, gid, 16))
			continue;
		if (fd >= 0)
			(void)membership(fd, ifindex, gid, false);
		if (g->companion >= 0)
			close(g->companion);    /* closing leaves its group */
		*pp = g->next;
		free(g);
		return;
	}
}

static unsigned users(const struct uroce_context *ctx, const uint8_t gid[16])
{
	unsigned n = 0;

	for (struct att *a = atts; a; a = a->next)
		n += a->qp->uctx == ctx && !memcmp(a->gid, gid, 16);
	return n;
}

int uroce_mcast_attach(struct uroce_qp *qp, const uint8_t gid[16], int fd, int ifindex)
{
	struct att *a;
	int ret = 0;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_UD || !uroce_mcast_gid_ok(gid))
		return -EINVAL;             /* IBA 10.5: only UD QPs join multicast groups */
	if (fd < 0)
		return -EBADF;
	pthread_mutex_lock(&lock);
	for (a = atts; a; a = a->next)
		if (a->qp == qp && !memcmp(a->gid, gid, 16))
			goto out;           /* already attached: accepted, as rxe does */
	a = calloc(1, sizeof(*a));
	if (!a) {
		ret = -ENOMEM;
		goto out;
	}
	if (!grp_find(qp->uctx, gid)) {
		ret = grp_join(qp->uctx, gid, fd, ifindex);
		if (ret) {
			free(a);
			goto out;
		}
	}
	a->qp = qp;
	memcpy(a->gid, gid, 16);
	a->next = atts;
	atts = a;
out:
	pthread_mutex_unlock(&lock);
	return ret;
}

/* Remove (qp, gid) — every gid of qp when @gid is NULL.  Caller holds lock. */
static int remove_locked(const struct uroce_qp *qp, const uint8_t *gid, int fd, int ifindex)
{
	int found = -ENOENT;

	for (struct att **pp = &atts; *pp;) {
		struct att *a = *pp;

		if (a->qp != qp || (gid && memcmp(a->gid, gid, 16))) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
		if (!users(qp->uctx, a->gid))
			grp_leave(qp->uctx, a->gid, fd, ifindex);
		free(a);
		found = 0;
	}
	return found;
}

int uroce_mcast_detach(struct uroce_qp *qp, const uint8_t gid[16], int fd, int ifindex)
{
	int ret;

	pthread_mutex_lock(&lock);
	ret = remove_locked(qp, gid, fd, ifindex);
	pthread_mutex_unlock(&lock);
	return ret;
}

void uroce_mcast_qp_gone(struct uroce_qp *qp, int fd, int ifindex)
{
	pthread_mutex_lock(&lock);
	remove_locked(qp, NULL, fd, ifindex);
	pthread_mutex_unlock(&lock);
}

bool uroce_mcast_member(const struct uroce_qp *qp, const uint8_t gid[16])
{
	bool yes = false;

	pthread_mutex_lock(&lock);
	for (struct att *a = atts; a && !yes; a = a->next)
		yes = a->qp == qp && !memcmp(a->gid, gid, 16);
	pthread_mutex_unlock(&lock);
	return yes;
}
