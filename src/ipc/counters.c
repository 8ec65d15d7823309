/* counters.c — the shared-memory counters block of a context (ipc.h, proto.h).
 *
 * A memfd sealed against shrinking and growing: the daemon maps it read-only and
 * must never fault on a read because the owner truncated it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/proto.h"

struct uroce_counters {
	int fd;
	uint8_t *map;
	size_t size;
	uint32_t n_ctx, n_qp, n_slots;
	pthread_mutex_t slot_lock;       /* uroce_counters_slot_take: one taker at a time */
};

static int put_names(char *dst, const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (!names[i] || !*names[i] || strlen(names[i]) >= UROCE_CNT_NAME_MAX)
			return -EINVAL;
		strcpy(dst + (size_t)i * UROCE_CNT_NAME_MAX, names[i]);
	}
	return 0;
}

int uroce_counters_create(const char *const *ctx_names, unsigned n_ctx,
			  const char *const *qp_names, unsigned n_qp, unsigned n_slots,
			  struct uroce_counters **out)
{
	struct uroce_counters *c;
	struct uroce_cnt_hdr *h;
	uint64_t size;
	int err;

	if (!out || (n_ctx && !ctx_names) || (n_qp && !qp_names) || (!n_ctx && !n_qp))
		return -EINVAL;
	size = uroce_cnt_size(n_ctx, n_qp, n_slots);
	if (!size)
		return -E2BIG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->slot_lock, NULL);
	c->fd = memfd_create("uroce-counters", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->fd < 0) {
		err = -errno;
		goto fail_free;
	}
	if (ftruncate(c->fd, (off_t)size) < 0 ||
	    fcntl(c->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto fail_close;
	}
	c->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->map == MAP_FAILED) {
		err = -errno;
		goto fail_close;
	}
	c->size = size;
	c->n_ctx = n_ctx;
	c->n_qp = n_qp;
	c->n_slots = n_slots;
	err = put_names((char *)c->map + sizeof(*h), ctx_names, n_ctx);
	if (!err)
		err = put_names((char *)c->map + sizeof(*h) + (size_t)n_ctx * UROCE_CNT_NAME_MAX,
				qp_names, n_qp);
	if (err)
		goto fail_unmap;
	h = (struct uroce_cnt_hdr *)c->map;
	h->version = UROCE_CNT_VERSION;
	h->n_ctx = n_ctx;
	h->n_qp = n_qp;
	h->n_slots = n_slots;
	h->size = size;
	__atomic_store_n(&h->magic, UROCE_CNT_MAGIC, __ATOMIC_RELEASE);
	*out = c;
	return 0;

fail_unmap:
	munmap(c->map, size);
fail_close:
	close(c->fd);
fail_free:
	pthread_mutex_destroy(&c->slot_lock);
	free(c);
	return err;
}

void uroce_counters_destroy(struct uroce_counters *c)
{
	if (!c)
		return;
	munmap(c->map, c->size);
	close(c->fd);
	pthread_mutex_destroy(&c->slot_lock);
	free(c);
}

uint64_t *uroce_counters_ctx(struct uroce_counters *c)
{
	return (uint64_t *)(c->map + uroce_cnt_ctx_off(c->n_ctx, c->n_qp));
}

static struct uroce_cnt_slot *slot_hdr(struct uroce_counters *c, unsigned slot)
{
	return (struct uroce_cnt_slot *)(c->map + uroce_cnt_slot_off(c->n_ctx, c->n_qp, slot));
}

uint64_t *uroce_counters_qp(struct uroce_counters *c, unsigned slot)
{
	if (slot >= c->n_slots)
		return NULL;
	return (uint64_t *)(slot_hdr(c, slot) + 1);
}

void uroce_counters_slot(struct uroce_counters *c, unsigned slot, uint32_t qpn, uint32_t qp_type)
{
	struct uroce_cnt_slot *s;

	if (slot >= c->n_slots)
		return;
	s = slot_hdr(c, slot);
	if (qpn) {
		uint64_t *v = (uint64_t *)(s + 1);

		for (unsigned i = 0; i < c->n_qp; i++)
			__atomic_store_n(&v[i], 0, __ATOMIC_RELAXED);
		s->qp_type = qp_type;
	}
	/* The QPN last: a reader that sees it sees the zeroed counters. */
	__atomic_store_n(&s->qpn, qpn, __ATOMIC_RELEASE);
}

int uroce_counters_fd(const struct uroce_counters *c)
{
	return c->fd;
}

/* The probe starts at qpn % n_slots: QPNs of one client are consecutive, so the first
 * probe is usually free.  The writer keeps the index it got (rc_qp.c): no lookup by QPN. */
int uroce_counters_slot_take(struct uroce_counters *c, uint32_t qpn, uint32_t qp_type)
{
	int ret = -ENOSPC;

	if (!qpn)
		return -EINVAL;
	pthread_mutex_lock(&c->slot_lock);
	for (uint32_t i = 0, s = qpn % (c->n_slots ? c->n_slots : 1); i < c->n_slots;
	     i++, s = (s + 1) % c->n_slots) {
		if (!__atomic_load_n(&slot_hdr(c, s)->qpn, __ATOMIC_RELAXED)) {
			uroce_counters_slot(c, s, qpn, qp_type);
			ret = (int)s;
			break;
		}
	}
	pthread_mutex_unlock(&c->slot_lock);
	return ret;
}
