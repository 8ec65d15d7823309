/* qptable.c — QP number → object (qptable.h). */
#include <errno.h>
#include <stdlib.h>

#include "core/qptable.h"

#define QPT_MIN_CAP 64u
/* The largest table: twice the QPN space (24 bits), so it is never more than half full. */
#define QPT_MAX_CAP (1u << 25)

/* Fibonacci hashing: QPNs of one process come in runs (the daemon hands out blocks of 64
 * consecutive numbers), and the multiply spreads a run over the whole table. */
static inline uint32_t qpt_home(const struct uroce_qptable *t, uint32_t qpn)
{
	return (uint32_t)(qpn * 0x9E3779B1u) & (t->cap - 1);
}

void uroce_qptable_init(struct uroce_qptable *t)
{
	t->slots = NULL;
	t->cap = 0;
	t->count = 0;
}

void uroce_qptable_fini(struct uroce_qptable *t)
{
	free(t->slots);
	uroce_qptable_init(t);
}

static void qpt_place(struct uroce_qptable *t, uint32_t qpn, void *obj)
{
	uint32_t i = qpt_home(t, qpn);

	while (t->slots[i].obj)
		i = (i + 1) & (t->cap - 1);
	t->slots[i].qpn = qpn;
	t->slots[i].obj = obj;
}

static int qpt_grow(struct uroce_qptable *t)
{
	struct uroce_qptable_slot *old = t->slots;
	uint32_t oldcap = t->cap, cap = t->cap ? t->cap * 2 : QPT_MIN_CAP;

	if (cap > QPT_MAX_CAP)
		return -ENOMEM;
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->cap = cap;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].obj)
			qpt_place(t, old[i].qpn, old[i].obj);
	free(old);
	return 0;
}

int uroce_qptable_insert(struct uroce_qptable *t, uint32_t qpn, void *obj)
{
	int ret;

	if (!obj)
		return -EINVAL;
	if (uroce_qptable_lookup(t, qpn))
		return -EEXIST;
	/* Keep the load at most 1/2: probes stay short (about 1.5 on a hit, 2.5 on a miss). */
	if ((t->count + 1) * 2 > t->cap && (ret = qpt_grow(t)))
		return ret;
	qpt_place(t, qpn, obj);
	t->count++;
	return 0;
}

void *uroce_qptable_lookup(const struct uroce_qptable *t, uint32_t qpn)
{
	if (!t->count)
		return NULL;
	for (uint32_t i = qpt_home(t, qpn);; i = (i + 1) & (t->cap - 1)) {
		if (!t->slots[i].obj)
			return NULL;
		if (t->slots[i].qpn == qpn)
			return t->slots[i].obj;
	}
}

void *uroce_qptable_remove(struct uroce_qptable *t, uint32_t qpn)
{
	uint32_t i, j, mask = t->cap - 1;
	void *obj;

	if (!t->count)
		return NULL;
	for (i = qpt_home(t, qpn);; i = (i + 1) & mask) {
		if (!t->slots[i].obj)
			return NULL;
		if (t->slots[i].qpn == qpn)
			break;
	}
	obj = t->slots[i].obj;
	t->slots[i].obj = NULL;
	t->count--;
	/* Backward shift: move up every later entry of the run whose home is not in the
	 * cyclic range (i, j], so that no lookup meets the hole before its entry. */
	for (j = (i + 1) & mask; t->slots[j].obj; j = (j + 1) & mask) {
		uint32_t h = qpt_home(t, t->slots[j].qpn);
		int keep = i <= j ? (i < h && h <= j) : (i < h || h <= j);

		if (keep)
			continue;
		t->slots[i] = t->slots[j];
		t->slots[j].obj = NULL;
		i = j;
	}
	return obj;
}
