/* qptable.h — QP number → object, in O(1) (below the verbs layer and the transports).
 *
 * The receive path finds the destination QP of every packet by its BTH DestQP (IBA 9.2,
 * 24 bits).  A list walk made that cost grow with the number of QPs of the context (issue
 * #16: 1,000 and 10,000 QPs per process); this is an open-addressing hash table with
 * linear probing, grown before it is half full, and deletion by backward shift (no
 * tombstones, so a table that churns through QPs never degrades).  Lookups, inserts and
 * removals cost O(1) on average whatever the number of QPs.
 *
 * Locking: none here.  The verbs layer inserts and removes under ctx->lock and the
 * transports look up under the same lock (engine.c), as the list it replaces was.
 */
#ifndef UROCE_CORE_QPTABLE_H
#define UROCE_CORE_QPTABLE_H

#include <stddef.h>
#include <stdint.h>

struct uroce_qptable_slot {
	uint32_t qpn;                         /* meaningful only when obj is not NULL */
	void *obj;
};

struct uroce_qptable {
	struct uroce_qptable_slot *slots;     /* cap entries, a power of two; NULL when empty */
	uint32_t cap, count;
};

void uroce_qptable_init(struct uroce_qptable *t);
void uroce_qptable_fini(struct uroce_qptable *t);
/* Map @qpn to @obj (not NULL).  0, -EEXIST (already mapped), -EINVAL, -ENOMEM. */
int uroce_qptable_insert(struct uroce_qptable *t, uint32_t qpn, void *obj);
/* Unmap @qpn; returns the object it mapped to, or NULL. */
void *uroce_qptable_remove(struct uroce_qptable *t, uint32_t qpn);
/* The object @qpn maps to, or NULL. */
void *uroce_qptable_lookup(const struct uroce_qptable *t, uint32_t qpn);

#endif
