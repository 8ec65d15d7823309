/* devtable.c — the device table: one uroce device per netdev, like
 * `rdma link add rxe0 type rxe netdev eth0`.  Each device mirrors its netdev's
 * ifindex, MTU, MAC and state, and has a RoCE v2 GID table built from the netdev's
 * IP addresses (RoCEv2, IBA Annex A17: a RoCE v2 GID is one of the netdev's IPv6
 * addresses, or an IPv4 address mapped as ::ffff:a.b.c.d).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_packet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/uroced.h"

struct uroce_dev *uroce_dev_find(struct uroce_devtable *t, const char *name)
{
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->dev[i]->info.name, name))
			return t->dev[i];
	return NULL;
}

struct uroce_dev *uroce_dev_find_id(struct uroce_devtable *t, uint32_t id)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->dev[i]->id == id)
			return t->dev[i];
	return NULL;
}

/* Names as the kernel accepts for ib devices: printable, no '/' or spaces. */
static int valid_name(const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n == 0 || n >= max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] == '/' || s[i] > '~')
			return 0;
	return 1;
}

int uroce_dev_add(struct uroce_devtable *t, const char *name, const char *netdev,
		  struct uroce_dev **out)
{
	struct uroce_dev *d;
	uint32_t start;
	int err;

	if (!valid_name(name, UROCE_DEV_NAME_MAX) || !valid_name(netdev, UROCE_NETDEV_MAX))
		return -EINVAL;
	if (uroce_dev_find(t, name))
		return -EEXIST;
	/* One device per netdev, as rxe refuses a second link on the same netdev. */
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->dev[i]->info.netdev, netdev))
			return -EEXIST;
	if (t->n >= UROCE_MAX_DEVICES)
		return -ENOSPC;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	/* A random starting block: a daemon restarted while peers still hold state
	 * for old QPNs is unlikely to hand the same numbers out again.  Block 0
	 * holds QP0 and QP1 and is never handed out. */
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
		start = (uint32_t)getpid() * 2654435761u;
	/* Tests: $UROCE_QPN_START_BLOCK fixes the first block (e.g. the last one, which
	 * holds the multicast QPN 0xFFFFFF that is never handed out). */
	const char *sb = getenv("UROCE_QPN_START_BLOCK");

	if (sb && *sb)
		start = (uint32_t)strtoul(sb, NULL, 0);
	err = uroce_id_pool_init(&d->blocks, UROCE_QPN_BLOCKS, 1, start);
	if (err) {
		free(d);
		return err;
	}
	for (unsigned i = 0; i < UROCE_RX_MAX; i++)
		d->rx_fd[i] = -1;
	d->id = ++t->next_id;
	strcpy(d->info.name, name);
	strcpy(d->info.netdev, netdev);
	strcpy(d->stats.name, name);
	t->dev[t->n++] = d;
	if (out)
		*out = d;
	return 0;
}

int uroce_dev_del(struct uroce_devtable *t, const char *name)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct uroce_dev *d = t->dev[i];

		if (strcmp(d->info.name, name))
			continue;
		/* Closing also takes rx_fd[0] out of the daemon's epoll set. */
		for (unsigned j = 0; j < d->rx_n; j++)
			close(d->rx_fd[j]);
		uroce_qpn_pool_uninit(&d->blocks);
		free(d);
		memmove(&t->dev[i], &t->dev[i + 1], (t->n - i - 1) * sizeof(t->dev[0]));
		t->n--;
		return 0;
	}
	return -ENODEV;
}

void uroce_dev_free_all(struct uroce_devtable *t)
{
	while (t->n)
		uroce_dev_del(t, t->dev[t->n - 1]->info.name);
}

int uroce_gid_merge(struct uroce_dev_info *info, const uint8_t (*gids)[16], unsigned n)
{
	int changed = 0;
	unsigned last = 0;

	/* Like the kernel's GID cache, an entry keeps its index while its address
	 * exists: a QP's AH or path refers to a GID by index (sgid_index), so a
	 * vanished address leaves a hole instead of shifting the others. */
	for (unsigned i = 0; i < UROCE_MAX_GIDS; i++) {
		int keep = 0;

		if (!info->gids[i].valid)
			continue;
		for (unsigned j = 0; j < n; j++)
			if (!memcmp(info->gids[i].gid, gids[j], 16))
				keep = 1;
		if (!keep) {
			memset(&info->gids[i], 0, sizeof(info->gids[i]));
			changed = 1;
		}
	}
	for (unsigned j = 0; j < n; j++) {
		unsigned i, hole = UROCE_MAX_GIDS;

		for (i = 0; i < UROCE_MAX_GIDS; i++) {
			if (info->gids[i].valid && !memcmp(info->gids[i].gid, gids[j], 16))
				break;
			if (!info->gids[i].valid && hole == UROCE_MAX_GIDS)
				hole = i;
		}
		if (i < UROCE_MAX_GIDS || hole == UROCE_MAX_GIDS)
			continue;  /* present, or table full: the address gets no GID */
		memcpy(info->gids[hole].gid, gids[j], 16);
		info->gids[hole].type = UROCE_GID_TYPE_ROCE_V2;
		info->gids[hole].valid = 1;
		changed = 1;
	}
	for (unsigned i = 0; i < UROCE_MAX_GIDS; i++)
		if (info->gids[i].valid)
			last = i + 1;
	if (info->num_gids != last)
		changed = 1;
	info->num_gids = last;
	return changed;
}

