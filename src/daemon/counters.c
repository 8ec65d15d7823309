/* counters.c — the daemon's side of the shared-memory counters blocks (ipc.h,
 * proto.h): clients register a sealed memfd, the daemon maps it read-only and
 * reads it only when `uroce stat` asks.
 *
 * The block belongs to an untrusted process, so: the layout is read once, at
 * registration, checked against the file size and kept; later reads use only that
 * layout, and the memfd must be sealed against shrinking (F_SEAL_SHRINK), so a
 * read can never fault.  Names are copied with a bound and terminated here.
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

#define CNT_MAX_BYTES (64u << 20)

void uroced_cnt_unmap(struct uroce_cnt_map *m)
{
	if (m->map)
		munmap((void *)m->map, m->size);
	memset(m, 0, sizeof(*m));
}

int uroced_cnt_register(struct uroce_cnt_map *m, int fd)
{
	struct uroce_cnt_hdr h;
	struct stat st;
	int seals, err = -EINVAL;
	void *map;

	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0 ||
	    st.st_size < (off_t)sizeof(h) || st.st_size > CNT_MAX_BYTES)
		goto out;
	if (pread(fd, &h, sizeof(h), 0) != sizeof(h))
		goto out;
	if (h.magic != UROCE_CNT_MAGIC || h.version != UROCE_CNT_VERSION ||
	    !uroce_cnt_size(h.n_ctx, h.n_qp, h.n_slots) ||
	    uroce_cnt_size(h.n_ctx, h.n_qp, h.n_slots) > (uint64_t)st.st_size)
		goto out;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	uroced_cnt_unmap(m);
	m->map = map;
	m->size = (size_t)st.st_size;
	m->n_ctx = h.n_ctx;
	m->n_qp = h.n_qp;
	m->n_slots = h.n_slots;
	err = 0;
out:
	close(fd);
	return err;
}

/* ---- counters of clients that went away --------------------------------------
 *
 * When a client's connection closes, the context part of each of its blocks is added,
 * name by name, to its device's retired totals, so `uroce stat show`'s per-device totals
 * keep what exited processes counted.  Kept per device id (never reused while the daemon
 * runs); the entry of a deleted device is recycled.
 */
struct retired {
	uint32_t dev_id;                 /* 0: unused (device ids start at 1) */
	uint32_t n[UROCE_CNT_BLOCKS];
	char name[UROCE_CNT_BLOCKS][UROCE_CNT_MAX][UROCE_CNT_NAME_MAX];
	uint64_t v[UROCE_CNT_BLOCKS][UROCE_CNT_MAX];
};

static struct retired *retired_tab[UROCE_MAX_DEVICES];

#define SLOT_RETIRED (UINT32_MAX - 1)   /* uroce_cnt_pos.slot of a device's retired totals */

static struct retired *retired_get(struct uroced *d, uint32_t dev_id, int create)
{
	struct retired **free_slot = NULL;

	for (unsigned i = 0; i < UROCE_MAX_DEVICES; i++) {
		struct retired *r = retired_tab[i];

		if (r && r->dev_id == dev_id)
			return r;
		if (!free_slot && (!r || !uroce_dev_find_id(&d->devs, r->dev_id)))
			free_slot = &retired_tab[i];
	}
	if (!create || !free_slot)
		return NULL;
	if (!*free_slot && !(*free_slot = malloc(sizeof(**free_slot))))
		return NULL;  /* the totals lose this client; nothing else depends on them */
	memset(*free_slot, 0, sizeof(**free_slot));
	(*free_slot)->dev_id = dev_id;
	return *free_slot;
}

void uroced_cnt_retire(struct uroced *d, uint32_t dev_id, uint32_t block,
		       const struct uroce_cnt_map *m)
{
	const uint8_t *names;
	const uint64_t *vals;
	struct retired *r;

	if (!m->map || block >= UROCE_CNT_BLOCKS || !(r = retired_get(d, dev_id, 1)))
		return;
	names = m->map + sizeof(struct uroce_cnt_hdr);
	vals = (const uint64_t *)(m->map + uroce_cnt_ctx_off(m->n_ctx, m->n_qp));
	for (uint32_t i = 0; i < m->n_ctx; i++) {
		char name[UROCE_CNT_NAME_MAX];
		uint32_t j;

		memcpy(name, names + (size_t)i * UROCE_CNT_NAME_MAX, sizeof(name) - 1);
		name[sizeof(name) - 1] = 0;
		for (j = 0; j < r->n[block] && strcmp(r->name[block][j], name); j++)
			;
		if (j == r->n[block]) {
			if (j == UROCE_CNT_MAX)
				continue;  /* more names than a record holds: not totalled */
			memcpy(r->name[block][j], name, sizeof(name));
			r->n[block]++;
		}
		r->v[block][j] += __atomic_load_n(&vals[i], __ATOMIC_RELAXED);
	}
}

static struct uroce_client *by_serial(struct uroced *d, uint64_t serial)
{
	for (size_t i = 0; i < d->nclients; i++)
		if (d->clients[i]->serial == serial)
			return d->clients[i];
	return NULL;
}

static struct uroce_client_dev *cdev(struct uroce_client *c, uint32_t dev_id)
{
	for (size_t i = 0; i < c->ndevs; i++)
		if (c->devs[i].dev_id == dev_id)
			return &c->devs[i];
	return NULL;
}

static uint32_t slot_qpn(const struct uroce_cnt_map *m, uint32_t slot, uint32_t *type)
{
	const struct uroce_cnt_slot *s = (const void *)(m->map +
		uroce_cnt_slot_off(m->n_ctx, m->n_qp, slot));

	*type = __atomic_load_n(&s->qp_type, __ATOMIC_RELAXED);
	return __atomic_load_n(&s->qpn, __ATOMIC_ACQUIRE);
}

