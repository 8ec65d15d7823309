/* rxgroup.c — receive steering of UDP 4791 for one device (docs/daemon.md,
 * docs/transport.md, src/net/steer.h).
 *
 * Every process of a device receives on the same address and port through one
 * SO_REUSEPORT group; a classic-BPF program attached to the group picks the member
 * socket from the destination QPN in the BTH.  The daemon creates every member: the
 * kernel only groups sockets of the same owner uid, and only the creator knows each
 * socket's index, which is its position in bind order.  A member whose client went
 * away is never closed, because closing moves the last member into the hole and
 * renumbers it; it stays as a tombstone and is handed, drained, to the next client.
 *
 * Index 0 is the daemon's own socket and the program's default: QP1 (the connection
 * manager's agent, cm_agent.c, reads it), QPNs nobody owns, datagrams too short for a
 * BTH.  It reports each datagram's destination address (IPV6_PKTINFO): the agent
 * checks the ICRC over it and answers from it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/uroced.h"
#include "net/frame.h"
#include "net/steer.h"

#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29           /* linux/in6.h, not in older libc headers */
#endif

/* A new member of dev's group, bound like every other member. */
static int rx_socket_new(const struct uroce_dev *dev)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(UROCE_UDP_PORT) };
	int fd, off = 0, on = 1, err;

	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Dual stack: IPv4 datagrams arrive with ::ffff:a.b.c.d addresses, which are
	 * already the RoCE v2 GIDs.  Bound to the netdev: one group per device.
	 * IP_MULTICAST_ALL / IPV6_MULTICAST_ALL off: a member receives only the multicast
	 * groups joined on it (a client's ibv_attach_mcast, docs/ud-uc.md).  Linux's
	 * default for an AF_INET6 socket is on for IPv6 groups, which would hand every
	 * member and the daemon's socket a copy of every IPv6 group joined on the host.
	 * SO_REUSEADDR: a client's connected receive socket binds our address and port
	 * beside the group without joining it (transport/netio.c). */
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &off, sizeof(off)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev->info.netdev,
		       (socklen_t)strlen(dev->info.netdev) + 1) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Read whatever is queued on a member without blocking; returns the count. */
static unsigned drain(int fd)
{
	char buf[64];
	unsigned n = 0;

	/* MSG_TRUNC: a datagram is consumed whole whatever the buffer size.  At most
	 * 256 per call: bounded work per wake-up (epoll reports the rest again). */
	while (n < 256 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC) >= 0)
		n++;
	return n;
}

struct uroce_dev *uroced_rx_dev(struct uroced *d, void *tag)
{
	for (unsigned i = 0; i < d->devs.n; i++)
		if (tag == &d->devs.dev[i]->rx_tag)
			return d->devs.dev[i];
	return NULL;
}

int uroced_rx_ensure(struct uroced *d, struct uroce_dev *dev)
{
	int fd, err, on = 1;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &dev->rx_tag };

	if (dev->rx_n)
		return 0;
	/* First use: the daemon's default member is index 0. */
	fd = rx_socket_new(dev);
	if (fd < 0)
		return fd;
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof(on)) < 0 ||
	    epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	/* What the IP header said, for `uroce capture` of QP1 (best effort: the ICRC
	 * masks both, cm_agent.c). */
	(void)setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
	dev->rx_fd[0] = fd;
	dev->rx_owner[0] = NULL;
	dev->rx_n = 1;
	/* A program from the start: a member that joins later gets nothing until a
	 * rule names it, instead of a share of the kernel's hash. */
	err = uroced_steer_update(d, dev);
	if (err)
		uroced_log("%s: cannot attach steering: %s\n", dev->info.name, strerror(-err));
	return 0;
}

int uroced_rx_get(struct uroced *d, struct uroce_dev *dev, struct uroce_client *c,
		  struct uroce_client_dev *cd)
{
	unsigned i;
	int fd, err;

