/* capture.c — uroced's part of `uroce capture` (ipc/cap_proto.h, docs/daemon.md
 * "Capturing").
 *
 * Each context's data path registers a capture ring per device (CAP_REGISTER).  The daemon
 * maps only the ring's header page: it is the one that switches a ring on (`active` = the
 * session number, after moving head to tail so that a capture starts empty) and off.  A
 * capture is a connection that sent CAP_START; it asks for rings with CAP_NEXT, and gets
 * only those of processes of its own uid (every ring when it is root): the SO_PEERCRED
 * uids of both connections decide, as the kernel decides who may ptrace whom.  A ring
 * registered while a capture it may see runs is switched on at once, so the first packets
 * of a process that starts during a capture are kept until the capture asks for the ring.
 * When the capture's connection closes, every ring it switched on is switched off: no
 * process copies a packet for nobody.
 *
 * The daemon's own packets -- the connection manager's MADs on QP1 (cm_agent.c) -- go
 * into a ring of the daemon's per device, made when the first capture of the device
 * starts and handed over by CAP_NEXT like the others.  Its packets belong to the
 * connections' processes, not to the daemon's uid, so the filter is per packet, here
 * where they are written (one capture per device: its uid is known): a root capture
 * gets all of them, another the packets of connections whose rdma_cm id its uid owns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/uroced.h"
#include "ipc/cap_proto.h"

struct uroced_cap_ring {
	int fd;
	struct uroce_cap_hdr *hdr;       /* the header page, shared with the process */
	uint32_t handed;                 /* the last session it was handed to */
};

static uint32_t next_session;

/* The daemon's ring of a device (its QP1 packets); the producer's side is ours too. */
struct own_ring {
	struct own_ring *next;
	uint32_t dev_id;
	int fd;
	struct uroce_cap_hdr *hdr;       /* the whole memfd */
	uint8_t *data;
	uint32_t ring_bytes;
	uint32_t handed;
	uint64_t tail, missed, recorded;
};

static struct own_ring *own_rings;

/* The ring of a process that went away while a capture had switched it on but not yet
 * asked for it (a program shorter than the capture's 100 ms poll, as rping -C 5 is):
 * kept, with what CAP_NEXT says of it, until that capture has had it or has ended, so
 * that its packets are not lost with it. */
struct orphan {
	struct orphan *next;
	struct uroced_cap_ring *r;
	uint32_t dev_id, session;
	int32_t pid;
	uid_t uid;
	uint64_t serial;
	bool handed;                     /* sent: let go of at the next CAP_NEXT */
};

static struct orphan *orphans;

static void orphan_free(struct orphan *o)
{
	munmap(o->r->hdr, UROCE_CAP_HDR_BYTES);
	close(o->r->fd);
	free(o->r);
	free(o);
}

/* Drop the orphans for which @match holds. */
static void orphans_drop(bool (*match)(const struct orphan *, uint32_t), uint32_t arg)
{
	for (struct orphan **p = &orphans; *p;) {
		struct orphan *o = *p;

		if (match(o, arg)) {
			*p = o->next;
			orphan_free(o);
		} else {
			p = &o->next;
		}
	}
}

static bool orphan_handed(const struct orphan *o, uint32_t unused)
{
	(void)unused;
	return o->handed;
}

static bool orphan_of_session(const struct orphan *o, uint32_t session)
{
	return o->session == session;
}

static bool may_see(const struct uroce_client *capturer, const struct uroce_client *owner)
{
	return capturer->uid == 0 || capturer->uid == owner->uid;
}

/* The capture of @dev_id that is running, or NULL. */
static struct uroce_client *capture_of(struct uroced *d, uint32_t dev_id)
{
	for (size_t i = 0; i < d->nclients; i++)
		if (d->clients[i]->cap_session && d->clients[i]->cap_dev_id == dev_id)
			return d->clients[i];
	return NULL;
}