/* Walk every registered block: per client and device its blocks in role order, per
 * block the context's position, then each used slot. */
static int snapshot(struct uroced *d, struct uroce_client *asker)
{
	size_t n = 0, cap = 0;
	struct uroce_cnt_pos *pos = NULL;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < d->nclients; i++) {
			struct uroce_client *c = d->clients[i];

			for (size_t j = 0; j < c->ndevs; j++) {
				for (uint32_t b = 0; b < UROCE_CNT_BLOCKS; b++) {
					const struct uroce_cnt_map *m = &c->devs[j].cnt[b];
					uint32_t type;

					if (!m->map)
						continue;
					for (uint32_t s = 0; s <= m->n_slots; s++) {
						uint32_t slot = s == 0 ? UINT32_MAX : s - 1;

						if (slot != UINT32_MAX && !slot_qpn(m, slot, &type))
							continue;
						if (pass == 1 && n < cap)
							pos[n] = (struct uroce_cnt_pos){ c->serial,
								c->devs[j].dev_id, b, slot };
						n++;
					}
				}
			}
		}
		for (unsigned i = 0; i < UROCE_MAX_DEVICES; i++) {
			const struct retired *r = retired_tab[i];

			if (!r || !r->dev_id || !uroce_dev_find_id(&d->devs, r->dev_id))
				continue;
			for (uint32_t b = 0; b < UROCE_CNT_BLOCKS; b++) {
				if (!r->n[b])
					continue;
				if (pass == 1 && n < cap)
					pos[n] = (struct uroce_cnt_pos){ 0, r->dev_id, b, SLOT_RETIRED };
				n++;
			}
		}
		if (pass == 0) {
			cap = n;
			n = 0;
			pos = calloc(cap ? cap : 1, sizeof(*pos));
			if (!pos)
				return -ENOMEM;
		}
	}
	free(asker->cnt_walk);
	asker->cnt_walk = pos;
	asker->cnt_walk_n = n < cap ? n : cap;
	return 0;
}

static void copy_names(struct uroce_cnt_record *r, const uint8_t *names, const uint64_t *vals,
		       uint32_t n)
{
	if (n > UROCE_CNT_MAX)
		n = UROCE_CNT_MAX;
	for (uint32_t i = 0; i < n; i++) {
		memcpy(r->c[i].name, names + (size_t)i * UROCE_CNT_NAME_MAX, UROCE_CNT_NAME_MAX - 1);
		r->c[i].name[UROCE_CNT_NAME_MAX - 1] = 0;
		r->c[i].value = __atomic_load_n(&vals[i], __ATOMIC_RELAXED);
	}
	r->n = n;
}

int uroced_cnt_get(struct uroced *d, struct uroce_client *asker, uint32_t index,
		   struct uroce_ipc_resp *resp)
{
	struct uroce_cnt_record *r = &resp->u.cnt;
	const struct uroce_cnt_pos *p;
	struct uroce_client_dev *cd;
	const struct uroce_cnt_map *m;
	struct uroce_client *c;
	struct uroce_dev *dev;
	const uint8_t *names;
	int err;

	if (index == 0 && (err = snapshot(d, asker)))
		return err;
	resp->count = (uint32_t)asker->cnt_walk_n;
	if (index >= asker->cnt_walk_n)
		return -ENOENT;
	p = &asker->cnt_walk[index];
	if (p->slot == SLOT_RETIRED) {
		const struct retired *rt = retired_get(d, p->dev_id, 0);

		dev = uroce_dev_find_id(&d->devs, p->dev_id);
		if (!rt || !dev)
			return -ESTALE;
		memcpy(r->dev, dev->info.name, sizeof(r->dev));
		r->block = p->block;
		r->n = rt->n[p->block];
		for (uint32_t i = 0; i < r->n; i++) {
			memcpy(r->c[i].name, rt->name[p->block][i], UROCE_CNT_NAME_MAX);
			r->c[i].value = rt->v[p->block][i];
		}
		return 0;  /* pid 0, qpn 0: the totals of the device's departed clients */
	}
	c = by_serial(d, p->serial);
	cd = c ? cdev(c, p->dev_id) : NULL;
	dev = uroce_dev_find_id(&d->devs, p->dev_id);
	m = cd ? &cd->cnt[p->block] : NULL;
	if (!m || !m->map || !dev || (p->slot != UINT32_MAX && p->slot >= m->n_slots))
		return -ESTALE;  /* gone (or replaced) since the snapshot: the reader starts over */
	memcpy(r->dev, dev->info.name, sizeof(r->dev));
	r->pid = c->pid;
	r->block = p->block;
	names = m->map + sizeof(struct uroce_cnt_hdr);
	if (p->slot == UINT32_MAX) {
		copy_names(r, names, (const uint64_t *)(m->map + uroce_cnt_ctx_off(m->n_ctx, m->n_qp)),
			   m->n_ctx);
		return 0;
	}
	r->qpn = slot_qpn(m, p->slot, &r->qp_type);
	if (!r->qpn)
		return -ESTALE;  /* the QP went away since the snapshot */
	copy_names(r, names + (size_t)m->n_ctx * UROCE_CNT_NAME_MAX,
		   (const uint64_t *)(m->map + uroce_cnt_slot_off(m->n_ctx, m->n_qp, p->slot) +
				      sizeof(struct uroce_cnt_slot)),
		   m->n_qp);
	return 0;
}