/* FNV-1a: a stable hash for a node GUID where the netdev has no MAC. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t node_guid(const uint8_t mac[6], const char *netdev, uint64_t netns)
{
	uint8_t g[8];
	uint64_t out;
	static const uint8_t zero[6];

	if (memcmp(mac, zero, 6)) {
		/* Modified EUI-64 from the MAC (RFC 4291 2.5.1), as rxe makes its
		 * node GUID: flip the U/L bit, insert ff:fe in the middle. */
		g[0] = mac[0] ^ 2;
		g[1] = mac[1];
		g[2] = mac[2];
		g[3] = 0xff;
		g[4] = 0xfe;
		g[5] = mac[3];
		g[6] = mac[4];
		g[7] = mac[5];
	} else {
		/* No MAC (lo): hash the machine id, the namespace and the netdev, so
		 * the GUID is stable across restarts and differs between namespaces
		 * that play separate hosts.  Marked locally administered. */
		char id[64] = "";
		uint64_t h = 0xcbf29ce484222325ull;
		FILE *f = fopen("/etc/machine-id", "r");

		if (f) {
			if (!fgets(id, sizeof(id), f))
				id[0] = 0;
			fclose(f);
		}
		h = fnv(h, id, strlen(id));
		h = fnv(h, &netns, sizeof(netns));
		h = fnv(h, netdev, strlen(netdev));
		for (int i = 0; i < 8; i++)
			g[i] = (uint8_t)(h >> (56 - 8 * i));
		g[0] = (uint8_t)((g[0] & ~1u) | 2u);
	}
	memcpy(&out, g, 8);
	return out;
}

/* Re-read one device's netdev.  ifa is the getifaddrs() list. */
static int refresh_one(struct uroce_devtable *t, struct uroce_dev *d, struct ifaddrs *ifa, int sock)
{
	struct uroce_dev_info *info = &d->info;
	struct uroce_dev_info old = *info;
	uint8_t gids[UROCE_MAX_GIDS * 2][16];
	unsigned n = 0;
	struct ifreq ifr;
	int changed;

	memset(&ifr, 0, sizeof(ifr));
	/* info->netdev is NUL-terminated within IFNAMSIZ (valid_name). */
	memcpy(ifr.ifr_name, info->netdev, IFNAMSIZ);
	ifr.ifr_name[IFNAMSIZ - 1] = 0;
	info->ifindex = if_nametoindex(info->netdev);
	if (!info->ifindex) {
		/* The netdev is gone (or not there yet): port down, no GIDs. */
		info->port_up = 0;
		info->netdev_mtu = 0;
	} else {
		unsigned flags = 0;

		if (!ioctl(sock, SIOCGIFMTU, &ifr))
			info->netdev_mtu = (uint32_t)ifr.ifr_mtu;
		if (!ioctl(sock, SIOCGIFFLAGS, &ifr))
			flags = (unsigned)ifr.ifr_flags;
		/* rxe reports the port ACTIVE when the netdev is up and has carrier;
		 * lo never reports IFF_RUNNING in every kernel, so up is enough. */
		if (flags & IFF_LOOPBACK)
			info->port_up = !!(flags & IFF_UP);
		else
			info->port_up = (flags & IFF_UP) && (flags & IFF_RUNNING);
	}
	memset(info->mac, 0, sizeof(info->mac));
	/* IPv4 first, then IPv6 (two passes), so a fresh table starts with the
	 * IPv4-mapped GIDs at the lowest indices. */
	for (int pass = 0; pass < 3 && info->ifindex; pass++) {
		for (struct ifaddrs *a = ifa; a; a = a->ifa_next) {
			if (!a->ifa_addr || strcmp(a->ifa_name, info->netdev))
				continue;
			if (pass == 0 && a->ifa_addr->sa_family == AF_PACKET) {
				const struct sockaddr_ll *ll = (const void *)a->ifa_addr;

				if (ll->sll_halen == 6)
					memcpy(info->mac, ll->sll_addr, 6);
			} else if (pass == 1 && a->ifa_addr->sa_family == AF_INET &&
				   n < UROCE_MAX_GIDS * 2) {
				const struct sockaddr_in *in = (const void *)a->ifa_addr;

				memset(gids[n], 0, 10);
				gids[n][10] = gids[n][11] = 0xff;
				memcpy(&gids[n][12], &in->sin_addr, 4);
				n++;
			} else if (pass == 2 && a->ifa_addr->sa_family == AF_INET6 &&
				   n < UROCE_MAX_GIDS * 2) {
				const struct sockaddr_in6 *in6 = (const void *)a->ifa_addr;

				memcpy(gids[n++], &in6->sin6_addr, 16);
			}
		}
	}
	info->node_guid = node_guid(info->mac, info->netdev, t->netns_inode);
	changed = uroce_gid_merge(info, (const uint8_t (*)[16])gids, n);
	if (changed) {
		d->stats.gid_changes++;
		d->pending_events |= 1u << UROCE_EV_GID_CHANGE;
	}
	if (info->port_up != old.port_up)
		d->pending_events |= 1u << (info->port_up ? UROCE_EV_PORT_ACTIVE : UROCE_EV_PORT_ERR);
	if (info->netdev_mtu != old.netdev_mtu)
		d->pending_events |= 1u << UROCE_EV_MTU_CHANGE;
	return changed || memcmp(&old, info, sizeof(old)) != 0;
}

int uroce_dev_refresh_all(struct uroce_devtable *t)
{
	struct ifaddrs *ifa = NULL;
	int sock, changed = 0;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		int err = -errno;

		freeifaddrs(ifa);
		return err;
	}
	for (unsigned i = 0; i < t->n; i++)
		changed |= refresh_one(t, t->dev[i], ifa, sock);
	close(sock);
	freeifaddrs(ifa);
	return changed;
}
