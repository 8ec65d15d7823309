/* wq.c — rings of work queue elements (queue.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/queue.h"
#include "core/upcall.h"

int uroce_wq_init(struct uroce_wq *wq, uint32_t max_wr, uint32_t max_sge, uint32_t max_inline)
{
	uint32_t size = 1;

	memset(wq, 0, sizeof(*wq));
	while (size < max_wr)
		size <<= 1;
	wq->size = size;
	wq->max_wr = size;           /* rounded up: the caller reports it back */
	wq->max_sge = max_sge;
	wq->max_inline = max_inline;
	wq->stride = sizeof(struct uroce_wqe) + (size_t)max_sge * sizeof(struct ibv_sge) + max_inline;
	wq->stride = (wq->stride + 15) & ~(size_t)15;
	wq->buf = calloc(size, wq->stride);
	if (!wq->buf)
		return -ENOMEM;
	pthread_mutex_init(&wq->lock, NULL);
	return 0;
}

void uroce_wq_fini(struct uroce_wq *wq)
{
	if (!wq->buf)
		return;
	pthread_mutex_destroy(&wq->lock);
	free(wq->buf);
	wq->buf = NULL;
}

int uroce_wq_post_recv(struct uroce_wq *wq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		struct uroce_wqe *w;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			*bad = wr;
			return -EINVAL;
		}
		if (uroce_wq_count(wq) >= wq->max_wr) {
			*bad = wr;
			return -ENOMEM;
		}
		w = uroce_wq_slot(wq, wq->tail);
		memset(w, 0, sizeof(*w));
		w->wr_id = wr->wr_id;
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		wq->tail++;
	}
	return 0;
}

int uroce_wq_pop(struct uroce_wq *wq, struct uroce_wqe *out)
{
	const struct uroce_wqe *w;

	if (wq->head == wq->tail)
		return -ENOENT;
	w = uroce_wq_slot(wq, wq->head);
	memcpy(out, w, sizeof(*w) + (size_t)w->num_sge * sizeof(struct ibv_sge));
	wq->head++;
	return 0;
}

int uroce_wq_pop_srq(struct uroce_wq *wq, uint32_t *srq_limit, struct uroce_wqe *out,
		     struct uroce_context *ctx, struct ibv_srq *srq)
{
	bool fire = false;
	int ret;

	pthread_mutex_lock(&wq->lock);
	ret = uroce_wq_pop(wq, out);
	if (!ret && *srq_limit && uroce_wq_count(wq) < *srq_limit) {
		*srq_limit = 0;     /* one shot: modify_srq(IBV_SRQ_LIMIT) re-arms */
		fire = true;
	}
	pthread_mutex_unlock(&wq->lock);
	if (fire)
		uroce_up_async_event(ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq, 0);
	return ret;
}
