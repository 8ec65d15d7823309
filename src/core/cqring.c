/* cqring.c — the ring of a completion queue (cqring.h). */
#include <errno.h>
#include <stdlib.h>

#include "core/cqring.h"

static uint32_t ring_size_for(uint32_t cqe)
{
	uint32_t s = 1;

	while (s < cqe)
		s <<= 1;
	return s;
}

int uroce_cqring_init(struct uroce_cqring *r, uint32_t cqe, const struct uroce_cqring_hooks *hooks)
{
	r->size = ring_size_for(cqe);
	r->ring = calloc(r->size, sizeof(*r->ring));
	if (!r->ring)
		return -ENOMEM;
	r->capacity = r->size;
	r->head = r->tail = 0;
	r->arm = UROCE_CQ_DISARMED;
	r->overflowed = false;
	r->hooks = hooks;
	pthread_mutex_init(&r->lock, NULL);
	return 0;
}

void uroce_cqring_fini(struct uroce_cqring *r)
{
	if (!r->ring)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r->ring);
	r->ring = NULL;
}

int uroce_cqring_push(struct uroce_cqring *r, const struct ibv_wc *wc, bool solicited)
{
	bool error = false;

	pthread_mutex_lock(&r->lock);
	if (r->tail - r->head >= r->capacity) {
		/* IBA 11.4.2 (completion queue operations): overrun is a CQ error, reported as an
		 * affiliated asynchronous event. */
		if (!r->overflowed) {
			r->overflowed = true;
			error = true;
		}
		pthread_mutex_unlock(&r->lock);
		if (error && r->hooks && r->hooks->overrun)
			r->hooks->overrun(r);
		return -ENOSPC;
	}
	r->ring[r->tail & (r->size - 1)] = *wc;
	__atomic_store_n(&r->tail, r->tail + 1, __ATOMIC_RELEASE);   /* uroce_cqring_empty */
	if (r->arm == UROCE_CQ_ARM_NEXT ||
	    (r->arm == UROCE_CQ_ARM_SOLICITED && (solicited || wc->status != IBV_WC_SUCCESS))) {
		r->arm = UROCE_CQ_DISARMED;
		if (r->hooks && r->hooks->notify)
			r->hooks->notify(r);
	}
	pthread_mutex_unlock(&r->lock);
	return 0;
}

int uroce_cqring_take_locked(struct uroce_cqring *r, struct ibv_wc *wc)
{
	if (r->head == r->tail)
		return -ENOENT;
	*wc = r->ring[r->head & (r->size - 1)];
	__atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELAXED);
	return 0;
}

int uroce_cqring_poll(struct uroce_cqring *r, int n, struct ibv_wc *wc)
{
	int got = 0;

	/* Empty, seen without the lock: a busy poller looks many times per completion; a
	 * stale view only makes this call miss a completion the next one returns. */
	if (n <= 0 || uroce_cqring_empty(r))
		return 0;
	pthread_mutex_lock(&r->lock);
	while (got < n && !uroce_cqring_take_locked(r, &wc[got]))
		got++;
	pthread_mutex_unlock(&r->lock);
	return got;
}

void uroce_cqring_arm(struct uroce_cqring *r, bool solicited_only)
{
	pthread_mutex_lock(&r->lock);
	/* A stronger arm is never weakened: NEXT covers SOLICITED. */
	if (!solicited_only)
		r->arm = UROCE_CQ_ARM_NEXT;
	else if (r->arm == UROCE_CQ_DISARMED)
		r->arm = UROCE_CQ_ARM_SOLICITED;
	pthread_mutex_unlock(&r->lock);
}

void uroce_cqring_clean(struct uroce_cqring *r, uint32_t qpn)
{
	uint32_t keep;

	pthread_mutex_lock(&r->lock);
	/* Slide the other QPs' entries up over the removed ones, keeping their order; the
	 * ring's head stays, its tail moves back. */
	keep = r->head;
	for (uint32_t i = r->head; i != r->tail; i++) {
		const struct ibv_wc *wc = &r->ring[i & (r->size - 1)];

		if (wc->qp_num == qpn)
			continue;
		if (keep != i)
			r->ring[keep & (r->size - 1)] = *wc;
		keep++;
	}
	__atomic_store_n(&r->tail, keep, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&r->lock);
}

int uroce_cqring_resize(struct uroce_cqring *r, uint32_t cqe)
{
	struct ibv_wc *ring;
	uint32_t size = ring_size_for(cqe), count;

	ring = calloc(size, sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	pthread_mutex_lock(&r->lock);
	count = r->tail - r->head;
	if (count > cqe) {
		pthread_mutex_unlock(&r->lock);
		free(ring);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < count; i++)
		ring[i] = r->ring[(r->head + i) & (r->size - 1)];
	free(r->ring);
	r->ring = ring;
	r->size = size;
	r->capacity = size;
	__atomic_store_n(&r->head, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&r->tail, count, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&r->lock);
	return 0;
}
