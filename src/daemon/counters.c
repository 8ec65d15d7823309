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
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
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

/* Add value to r's counter name of block (a new name takes the next entry; names
 * beyond what a record holds are not totalled). */
static void retired_add(struct retired *r, uint32_t block, const char *name, uint64_t value)
{
	uint32_t j;

	for (j = 0; j < r->n[block] && strcmp(r->name[block][j], name); j++)
		;
	if (j == r->n[block]) {
		if (j == UROCE_CNT_MAX)
			return;
		snprintf(r->name[block][j], UROCE_CNT_NAME_MAX, "%s", name);
		r->n[block]++;
	}
	r->v[block][j] += value;
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

		memcpy(name, names + (size_t)i * UROCE_CNT_NAME_MAX, sizeof(name) - 1);
		name[sizeof(name) - 1] = 0;
		retired_add(r, block, name, __atomic_load_n(&vals[i], __ATOMIC_RELAXED));
	}
}

/* ---- over an idle exit ------------------------------------------------------
 *
 * An autostarted daemon exits when idle (main.c); what it alone remembers about
 * clients that have gone — their counters' totals and the device's own counters —
 * would be lost with it.  It writes them to a text file beside the saved links:
 *   dev DEV NAME VALUE             a device counter (struct uroce_dev_stats)
 *   total DEV BLOCK NAME VALUE     departed clients' total of one block's counter
 * and the next daemon adds the file to its devices of the same name and deletes it.
 * Gauges (QPNs in use, clients, sockets) describe live clients and are not kept.
 */
static const struct {
	const char *name;
	size_t off;
} dev_counters[] = {
	{ "qpn_alloc", offsetof(struct uroce_dev_stats, qpn_alloc) },
	{ "qpn_free", offsetof(struct uroce_dev_stats, qpn_free) },
	{ "qpn_reclaimed", offsetof(struct uroce_dev_stats, qpn_reclaimed) },
	{ "qpn_alloc_fail", offsetof(struct uroce_dev_stats, qpn_alloc_fail) },
	{ "requests", offsetof(struct uroce_dev_stats, requests) },
	{ "gid_changes", offsetof(struct uroce_dev_stats, gid_changes) },
	{ "rx_default", offsetof(struct uroce_dev_stats, rx_default) },
	{ "steer_updates", offsetof(struct uroce_dev_stats, steer_updates) },
};

static uint64_t *dev_counter(struct uroce_dev *dev, unsigned i)
{
	return (uint64_t *)((char *)&dev->stats + dev_counters[i].off);
}

/* Names come from clients' blocks: write only those that read back as one word. */
static int plain_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isgraph((unsigned char)*s))
			return 0;
	return 1;
}

int uroced_cnt_save(struct uroced *d, const char *path)
{
	char tmp[4200];
	FILE *f;
	int err = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "# uroce counters of one network namespace, kept by uroced over an idle exit\n");
	for (unsigned i = 0; i < d->devs.n; i++) {
		struct uroce_dev *dev = d->devs.dev[i];
		const struct retired *r = retired_get(d, dev->id, 0);

		for (unsigned k = 0; k < sizeof(dev_counters) / sizeof(dev_counters[0]); k++)
			fprintf(f, "dev %s %s %" PRIu64 "\n", dev->info.name, dev_counters[k].name,
				*dev_counter(dev, k));
		for (uint32_t b = 0; r && b < UROCE_CNT_BLOCKS; b++)
			for (uint32_t j = 0; j < r->n[b]; j++)
				if (plain_name(r->name[b][j]))
					fprintf(f, "total %s %u %s %" PRIu64 "\n", dev->info.name, b,
						r->name[b][j], r->v[b][j]);
	}
	if (fflush(f) || fsync(fileno(f)))
		err = -errno;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int uroced_cnt_load(struct uroced *d, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int lineno = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char dname[UROCE_DEV_NAME_MAX], name[UROCE_CNT_NAME_MAX];
		struct uroce_dev *dev;
		struct retired *r;
		uint64_t v;
		unsigned b, k;

		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		/* Field widths keep sscanf inside the buffers. */
		if (sscanf(line, "dev %63s %31s %" SCNu64, dname, name, &v) == 3) {
			dev = uroce_dev_find(&d->devs, dname);
			for (k = 0; k < sizeof(dev_counters) / sizeof(dev_counters[0]); k++)
				if (dev && !strcmp(dev_counters[k].name, name))
					*dev_counter(dev, k) += v;
		} else if (sscanf(line, "total %63s %u %31s %" SCNu64, dname, &b, name, &v) == 4 &&
			   b < UROCE_CNT_BLOCKS) {
			dev = uroce_dev_find(&d->devs, dname);
			if (dev && (r = retired_get(d, dev->id, 1)))
				retired_add(r, b, name, v);
		} else {
			uroced_log("%s:%d: not understood, skipped\n", path, lineno);
		}
	}
	fclose(f);
	/* Counted once: a later daemon must not add the same totals again. */
	return unlink(path) < 0 ? -errno : 0;
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

/* Add value to the record's counter name (a new name takes the next entry). */
static void record_add(struct uroce_cnt_record *r, const char *name, uint64_t value)
{
	uint32_t j;

	for (j = 0; j < r->n && strcmp(r->c[j].name, name); j++)
		;
	if (j == r->n) {
		if (j == UROCE_CNT_MAX)
			return;
		snprintf(r->c[j].name, UROCE_CNT_NAME_MAX, "%s", name);
		r->c[j].value = 0;
		r->n++;
	}
	r->c[j].value += value;
}

int uroced_cnt_total(struct uroced *d, const struct uroce_dev *dev, uint32_t block,
		     struct uroce_cnt_record *r)
{
	const struct retired *rt;

	if (block >= UROCE_CNT_BLOCKS)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	memcpy(r->dev, dev->info.name, sizeof(r->dev));
	r->block = block;
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client_dev *cd = cdev(d->clients[i], dev->id);
		const struct uroce_cnt_map *m = cd ? &cd->cnt[block] : NULL;
		const uint8_t *names;
		const uint64_t *vals;

		if (!m || !m->map)
			continue;
		names = m->map + sizeof(struct uroce_cnt_hdr);
		vals = (const uint64_t *)(m->map + uroce_cnt_ctx_off(m->n_ctx, m->n_qp));
		for (uint32_t k = 0; k < m->n_ctx; k++) {
			char name[UROCE_CNT_NAME_MAX];

			memcpy(name, names + (size_t)k * UROCE_CNT_NAME_MAX, sizeof(name) - 1);
			name[sizeof(name) - 1] = 0;
			record_add(r, name, __atomic_load_n(&vals[k], __ATOMIC_RELAXED));
		}
	}
	rt = retired_get(d, dev->id, 0);
	for (uint32_t j = 0; rt && j < rt->n[block]; j++)
		record_add(r, rt->name[block][j], rt->v[block][j]);
	return 0;
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
