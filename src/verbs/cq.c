/* cq.c — completion queues and completion channels.
 *
 * A CQ is a ring of struct ibv_wc (src/core/cqring.c, below the transports, which fill
 * it; this file installs what its events mean).  Notification follows IBA 11.4.2.2: a CQ is
 * armed by ibv_req_notify_cq for the next completion or for the next solicited
 * (or error) completion; the arm is one-shot.  When it fires, the CQ is queued on
 * its channel and one token byte is written to the channel's pipe, so the fd is
 * readable exactly while events are pending (poll/epoll/O_NONBLOCK work as with
 * rdma-core; abi-compat §5.8).  Destroying a CQ withdraws its undelivered event,
 * then waits for the application to ack the delivered ones, as the kernel does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verbs/verbs.h"

/* ---------------------------------------------------------- comp channel */

int uroce_comp_channel_create(struct uroce_context *ctx, struct uroce_comp_channel **out)
{
	struct uroce_comp_channel *ch;
	int fds[2], ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	if (pipe2(fds, O_CLOEXEC)) {
		ret = -errno;
		free(ch);
		return ret;
	}
	/* The library side never blocks on a full pipe: one token per pending CQ. */
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	ch->ch.context = &ctx->vctx.context;
	ch->ch.fd = fds[0];
	ch->ch.refcnt = 0;
	ch->wfd = fds[1];
	pthread_mutex_init(&ch->lock, NULL);
	uroce_list_init(&ch->pending);
	*out = ch;
	return 0;
}

int uroce_comp_channel_destroy(struct uroce_comp_channel *ch)
{
	struct ibv_context *ctx = ch->ch.context;

	pthread_mutex_lock(&ctx->mutex);
	if (ch->ch.refcnt) {
		pthread_mutex_unlock(&ctx->mutex);
		return -EBUSY;
	}
	pthread_mutex_unlock(&ctx->mutex);
	close(ch->ch.fd);
	close(ch->wfd);
	pthread_mutex_destroy(&ch->lock);
	free(ch);
	return 0;
}

int uroce_comp_channel_get(struct uroce_comp_channel *ch, struct ibv_cq **cqp)
{
	/* This thread is going to sleep, not busy-poll (engine.c, the poll lease). */
	if (ch->ch.context)
		uroce_transport_will_sleep(uroce_ctx_from_ib(ch->ch.context));
	for (;;) {
		char token;
		ssize_t r = read(ch->ch.fd, &token, 1);

		/* EINTR included: a signal ends the wait with -1/EINTR as rdma-core's
		 * ibv_get_cq_event does (programs such as qperf rely on SIGALRM to stop a
		 * blocked side). */
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		pthread_mutex_lock(&ch->lock);
		if (!uroce_list_empty(&ch->pending)) {
			struct uroce_cq *cq = container_of(ch->pending.next, struct uroce_cq, ev_node);

			uroce_list_del(&cq->ev_node);
			cq->on_channel = false;
			cq->comp_events_delivered++;
			pthread_mutex_unlock(&ch->lock);
			*cqp = (struct ibv_cq *)&cq->cqx;
			return 0;
		}
		/* The token of an event withdrawn by a CQ destroy. */
		pthread_mutex_unlock(&ch->lock);
	}
}

/* The ring's hooks (core/cqring.h). */
static struct uroce_cq *cq_of_ring(struct uroce_cqring *r)
{
	return container_of(r, struct uroce_cq, r);
}

/* The arm fired: queue the CQ on its channel.  Called with the ring's lock held. */
static void notify(struct uroce_cqring *r)
{
	struct uroce_cq *cq = cq_of_ring(r);
	struct uroce_comp_channel *ch;
	char token = 0;

	if (!cq->cqx.channel)
		return;
	ch = container_of(cq->cqx.channel, struct uroce_comp_channel, ch);
	pthread_mutex_lock(&ch->lock);
	if (!cq->on_channel) {
		uroce_list_add_tail(&ch->pending, &cq->ev_node);
		cq->on_channel = true;
		if (write(ch->wfd, &token, 1) != 1) {
			/* Pipe full (65536 pending CQs): the event stays queued and the
			 * next token written will reach it. */
		}
	}
	pthread_mutex_unlock(&ch->lock);
}

