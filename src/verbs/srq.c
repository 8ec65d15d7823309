/* srq.c — shared receive queues (IBA 10.2.9).
 *
 * The SRQ is a receive ring shared by the QPs attached to it.  srq_limit arms a
 * one-shot IBV_EVENT_SRQ_LIMIT_REACHED (IBA 10.2.9.5, 11.6.3.4): the transport
 * raises it when the number of posted WQEs drops below the limit; modify with
 * IBV_SRQ_LIMIT re-arms it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs.h"

int uroce_srq_create(struct uroce_pd *pd, struct ibv_srq_init_attr *attr, struct uroce_srq **out)
{
	struct uroce_context *ctx = uroce_ctx_from_ib(pd->pd.context);
	struct uroce_srq *srq;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	if (!attr->attr.max_wr || attr->attr.max_wr > uroce_limits()->max_srq_wr ||
	    attr->attr.max_sge > UROCE_MAX_SRQ_SGE)
		return -EINVAL;
	/* IBA 10.2.9.5: the limit must not exceed the queue's capacity. */
	if (attr->attr.srq_limit > attr->attr.max_wr)
		return -EINVAL;
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_SRQ);
	if (ret)
		return ret;
	srq = calloc(1, sizeof(*srq));
	ret = srq ? uroce_wq_init(&srq->rq, attr->attr.max_wr, attr->attr.max_sge ? attr->attr.max_sge : 1, 0)
		  : -ENOMEM;
	if (ret) {
		free(srq);
		uroce_obj_put(ctx->dev, UROCE_OBJ_SRQ);
		return ret;
	}
	srq->uctx = ctx;
	srq->srq_limit = attr->attr.srq_limit;
	srq->srq.context = pd->pd.context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = &pd->pd;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	attr->attr.max_wr = srq->rq.max_wr;
	attr->attr.max_sge = srq->rq.max_sge;
	atomic_fetch_add(&pd->usecnt, 1);
	*out = srq;
	return 0;
}

int uroce_srq_modify(struct uroce_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	int ret = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return -EINVAL;
	pthread_mutex_lock(&srq->rq.lock);
	if (mask & IBV_SRQ_MAX_WR) {
		/* Resize (IBV_DEVICE_SRQ_RESIZE): keep the posted WQEs, in order. */
		struct uroce_wq nwq;
		uint32_t count = uroce_wq_count(&srq->rq);
		uint32_t limit = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit : srq->srq_limit;

		if (!attr->max_wr || attr->max_wr > uroce_limits()->max_srq_wr || attr->max_wr < count ||
		    limit > attr->max_wr) {
			ret = -EINVAL;
			goto out;
		}
		ret = uroce_wq_init(&nwq, attr->max_wr, srq->rq.max_sge, 0);
		if (ret)
			goto out;
		for (uint32_t i = 0; i < count; i++)
			memcpy(uroce_wq_slot(&nwq, i), uroce_wq_slot(&srq->rq, srq->rq.head + i),
			       srq->rq.stride);
		nwq.tail = count;
		free(srq->rq.buf);
		srq->rq.buf = nwq.buf;
		srq->rq.size = nwq.size;
		srq->rq.max_wr = nwq.max_wr;
		srq->rq.head = 0;
		srq->rq.tail = count;
		pthread_mutex_destroy(&nwq.lock);
		attr->max_wr = srq->rq.max_wr;
	}
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->rq.max_wr) {
			ret = -EINVAL;
			goto out;
		}
		srq->srq_limit = attr->srq_limit;
	}
out:
	pthread_mutex_unlock(&srq->rq.lock);
	return ret;
}

int uroce_srq_query(struct uroce_srq *srq, struct ibv_srq_attr *attr)
{
	pthread_mutex_lock(&srq->rq.lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->srq_limit;
	pthread_mutex_unlock(&srq->rq.lock);
	return 0;
}

int uroce_srq_destroy(struct uroce_srq *srq)
{
	if (atomic_load(&srq->usecnt))
		return -EBUSY;
	uroce_async_event_drain(srq->uctx, &srq->srq, &srq->events_delivered,
				&srq->srq.mutex, &srq->srq.cond, &srq->srq.events_completed);
	atomic_fetch_sub(&uroce_pd_from_ib(srq->srq.pd)->usecnt, 1);
	uroce_wq_fini(&srq->rq);
	uroce_obj_put(srq->uctx->dev, UROCE_OBJ_SRQ);
	pthread_cond_destroy(&srq->srq.cond);
	pthread_mutex_destroy(&srq->srq.mutex);
	free(srq);
	return 0;
}

int uroce_srq_post_recv(struct uroce_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int ret;

	pthread_mutex_lock(&srq->rq.lock);
	ret = uroce_wq_post_recv(&srq->rq, wr, bad);
	pthread_mutex_unlock(&srq->rq.lock);
	return ret;
}

int uroce_srq_pop(struct uroce_srq *srq, struct uroce_wqe *out)
{
	return uroce_wq_pop_srq(&srq->rq, &srq->srq_limit, out, srq->uctx, &srq->srq);
}
