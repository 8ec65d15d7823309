/* queue.h — rings of work queue elements: send queue, receive queue, SRQ (below the verbs
 * layer and the transports).
 *
 * A ring has a power-of-two number of fixed-stride slots; each slot is a struct uroce_wqe
 * followed by max_sge scatter/gather entries and, for send queues, max_inline bytes of
 * inline data.  head/tail run freely (uint32_t wrap-around); the number of posted WQEs is
 * tail - head and never exceeds max_wr.  Producer: the posting verbs.  Consumer: the
 * transports (or the flush on a transition to the Error state).
 */
#ifndef UROCE_CORE_QUEUE_H
#define UROCE_CORE_QUEUE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct uroce_context;

struct uroce_wqe {
	uint64_t wr_id;
	uint32_t opcode;                      /* enum ibv_wr_opcode (SQ only) */
	uint32_t send_flags;
	uint32_t num_sge;
	uint32_t imm_data;                    /* network order, or invalidate rkey */
	union {
		struct { uint64_t remote_addr; uint32_t rkey; } rdma;
		struct { uint64_t remote_addr; uint64_t compare_add, swap; uint32_t rkey; } atomic;
		struct { struct ibv_ah *ah; uint32_t remote_qpn, remote_qkey; } ud;
		struct { struct ibv_mw *mw; struct ibv_mr *mr; uint64_t addr, length;
			 uint32_t access; } bind;   /* BIND_MW; the new rkey is in imm_data */
	} u;
	uint32_t inline_len;                  /* bytes of inline data after sge[] */
	uint32_t pad;
	struct ibv_sge sge[];                 /* max_sge entries, then inline bytes */
};

struct uroce_wq {
	pthread_mutex_t lock;
	uint32_t size;                        /* slots, power of two */
	uint32_t max_wr;                      /* capacity offered to the application */
	uint32_t max_sge;
	uint32_t max_inline;
	size_t stride;
	uint32_t head, tail;                  /* free-running: posted = tail - head */
	uint8_t *buf;
};

int uroce_wq_init(struct uroce_wq *wq, uint32_t max_wr, uint32_t max_sge, uint32_t max_inline);
void uroce_wq_fini(struct uroce_wq *wq);
static inline struct uroce_wqe *uroce_wq_slot(struct uroce_wq *wq, uint32_t idx)
{
	return (struct uroce_wqe *)(wq->buf + (size_t)(idx & (wq->size - 1)) * wq->stride);
}
static inline uint32_t uroce_wq_count(const struct uroce_wq *wq) { return wq->tail - wq->head; }
/* Append receive WRs (caller holds wq->lock); 0 / -ENOMEM / -EINVAL, *bad set. */
int uroce_wq_post_recv(struct uroce_wq *wq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* Consumer side (the transport): copy the oldest WQE (header and SGEs; `out` must
 * have room for wq->max_sge SGEs) and remove it.  Caller holds wq->lock.
 * 0, or -ENOENT when the ring is empty. */
int uroce_wq_pop(struct uroce_wq *wq, struct uroce_wqe *out);
/* The same for a shared receive queue, taking wq->lock itself: when that leaves fewer
 * WQEs than an armed *@srq_limit, the limit is disarmed and IBV_EVENT_SRQ_LIMIT_REACHED is
 * raised on @srq for @ctx once (IBA 10.2.9.5, 11.6.3.4; through core/upcall.h).
 * 0 or -ENOENT (empty: the sender gets an RNR NAK). */
int uroce_wq_pop_srq(struct uroce_wq *wq, uint32_t *srq_limit, struct uroce_wqe *out,
		     struct uroce_context *ctx, struct ibv_srq *srq);

#endif