/* IBA 11.4.2 (completion queue operations): overrun is a CQ error, reported as an
 * affiliated asynchronous event. */
static void overrun(struct uroce_cqring *r)
{
	struct uroce_cq *cq = cq_of_ring(r);

	uroce_async_event_post(cq->uctx, IBV_EVENT_CQ_ERR, &cq->cqx, 0);
}

static const struct uroce_cqring_hooks cq_hooks = { .notify = notify, .overrun = overrun };

/* --------------------------------------------------------------- CQ ring */

int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	return uroce_cqring_push(&cq->r, wc, solicited);
}

int uroce_cq_poll(struct uroce_cq *cq, int n, struct ibv_wc *wc)
{
	if (n < 0)
		return -EINVAL;
	return uroce_cqring_poll(&cq->r, n, wc);
}

void uroce_cq_clean(struct uroce_cq *cq, uint32_t qpn)
{
	uroce_cqring_clean(&cq->r, qpn);
}

int uroce_cq_arm(struct uroce_cq *cq, int solicited_only)
{
	uroce_cqring_arm(&cq->r, solicited_only != 0);
	return 0;
}

int uroce_cq_resize(struct uroce_cq *cq, int cqe)
{
	int ret;

	if (cqe < 1 || (uint32_t)cqe > uroce_limits()->max_cqe)
		return -EINVAL;
	ret = uroce_cqring_resize(&cq->r, (uint32_t)cqe);
	if (!ret)
		cq->cqx.cqe = (int)cq->r.capacity;
	return ret;
}

/* ------------------------------------------------------ ibv_cq_ex poll API */

static struct uroce_cq *cqx_priv(struct ibv_cq_ex *c) { return (struct uroce_cq *)c; }

static int cqx_take(struct uroce_cq *cq)
{
	if (uroce_cqring_take_locked(&cq->r, &cq->cur))
		return ENOENT;
	cq->cqx.status = cq->cur.status;
	cq->cqx.wr_id = cq->cur.wr_id;
	return 0;
}

/* start_poll takes the CQ lock and keeps it until end_poll, unless it returns
 * ENOENT (the ibv_start_poll contract). */
static int cqx_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	struct uroce_cq *cq = cqx_priv(c);
	int ret;

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->r.lock);
	ret = cqx_take(cq);
	if (ret == ENOENT) {
		/* Empty: make progress in this thread before answering (docs/transport.md). */
		pthread_mutex_unlock(&cq->r.lock);
		if (!uroce_transport_poll(cq->uctx))
			return ENOENT;
		pthread_mutex_lock(&cq->r.lock);
		ret = cqx_take(cq);
	}
	if (ret)
		pthread_mutex_unlock(&cq->r.lock);
	return ret;
}
static int cqx_next_poll(struct ibv_cq_ex *c) { return cqx_take(cqx_priv(c)); }
static void cqx_end_poll(struct ibv_cq_ex *c) { pthread_mutex_unlock(&cqx_priv(c)->r.lock); }
static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.opcode; }
static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.vendor_err; }
static uint32_t cqx_read_byte_len(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.byte_len; }
static __be32 cqx_read_imm_data(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.imm_data; }
static uint32_t cqx_read_qp_num(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.qp_num; }
static uint32_t cqx_read_src_qp(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.src_qp; }
static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.wc_flags; }
static uint32_t cqx_read_slid(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.slid; }
static uint8_t cqx_read_sl(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.sl; }
static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *c) { return cqx_priv(c)->cur.dlid_path_bits; }
/* Fields we never offer (create_cq_ex refuses their wc_flags); still filled so no
 * pointer is NULL. */
static uint64_t cqx_read_zero64(struct ibv_cq_ex *c) { (void)c; return 0; }
static uint16_t cqx_read_zero16(struct ibv_cq_ex *c) { (void)c; return 0; }
static uint32_t cqx_read_zero32(struct ibv_cq_ex *c) { (void)c; return 0; }
static void cqx_read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *tm)
{
	(void)c;
	memset(tm, 0, sizeof(*tm));
}

/* ------------------------------------------------------------ create/destroy */