	if (cd->rx_index)
		return -EEXIST;
	err = uroced_rx_ensure(d, dev);
	if (err)
		return err;
	for (i = 1; i < dev->rx_n; i++)
		if (!dev->rx_owner[i])
			break;
	if (i == dev->rx_n) {
		if (dev->rx_n >= UROCE_RX_MAX)
			return -ENOSPC;
		fd = rx_socket_new(dev);
		if (fd < 0)
			return fd;
		dev->rx_fd[dev->rx_n++] = fd;
	} else {
		/* A tombstone: nothing steers to it any more; whatever arrived
		 * before its owner left is not for the new one. */
		while (drain(dev->rx_fd[i]) == 256)
			;
	}
	dev->rx_owner[i] = c;
	cd->rx_index = i;
	dev->stats.rx_sockets++;
	/* The client may hold blocks already: steer them now. */
	err = uroced_steer_update(d, dev);
	if (err)
		uroced_log("%s: steering update failed: %s\n", dev->info.name, strerror(-err));
	return dev->rx_fd[i];
}

void uroced_rx_release(struct uroced *d, struct uroce_dev *dev, unsigned index)
{
	if (!index || index >= dev->rx_n || !dev->rx_owner[index])
		return;
	dev->rx_owner[index] = NULL;
	dev->stats.rx_sockets--;
	uroced_steer_update(d, dev);
}

static int cmp_rule(const void *a, const void *b)
{
	const struct uroce_steer_rule *x = a, *y = b;

	return x->qpn_lo < y->qpn_lo ? -1 : x->qpn_lo > y->qpn_lo;
}

int uroced_steer_update(struct uroced *d, struct uroce_dev *dev)
{
	struct uroce_steer_rule *rules;
	size_t n = 0, cap = 0, merged = 0;
	int err;

	if (!dev->rx_n)
		return 0;
	for (unsigned i = 1; i < dev->rx_n; i++) {
		struct uroce_client *c = dev->rx_owner[i];

		if (!c)
			continue;
		for (size_t j = 0; j < c->ndevs; j++)
			if (c->devs[j].dev_id == dev->id)
				cap += c->devs[j].nblocks;
	}
	rules = calloc(cap ? cap : 1, sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	for (unsigned i = 1; i < dev->rx_n; i++) {
		struct uroce_client *c = dev->rx_owner[i];

		if (!c)
			continue;
		for (size_t j = 0; j < c->ndevs; j++) {
			const struct uroce_client_dev *cd = &c->devs[j];

			if (cd->dev_id != dev->id)
				continue;
			for (size_t k = 0; k < cd->nblocks && n < cap; k++) {
				rules[n].qpn_lo = cd->blocks[k].block * UROCE_QPN_BLOCK;
				rules[n].qpn_hi = rules[n].qpn_lo + UROCE_QPN_BLOCK - 1;
				rules[n].index = (uint16_t)i;
				n++;
			}
		}
	}
	/* Adjacent blocks of one member become one rule: a client's blocks are
	 * usually consecutive, so the program stays short. */
	qsort(rules, n, sizeof(*rules), cmp_rule);
	for (size_t i = 0; i < n; i++) {
		if (merged && rules[merged - 1].index == rules[i].index &&
		    rules[merged - 1].qpn_hi + 1 == rules[i].qpn_lo)
			rules[merged - 1].qpn_hi = rules[i].qpn_hi;
		else
			rules[merged++] = rules[i];
	}
	err = uroce_steer_attach(dev->rx_fd[0], rules, merged, 0);
	free(rules);
	if (!err)
		dev->stats.steer_updates++;
	return err;
}

void uroced_rx_default(struct uroced *d, struct uroce_dev *dev)
{
	/* The connection manager's agent reads (and counts) what comes to index 0; without
	 * it, count and drop.  Bounded per wake-up either way. */
	if (d->cm)
		uroced_cm_rx(d, dev);
	else
		dev->stats.rx_default += drain(dev->rx_fd[0]);
}
