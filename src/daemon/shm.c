/* shm.c — uroced's side of the same-host shared-memory links (ipc/shm_proto.h,
 * docs/transport.md "The shared-memory link").
 *
 * A client connection that takes part (SHM_ATTACH) gives the daemon its wake eventfd.
 * When one asks to reach a QP (SHM_LINK: a GID and a QPN), the daemon finds the device
 * that holds the GID among its own, the connection that owns the QPN on it (it hands the
 * QPNs out, so it knows) and, if that one takes part too, the link between the two: one
 * per pair of connections, created on first use as a memfd sealed against resizing.  The
 * asking side gets it in the reply, with the peer's eventfd; the peer is told through its
 * eventfd (UROCE_SHM_WAKE_LINKS) and takes it with SHM_ACCEPT.  Any two users the daemon
 * serves may be linked: what one end can do to the other through the link is what it could
 * do by sending it UDP datagrams, and each end checks what it reads (shm.c of the
 * transport).
 *
 * When a connection closes, its side of each of its links is marked gone in the link's
 * header, the peer is woken, and the daemon lets go of the link (the survivor's mapping
 * keeps the memory until it unmaps).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/uroced.h"
#include "ipc/shm_proto.h"

/* A descriptor is an eventfd whose writes cannot block the daemon. */
static int is_nonblocking_eventfd(int fd)
{
	char path[64], target[64];
	ssize_t n;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || !(fl & O_NONBLOCK))
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = 0;
	return !strcmp(target, "anon_inode:[eventfd]");
}

/* Tell @c its links changed (a new one to accept, a peer gone).  Never blocks: the
 * descriptor was checked to be non-blocking at attach (a client that clears O_NONBLOCK
 * later on its own copy is checked again here; a full counter is a wake-up pending). */
