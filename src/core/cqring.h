/* cqring.h — the ring of a completion queue (below the verbs layer and the transports).
 *
 * The transports produce completions into it (uroce_cqring_push), the verbs layer consumes
 * them (ibv_poll_cq, the ibv_cq_ex API) and arms it (ibv_req_notify_cq).  Notification
 * follows IBA 11.4.2.2: an armed ring fires once, for the next completion or for the next
 * solicited (or error) one.  What firing and overrunning mean above the ring (an event on
 * a completion channel, IBV_EVENT_CQ_ERR) is the verbs layer's business: it installs the
 * hooks when it creates the CQ, so this file never calls upward.
 *
 * Locking: r->lock protects everything; cq->lock of the verbs layer is this lock.  tail is
 * published with a release store after its entry is written, so an empty ring may be seen
 * without the lock (uroce_cqring_empty).
 */
#ifndef UROCE_CORE_CQRING_H
#define UROCE_CORE_CQRING_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

enum uroce_cq_arm { UROCE_CQ_DISARMED = 0, UROCE_CQ_ARM_NEXT, UROCE_CQ_ARM_SOLICITED };

struct uroce_cqring;

struct uroce_cqring_hooks {
	/* The arm fired: queue the CQ's event.  Called with r->lock held. */
	void (*notify)(struct uroce_cqring *r);
	/* The ring overran for the first time: the CQ is in error (IBA 11.4.2; an affiliated
	 * async event).  Called without the lock. */
	void (*overrun)(struct uroce_cqring *r);
};

struct uroce_cqring {
	pthread_mutex_t lock;
	struct ibv_wc *ring;                  /* `size` entries, a power of two */
	uint32_t size;
	uint32_t capacity;                    /* completions it holds before overrun (<= size) */
	uint32_t head, tail;                  /* free-running: count = tail - head */
	enum uroce_cq_arm arm;
	bool overflowed;
	const struct uroce_cqring_hooks *hooks;   /* NULL: fire and overrun are silent */
};

/* A ring for at least @cqe completions (capacity = size, a power of two).  0 / -ENOMEM. */
int uroce_cqring_init(struct uroce_cqring *r, uint32_t cqe, const struct uroce_cqring_hooks *hooks);
void uroce_cqring_fini(struct uroce_cqring *r);
/* Add a completion (the transports' call).  @solicited is the message's solicited-event bit.
 * -ENOSPC when the ring is full: the CQ is then in error (hooks->overrun, once). */
int uroce_cqring_push(struct uroce_cqring *r, const struct ibv_wc *wc, bool solicited);
/* Take up to @n completions.  Returns the number taken. */
int uroce_cqring_poll(struct uroce_cqring *r, int n, struct ibv_wc *wc);
/* Take the oldest completion into *wc with r->lock held by the caller: 0 or -ENOENT. */
int uroce_cqring_take_locked(struct uroce_cqring *r, struct ibv_wc *wc);
/* Arm for the next completion (or the next solicited one); a stronger arm is kept. */
void uroce_cqring_arm(struct uroce_cqring *r, bool solicited_only);
/* Remove QP @qpn's completions, keeping the others in order. */
void uroce_cqring_clean(struct uroce_cqring *r, uint32_t qpn);
/* Grow or shrink to hold at least @cqe; -EINVAL when more are queued, -ENOMEM.  On
 * success the new capacity is r->capacity. */
int uroce_cqring_resize(struct uroce_cqring *r, uint32_t cqe);

static inline bool uroce_cqring_empty(const struct uroce_cqring *r)
{
	return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) == __atomic_load_n(&r->head, __ATOMIC_RELAXED);
}

#endif