/* Start writing for @session: the capture reads what comes from now on. */
static void activate(struct uroced_cap_ring *r, uint32_t session)
{
	struct uroce_cap_hdr *h = r->hdr;

	if (__atomic_load_n(&h->active, __ATOMIC_ACQUIRE) == session)
		return;
	__atomic_store_n(&h->head, __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
	h->missed_base = __atomic_load_n(&h->missed, __ATOMIC_ACQUIRE);
	__atomic_store_n(&h->active, session, __ATOMIC_RELEASE);
}

int uroced_cap_register(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev,
			struct uroce_client_dev *cd, int fd)
{
	struct uroced_cap_ring *r;
	struct uroce_cap_hdr h;
	struct uroce_client *cap;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	void *map;

	/* A ring that can shrink would fault the capture's (and our) reads. */
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0 ||
	    st.st_size < (off_t)UROCE_CAP_HDR_BYTES ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != UROCE_CAP_MAGIC ||
	    h.version != UROCE_CAP_VERSION || h.ring_bytes < UROCE_CAP_RING_MIN ||
	    h.ring_bytes > UROCE_CAP_RING_MAX || (h.ring_bytes & (h.ring_bytes - 1)) ||
	    (uint64_t)st.st_size < UROCE_CAP_HDR_BYTES + (uint64_t)h.ring_bytes) {
		close(fd);
		return -EINVAL;
	}
	map = mmap(NULL, UROCE_CAP_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	r = calloc(1, sizeof(*r));
	if (map == MAP_FAILED || !r) {
		if (map != MAP_FAILED)
			munmap(map, UROCE_CAP_HDR_BYTES);
		free(r);
		close(fd);
		return -ENOMEM;
	}
	r->fd = fd;
	r->hdr = map;
	__atomic_store_n(&r->hdr->active, 0, __ATOMIC_RELEASE);
	uroced_cap_release(cd);  /* registering again replaces the ring */
	cd->cap = r;
	cap = capture_of(d, dev->id);
	if (cap && may_see(cap, c))
		activate(r, cap->cap_session);
	return 0;
}

static struct own_ring *own_of(uint32_t dev_id)
{
	for (struct own_ring *r = own_rings; r; r = r->next)
		if (r->dev_id == dev_id)
			return r;
	return NULL;
}

/* The daemon's ring of @dev_id, made on first use: NULL if it cannot be (the capture
 * then runs without the QP1 packets, which is logged). */
static struct own_ring *own_ensure(struct uroced *d, uint32_t dev_id)
{
	struct own_ring *r = own_of(dev_id);
	size_t size = UROCE_CAP_HDR_BYTES + (size_t)UROCE_CAP_RING_MIN;
	void *map;

	(void)d;
	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	/* QP1 carries one 256-byte MAD per packet: the smallest ring holds ~200 of them. */
	r->fd = memfd_create("uroced-capture", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (r->fd < 0 || ftruncate(r->fd, (off_t)size) < 0 ||
	    fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
	    (map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0)) == MAP_FAILED) {
		uroced_log("capture: no ring for the daemon's QP1 packets: %s\n", strerror(errno));
		if (r->fd >= 0)
			close(r->fd);
		free(r);
		return NULL;
	}
	r->hdr = map;
	r->data = (uint8_t *)map + UROCE_CAP_HDR_BYTES;
	r->ring_bytes = UROCE_CAP_RING_MIN;
	r->dev_id = dev_id;
	r->hdr->magic = UROCE_CAP_MAGIC;
	r->hdr->version = UROCE_CAP_VERSION;
	r->hdr->size = size;
	r->hdr->ring_bytes = r->ring_bytes;
	r->hdr->pid = (int32_t)getpid();
	r->next = own_rings;
	own_rings = r;
	return r;
}

void uroced_cap_qp1(struct uroced *d, uint32_t dev_id, int64_t uid, const struct uroce_cap_rec *rec,
		    const uint8_t *pkt)
{
	struct own_ring *r = own_of(dev_id);
	struct uroce_client *cap;
	uint32_t active, need, at, skip, rb;
	uint64_t head;

	if (!r || !(active = __atomic_load_n(&r->hdr->active, __ATOMIC_ACQUIRE)))
		return;
	cap = capture_of(d, dev_id);
	/* Root sees everything; anyone else the packets of its own connections only. */
	if (!cap || cap->cap_session != active || (cap->uid != 0 && (uid < 0 || (uid_t)uid != cap->uid)))
		return;
	if (rec->len > UROCE_CAP_PKT_MAX)
		return;
	rb = r->ring_bytes;
	need = uroce_cap_rec_size(rec->len);
	head = __atomic_load_n(&r->hdr->head, __ATOMIC_ACQUIRE);
	at = (uint32_t)(r->tail & (rb - 1));
	skip = rb - at < need ? rb - at : 0;
	/* The same rules as the engine's producer (transport/capture.c): a head that makes
	 * no sense counts as a full ring; a record never wraps. */
	if (head > r->tail || r->tail - head > rb || r->tail - head + skip + need > rb) {
		__atomic_store_n(&r->hdr->missed, ++r->missed, __ATOMIC_RELAXED);
		return;
	}
	if (skip) {
		uint32_t wrap = UROCE_CAP_REC_WRAP;

		memcpy(r->data + at, &wrap, sizeof(wrap));
		r->tail += skip;
		at = 0;
	}
	memcpy(r->data + at, rec, sizeof(*rec));
	memcpy(r->data + at + sizeof(*rec), pkt, rec->len);
	r->tail += need;
	__atomic_store_n(&r->hdr->recorded, ++r->recorded, __ATOMIC_RELAXED);
	__atomic_store_n(&r->hdr->tail, r->tail, __ATOMIC_RELEASE);
}

int uroced_cap_start(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev,
		     struct uroce_ipc_resp *resp)
{
	if (c->cap_session || capture_of(d, dev->id))
		return -EBUSY;
	if (d->cm)
		(void)own_ensure(d, dev->id);
	if (++next_session == 0)
		next_session = 1;
	c->cap_session = next_session;
	c->cap_dev_id = dev->id;
	resp->u.cap.session = c->cap_session;
	return 0;
}

int uroced_cap_next(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev,
		    struct uroce_ipc_resp *resp, int *fd)
{
	if (!c->cap_session || c->cap_dev_id != dev->id)
		return -EINVAL;
	/* The reply that carried a handed orphan's descriptor has gone out (the kernel
	 * holds its copy): ours can go. */
	orphans_drop(orphan_handed, 0);
	for (struct orphan *o = orphans; o; o = o->next) {
		if (o->session != c->cap_session || o->dev_id != dev->id)
			continue;
		o->handed = true;
		resp->u.cap.session = c->cap_session;
		resp->u.cap.pid = o->pid;
		resp->u.cap.uid = o->uid;
		resp->u.cap.serial = o->serial;
		fd[0] = o->r->fd;
		return 0;
	}
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client *o = d->clients[i];

		if (!may_see(c, o))
			continue;
		for (size_t k = 0; k < o->ndevs; k++) {
			struct uroced_cap_ring *r = o->devs[k].cap;

			if (o->devs[k].dev_id != dev->id || !r || r->handed == c->cap_session)
				continue;
			r->handed = c->cap_session;
			activate(r, c->cap_session);
			resp->u.cap.session = c->cap_session;
			resp->u.cap.pid = o->pid;
			resp->u.cap.uid = o->uid;
			resp->u.cap.serial = o->serial;
			fd[0] = r->fd;
			return 0;
		}
	}
	{
		struct own_ring *r = own_of(dev->id);

		/* The daemon's own, last (the filter is per packet: uroced_cap_qp1). */
		if (r && r->handed != c->cap_session) {
			struct uroced_cap_ring tmp = { .fd = r->fd, .hdr = r->hdr };

			r->handed = c->cap_session;
			activate(&tmp, c->cap_session);
			resp->u.cap.session = c->cap_session;
			resp->u.cap.pid = (int32_t)getpid();
			resp->u.cap.uid = d->uid;
			resp->u.cap.serial = 0;
			fd[0] = r->fd;
			return 0;
		}
	}
	return -ENOENT;
}