static void wake_links(struct uroce_client *c)
{
	uint64_t v = UROCE_SHM_WAKE_LINKS;
	int fl;

	if (!c || c->shm_efd < 0)
		return;
	fl = fcntl(c->shm_efd, F_GETFL);
	if (fl < 0 || !(fl & O_NONBLOCK))
		return;
	if (write(c->shm_efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: the counter is near its maximum, the client has a wake-up pending. */
	}
}

int uroced_shm_attach(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev, int *fd)
{
	(void)d;
	if (c->shm_efd >= 0)
		return -EEXIST;
	if (*fd < 0 || !is_nonblocking_eventfd(*fd))
		return -EINVAL;
	c->shm_efd = *fd;
	c->shm_dev_id = dev->id;
	*fd = -1;
	if (uroced_verbose)
		uroced_log("pid %d takes part in shm links on %s\n", (int)c->pid, dev->info.name);
	return 0;
}

/* The device of this daemon one of whose valid GIDs is @gid, or NULL. */
static struct uroce_dev *dev_of_gid(struct uroced *d, const uint8_t gid[16])
{
	for (unsigned i = 0; i < d->devs.n; i++) {
		const struct uroce_dev_info *info = &d->devs.dev[i]->info;

		for (unsigned g = 0; g < info->num_gids && g < UROCE_MAX_GIDS; g++)
			if (info->gids[g].valid && !memcmp(info->gids[g].gid, gid, 16))
				return d->devs.dev[i];
	}
	return NULL;
}

static struct uroced_shm_link *find_link(struct uroced *d, const struct uroce_client *a,
					 const struct uroce_client *b)
{
	for (size_t i = 0; i < d->shm_n; i++) {
		struct uroced_shm_link *l = d->shm_links[i];

		if ((l->side[0] == a && l->side[1] == b) || (l->side[0] == b && l->side[1] == a))
			return l;
	}
	return NULL;
}

static uint32_t ring_size(uint32_t want)
{
	uint32_t r = UROCE_SHM_RING_MIN;

	if (!want)
		want = UROCE_SHM_RING_DEFAULT;
	if (want > UROCE_SHM_RING_MAX)
		want = UROCE_SHM_RING_MAX;
	while (r < want)
		r <<= 1;
	return r;
}

static struct uroced_shm_link *link_new(struct uroced *d, struct uroce_client *a, struct uroce_client *b,
					uint32_t ring_bytes, int *err)
{
	struct uroced_shm_link *l = calloc(1, sizeof(*l)), **grown;
	uint64_t size = uroce_shm_size(ring_bytes);
	char name[48];

	*err = -ENOMEM;
	if (!l)
		return NULL;
	if (d->shm_n == d->shm_cap) {
		size_t cap = d->shm_cap ? d->shm_cap * 2 : 16;

		grown = realloc(d->shm_links, cap * sizeof(*grown));
		if (!grown) {
			free(l);
			return NULL;
		}
		d->shm_links = grown;
		d->shm_cap = cap;
	}
	l->id = ++d->shm_next_id;
	snprintf(name, sizeof(name), "uroce-shm-%llu", (unsigned long long)l->id);
	l->memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	/* Sealed at its size: a peer that could shrink it would make the other's reads fault
	 * (SIGBUS), one that could grow it would charge the daemon's memory. */
	if (l->memfd < 0 || ftruncate(l->memfd, (off_t)size) < 0 ||
	    fcntl(l->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		*err = -errno;
		goto fail;
	}
	l->hdr = mmap(NULL, UROCE_SHM_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, l->memfd, 0);
	if (l->hdr == MAP_FAILED) {
		l->hdr = NULL;
		*err = -errno;
		goto fail;
	}
	l->hdr->magic = UROCE_SHM_MAGIC;
	l->hdr->version = UROCE_SHM_VERSION;
	l->hdr->size = size;
	l->hdr->link_id = l->id;
	l->hdr->ring_bytes = ring_bytes;
	l->hdr->self = a == b;
	l->hdr->side[0].pid = a->pid;
	l->hdr->side[0].uid = a->uid;
	l->hdr->side[1].pid = b->pid;
	l->hdr->side[1].uid = b->uid;
	l->ring_bytes = ring_bytes;
	l->side[0] = a;
	l->side[1] = b;
	d->shm_links[d->shm_n++] = l;
	d->shm_created++;
	*err = 0;
	return l;
fail:
	if (l->memfd >= 0)
		close(l->memfd);
	free(l);
	return NULL;
}

static void link_free(struct uroced *d, struct uroced_shm_link *l)
{
	for (size_t i = 0; i < d->shm_n; i++) {
		if (d->shm_links[i] == l) {
			d->shm_links[i] = d->shm_links[--d->shm_n];
			break;
		}
	}
	if (l->hdr)
		munmap(l->hdr, UROCE_SHM_HDR_BYTES);
	close(l->memfd);
	free(l);
}

static int pending_add(struct uroce_client *c, uint64_t id)
{
	if (c->shm_npending == c->shm_cappending) {
		size_t cap = c->shm_cappending ? c->shm_cappending * 2 : 8;
		uint64_t *grown = realloc(c->shm_pending, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		c->shm_pending = grown;
		c->shm_cappending = cap;
	}
	c->shm_pending[c->shm_npending++] = id;
	return 0;
}

static void pending_del(struct uroce_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->shm_npending; i++) {
		if (c->shm_pending[i] == id) {
			memmove(&c->shm_pending[i], &c->shm_pending[i + 1],
				(c->shm_npending - i - 1) * sizeof(*c->shm_pending));
			c->shm_npending--;
			return;
		}
	}
}

/* The reply's description of @l for its side @c, and the two descriptors. */
static void describe(const struct uroced_shm_link *l, const struct uroce_client *c,
		     struct uroce_ipc_resp *resp, int out[2])
{
	unsigned side = l->side[0] == c ? 0 : 1;
	const struct uroce_client *peer = l->side[side ^ 1];

	memset(&resp->u.shm, 0, sizeof(resp->u.shm));
	resp->u.shm.id = l->id;
	resp->u.shm.size = uroce_shm_size(l->ring_bytes);
	resp->u.shm.side = side;
	resp->u.shm.self = l->side[0] == l->side[1];
	resp->u.shm.peer_pid = peer ? peer->pid : 0;
	resp->u.shm.peer_uid = peer ? peer->uid : 0;
	resp->u.shm.ring_bytes = l->ring_bytes;
	out[0] = l->memfd;
	out[1] = peer ? peer->shm_efd : -1;
}

int uroced_shm_link(struct uroced *d, struct uroce_client *c, const uint8_t dgid[16], uint32_t dqpn,
		    uint32_t ring_bytes, struct uroce_ipc_resp *resp, int out[2])
{
	struct uroce_dev *dev;
	struct uroce_client *owner;
	struct uroced_shm_link *l;
	int err;

	if (c->shm_efd < 0)
		return -ENOTCONN;
	dev = dev_of_gid(d, dgid);
	if (!dev)
		return -ENOENT;          /* not a GID of this host: the UDP path */
	owner = uroced_qpn_owner(d, dev, dqpn);
	if (!owner)
		return -ENOENT;
	if (owner->shm_efd < 0)
		return -ENOTCONN;        /* the owner takes no part (UROCE_LINK=udp, the device option) */
	l = find_link(d, c, owner);
	if (!l) {
		l = link_new(d, c, owner, ring_size(ring_bytes), &err);
		if (!l)
			return err;
		if (owner != c && pending_add(owner, l->id) == 0)
			wake_links(owner);
		if (uroced_verbose)
			uroced_log("shm link %llu: pid %d <-> pid %d (%u-byte rings)\n",
				   (unsigned long long)l->id, (int)c->pid, (int)owner->pid, l->ring_bytes);
	} else {
		pending_del(c, l->id);   /* handed over now: no need to accept it */
	}
	describe(l, c, resp, out);
	resp->u.shm.qpn_block = dqpn / UROCE_IPC_QPN_BLOCK;
	return 0;
}

int uroced_shm_accept(struct uroced *d, struct uroce_client *c, struct uroce_ipc_resp *resp, int out[2])
{
	while (c->shm_npending) {
		uint64_t id = c->shm_pending[0];

		pending_del(c, id);
		for (size_t i = 0; i < d->shm_n; i++) {
			struct uroced_shm_link *l = d->shm_links[i];

			if (l->id == id && (l->side[0] == c || l->side[1] == c)) {
				describe(l, c, resp, out);
				return 0;
			}
		}
		/* Gone meanwhile (its other side closed): next. */
	}
	return -ENOENT;
}

void uroced_shm_client_gone(struct uroced *d, struct uroce_client *c)
{
	for (size_t i = 0; i < d->shm_n;) {
		struct uroced_shm_link *l = d->shm_links[i];
		int mine = 0;

		for (unsigned s = 0; s < 2; s++) {
			if (l->side[s] != c)
				continue;
			mine = 1;
			__atomic_store_n(&l->hdr->side[s].gone, 1, __ATOMIC_SEQ_CST);
			l->side[s] = NULL;
		}
		if (!mine) {
			i++;
			continue;
		}
		/* The survivor keeps its mapping (and with it the memory) until its QPs let go
		 * of the link; nothing is handed out for it any more, so the daemon's part
		 * ends here. */
		wake_links(l->side[0] ? l->side[0] : l->side[1]);
		if (uroced_verbose)
			uroced_log("shm link %llu: pid %d gone\n", (unsigned long long)l->id, (int)c->pid);
		link_free(d, l);   /* moves the last link into slot i */
	}
	if (c->shm_efd >= 0)
		close(c->shm_efd);
	c->shm_efd = -1;
	free(c->shm_pending);
	c->shm_pending = NULL;
	c->shm_npending = c->shm_cappending = 0;
}

void uroced_shm_fini(struct uroced *d)
{
	while (d->shm_n)
		link_free(d, d->shm_links[d->shm_n - 1]);
	free(d->shm_links);
	d->shm_links = NULL;
	d->shm_cap = 0;
}
