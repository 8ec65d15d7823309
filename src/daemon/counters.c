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
