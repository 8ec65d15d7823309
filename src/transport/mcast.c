/* mcast.c — UD multicast attachments (mcast.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/mcast.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

struct att {
	struct att *next;
	const struct uroce_context *ctx;
	const struct uroce_qp *qp;
	uint8_t gid[16];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct att *atts;

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

/* Join or leave the IP group on the receive socket.  IP_MULTICAST_ALL=0 first, so this
 * socket gets only the groups it joined (Linux's default 1 delivers every group joined by
 * any socket of the host to every socket bound to the port). */
static int membership(int fd, int ifindex, const uint8_t gid[16], bool join)
{
	int zero = 0;

	if (v4mapped(gid)) {
		struct ip_mreqn m = { .imr_ifindex = ifindex };

		memcpy(&m.imr_multiaddr, gid + 12, 4);
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
		if (setsockopt(fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP, &m, sizeof(m)))
			return -errno;
		return 0;
	}
	struct ipv6_mreq m6 = { .ipv6mr_interface = (unsigned)ifindex };

	memcpy(&m6.ipv6mr_multiaddr, gid, 16);
	setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof(zero));
	if (setsockopt(fd, IPPROTO_IPV6, join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &m6, sizeof(m6)))
		return -errno;
	return 0;
}

static unsigned users(const struct uroce_context *ctx, const uint8_t gid[16])
{
	unsigned n = 0;

	for (struct att *a = atts; a; a = a->next)
		n += a->ctx == ctx && !memcmp(a->gid, gid, 16);
	return n;
}

int uroce_mcast_attach(struct uroce_qp *qp, const uint8_t gid[16], int fd, int ifindex)
{
	struct att *a;
	int ret = 0;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_UD || !uroce_mcast_gid_ok(gid))
		return -EINVAL;             /* IBA 10.5: only UD QPs join multicast groups */
	pthread_mutex_lock(&lock);
	for (a = atts; a; a = a->next)
		if (a->qp == qp && !memcmp(a->gid, gid, 16))
			goto out;           /* already attached */
	if (!users(qp->uctx, gid))
		ret = membership(fd, ifindex, gid, true);
	if (ret)
		goto out;
	a = calloc(1, sizeof(*a));
	if (!a) {
		ret = -ENOMEM;
		goto out;
	}
	a->ctx = qp->uctx;
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
		if (!users(a->ctx, a->gid) && fd >= 0)
			membership(fd, ifindex, a->gid, false);
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