void uroced_cap_release(struct uroce_client_dev *cd)
{
	struct uroced_cap_ring *r = cd->cap;

	if (!r)
		return;
	/* The capture drains what is left, then lets go of its mapping. */
	__atomic_store_n(&r->hdr->active, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&r->hdr->gone, 1, __ATOMIC_RELEASE);
	munmap(r->hdr, UROCE_CAP_HDR_BYTES);
	close(r->fd);
	free(r);
	cd->cap = NULL;
}

void uroced_cap_release_gone(struct uroced *d, struct uroce_client *c, struct uroce_client_dev *cd)
{
	struct uroced_cap_ring *r = cd->cap;
	struct uroce_client *cap;
	struct orphan *o;
	uint32_t s;

	if (!r)
		return;
	s = __atomic_load_n(&r->hdr->active, __ATOMIC_ACQUIRE);
	cap = capture_of(d, cd->dev_id);
	if (!s || !cap || cap->cap_session != s || r->handed == s || !(o = calloc(1, sizeof(*o)))) {
		uroced_cap_release(cd);
		return;
	}
	/* Its capture has not had it yet: keep it for that capture (gone, so it is read to
	 * its end and let go of). */
	__atomic_store_n(&r->hdr->active, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&r->hdr->gone, 1, __ATOMIC_RELEASE);
	o->r = r;
	o->dev_id = cd->dev_id;
	o->session = s;
	o->pid = c->pid;
	o->uid = c->uid;
	o->serial = c->serial;
	o->next = orphans;
	orphans = o;
	cd->cap = NULL;
}

void uroced_cap_client_gone(struct uroced *d, struct uroce_client *c)
{
	uint32_t s = c->cap_session;

	if (!s)
		return;
	c->cap_session = 0;
	orphans_drop(orphan_of_session, s);
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client *o = d->clients[i];

		for (size_t k = 0; k < o->ndevs; k++) {
			struct uroced_cap_ring *r = o->devs[k].cap;

			if (r && __atomic_load_n(&r->hdr->active, __ATOMIC_ACQUIRE) == s)
				__atomic_store_n(&r->hdr->active, 0, __ATOMIC_RELEASE);
		}
	}
	for (struct own_ring *r = own_rings; r; r = r->next)
		if (__atomic_load_n(&r->hdr->active, __ATOMIC_ACQUIRE) == s)
			__atomic_store_n(&r->hdr->active, 0, __ATOMIC_RELEASE);
}

void uroced_cap_fini(void)
{
	while (orphans) {
		struct orphan *o = orphans;

		orphans = o->next;
		orphan_free(o);
	}
	while (own_rings) {
		struct own_ring *r = own_rings;

		own_rings = r->next;
		munmap(r->hdr, UROCE_CAP_HDR_BYTES + (size_t)r->ring_bytes);
		close(r->fd);
		free(r);
	}
}