int uroce_cq_create(struct uroce_context *ctx, const struct ibv_cq_init_attr_ex *attr,
		    struct uroce_cq **out)
{
	struct uroce_cq *cq;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	if (attr->cqe < 1 || (uint32_t)attr->cqe > uroce_limits()->max_cqe)
		return -EINVAL;
	if (attr->comp_vector >= (uint32_t)ctx->vctx.context.num_comp_vectors)
		return -EINVAL;
	if (attr->wc_flags & ~(uint64_t)UROCE_CQ_WC_FLAGS)
		return -EOPNOTSUPP;
	if (attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS)
		return -EOPNOTSUPP;   /* parent domains: not offered */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return -EOPNOTSUPP;
	if (attr->channel && attr->channel->context != &ctx->vctx.context)
		return -EINVAL;

	uroce_verbs_init();
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_CQ);
	if (ret)
		return ret;
	cq = calloc(1, sizeof(*cq));
	if (!cq || uroce_cqring_init(&cq->r, (uint32_t)attr->cqe, &cq_hooks)) {
		free(cq);
		uroce_obj_put(ctx->dev, UROCE_OBJ_CQ);
		return -ENOMEM;
	}
	cq->uctx = ctx;
	cq->wc_flags = attr->wc_flags;
	uroce_list_init(&cq->ev_node);

	struct ibv_cq_ex *x = &cq->cqx;

	x->context = &ctx->vctx.context;
	x->channel = attr->channel;
	x->cq_context = attr->cq_context;
	x->cqe = (int)cq->r.capacity;
	pthread_mutex_init(&x->mutex, NULL);
	pthread_cond_init(&x->cond, NULL);
	x->start_poll = cqx_start_poll;
	x->next_poll = cqx_next_poll;
	x->end_poll = cqx_end_poll;
	x->read_opcode = cqx_read_opcode;
	x->read_vendor_err = cqx_read_vendor_err;
	x->read_byte_len = cqx_read_byte_len;
	x->read_imm_data = cqx_read_imm_data;
	x->read_qp_num = cqx_read_qp_num;
	x->read_src_qp = cqx_read_src_qp;
	x->read_wc_flags = cqx_read_wc_flags;
	x->read_slid = cqx_read_slid;
	x->read_sl = cqx_read_sl;
	x->read_dlid_path_bits = cqx_read_dlid_path_bits;
	x->read_completion_ts = cqx_read_zero64;
	x->read_completion_wallclock_ns = cqx_read_zero64;
	x->read_cvlan = cqx_read_zero16;
	x->read_flow_tag = cqx_read_zero32;
	x->read_tm_info = cqx_read_tm_info;

	if (attr->channel) {
		pthread_mutex_lock(&ctx->vctx.context.mutex);
		attr->channel->refcnt++;
		pthread_mutex_unlock(&ctx->vctx.context.mutex);
	}
	*out = cq;
	return 0;
}

int uroce_cq_destroy(struct uroce_cq *cq)
{
	struct ibv_cq_ex *x = &cq->cqx;
	uint32_t delivered = 0;

	if (atomic_load(&cq->usecnt))
		return -EBUSY;
	if (x->channel) {
		struct uroce_comp_channel *ch = container_of(x->channel, struct uroce_comp_channel, ch);

		pthread_mutex_lock(&ch->lock);
		if (cq->on_channel) {
			uroce_list_del(&cq->ev_node);
			cq->on_channel = false;
		}
		delivered = cq->comp_events_delivered;   /* counted under ch->lock */
		pthread_mutex_unlock(&ch->lock);
	}
	/* Wait for ibv_ack_cq_events of every event handed out (ibv_get_cq_event(3)). */
	pthread_mutex_lock(&x->mutex);
	while (x->comp_events_completed < delivered)
		pthread_cond_wait(&x->cond, &x->mutex);
	pthread_mutex_unlock(&x->mutex);
	uroce_async_event_drain(cq->uctx, x, &cq->async_events_delivered,
				&x->mutex, &x->cond, &x->async_events_completed);
	if (x->channel) {
		pthread_mutex_lock(&x->context->mutex);
		x->channel->refcnt--;
		pthread_mutex_unlock(&x->context->mutex);
	}
	uroce_cqring_fini(&cq->r);
	uroce_obj_put(cq->uctx->dev, UROCE_OBJ_CQ);
	pthread_cond_destroy(&x->cond);
	pthread_mutex_destroy(&x->mutex);
	free(cq);
	return 0;
}
