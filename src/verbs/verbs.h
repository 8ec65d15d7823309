/* verbs.h — uroce's verbs objects (internal).
 *
 * Every object handed to an application embeds the rdma-core 44 public struct
 * (<infiniband/verbs.h>) as its FIRST member, so the pointer the application holds
 * and the pointer to our object are the same address; uroce_*_from_ib() convert.
 * The one exception is the context: struct verbs_context must be the last thing
 * before application-visible memory ends (its ibv_context is its last member and
 * verbs_context grows towards lower addresses), so uroce_context keeps its private
 * fields in front of it.
 *
 * Ownership and lifetime
 *   device   immortal; one per daemon device name; never freed (stable pointers
 *            across ibv_get_device_list calls, abi-compat.md §3.3).
 *   context  owns: the daemon connection, the async event queue, a watcher thread.
 *   pd, mr, mw, cq, srq, qp, ah  owned by the application, freed by their destroy
 *            verb; a destroy fails with EBUSY while another object still uses it
 *            (usecnt), as the kernel's uverbs layer does.
 *
 * Layers (docs/ARCHITECTURE.md "Layers"): this layer sits above the transports
 * (src/transport), which sit above src/core.  What both need lives in src/core: the work
 * queue rings (core/queue.h) that the posting verbs fill and the transports consume, the
 * CQ ring (core/cqring.h) the transports fill and ibv_poll_cq drains, the memory keys,
 * regions and windows (core/mem.h), the device's GID view (core/devview.h).  The verbs
 * layer calls the transports through the hooks below; the transports never call this
 * layer: they report QP errors and async events through core/upcall.h, whose hooks this
 * layer installs (uroce_verbs_init).  Each object carries a `transport` pointer for the
 * transport's per-object state.
 *
 * Locking order (outer → inner): context->lock → qp->lock → wq->lock → cq->lock →
 * channel->lock.  The async queue lock (ctx->async_lock) is a leaf.
 *
 * Error convention: every uroce_* function returns 0 or a negative errno (or a
 * pointer + out-parameter as documented).  Exported verbs convert in src/abi/ibverbs.
 */
#ifndef UROCE_VERBS_H
#define UROCE_VERBS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cqring.h"
#include "core/devview.h"
#include "core/mem.h"
#include "core/qptable.h"
#include "core/queue.h"
#include "core/upcall.h"
#include "ipc/ipc.h"

#define UROCE_VERSION_STRING "0.1.0"

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* ---- device limits (reported by query_device; enforced by the create verbs) ---- */
enum {
	UROCE_VENDOR_ID = 0xFFFFFF,      /* like rxe: unknown to perftest (abi-compat §5.12) */
	UROCE_VENDOR_PART_ID = 0,
	UROCE_MAX_SGE = 32,
	UROCE_MAX_INLINE = 256,
	UROCE_MAX_QP_RD_ATOM = 128,
	UROCE_MAX_RES_RD_ATOM = 0x3F000,
	UROCE_MAX_SRQ_SGE = 32,
	UROCE_NUM_PORTS = 1,
};

/* The limits that memory bounds (limits.c, docs/verbs.md "Limits"): the smaller of the
 * design's own bound and the memory budget over an object's cost. */
struct uroce_limits {
	uint32_t max_qp, max_qp_wr, max_cq, max_cqe, max_pd, max_mr, max_mw, max_ah, max_srq,
		 max_srq_wr;
};
const struct uroce_limits *uroce_limits(void);
/* The memory the limits are derived from: UROCE_MEM_BUDGET_MB, or the smallest of physical
 * memory, the cgroup's memory.max and RLIMIT_AS. */
uint64_t uroce_mem_budget(void);
/* Objects counted against those limits, per device and process. */
enum uroce_obj { UROCE_OBJ_QP, UROCE_OBJ_CQ, UROCE_OBJ_PD, UROCE_OBJ_MR, UROCE_OBJ_MW,
		 UROCE_OBJ_AH, UROCE_OBJ_SRQ, UROCE_OBJ_NUM };
struct uroce_device;
/* Count one more: 0, or -EINVAL when the device already has its limit of them. */
int uroce_obj_take(struct uroce_device *dev, enum uroce_obj k);
void uroce_obj_put(struct uroce_device *dev, enum uroce_obj k);

/* Largest message (IBA 9.7.4.1.x): rxe now advertises 2 GiB; so do we. */
#define UROCE_MAX_MSG_SZ 0x80000000u

/* ---- a minimal intrusive list ---- */
struct uroce_list {
	struct uroce_list *next, *prev;
};
static inline void uroce_list_init(struct uroce_list *l) { l->next = l->prev = l; }
static inline bool uroce_list_empty(const struct uroce_list *l) { return l->next == l; }
static inline void uroce_list_add_tail(struct uroce_list *l, struct uroce_list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}
static inline void uroce_list_del(struct uroce_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* ---- device ---- */

/* The object every ibv_device* we hand out points to.  rdma-core's private
 * struct verbs_device is 712 bytes with its ops pointer at +664; libmlx5 and
 * libefa read that word to recognise their devices (abi-compat §3.2), so ours
 * holds a pointer to our own table and the object is at least 712 bytes. */
struct uroce_device {
	struct ibv_device ibdev;              /* must be first */
	const void *ops;                      /* +664: &uroce_device_marker */
	uint64_t rdma_core_private[6];        /* +672..+711: refcount, list, sysfs, core_support */
	unsigned index;                       /* position in the process's device table */
	struct uroce_devview view;            /* last description received from uroced (core) */
	atomic_uint nobj[UROCE_OBJ_NUM];      /* objects of this device in the process (limits.c) */
};

extern const char uroce_device_marker[];

static inline struct uroce_device *uroce_dev_from_ib(struct ibv_device *d)
{
	return container_of(d, struct uroce_device, ibdev);
}

/* Refresh the process's device table from uroced (autostarting it).  On success
 * *list is a calloc'ed NULL-terminated array of stable device pointers (caller
 * frees the array only) and *n its length. */
int uroce_device_list(struct ibv_device ***list, int *n);
/* Copy the current description of a device. */
void uroce_device_info(struct uroce_device *dev, struct uroce_dev_info *out);
/* Replace the description of `dev` with `info` (same name). */
void uroce_device_set_info(struct uroce_device *dev, const struct uroce_dev_info *info);

/* ---- async events (context-wide queue; the fd is a pipe of tokens) ---- */
struct uroce_async_ev {
	struct uroce_list node;
	struct ibv_async_event ev;
};

/* ---- context ---- */
struct uroce_context {
	pthread_mutex_t lock;                 /* object lists below */
	struct uroce_device *dev;
	struct uroce_ipc *ipc;
	atomic_bool dead;                     /* uroced went away: IBV_EVENT_DEVICE_FATAL raised */

	pthread_mutex_t async_lock;
	struct uroce_list async_queue;        /* struct uroce_async_ev, oldest first */
	int async_wfd;                        /* write end; async_fd is the read end */
	uint64_t async_dropped;

	pthread_t watcher;
	bool watcher_running;
	int stop_pipe[2];                     /* wakes the watcher at close */

	struct uroce_list qps;                /* struct uroce_qp.ctx_node */
	struct uroce_qptable qp_by_num;       /* QPN -> struct uroce_qp, the same QPs (receive path) */
	void *transport;                      /* per-context engine state (progress thread, socket) */

	struct verbs_context vctx;            /* must be last (abi-compat §3.2) */
};

static inline struct uroce_context *uroce_ctx_from_ib(struct ibv_context *c)
{
	return container_of(c, struct uroce_context, vctx.context);
}

int uroce_context_open(struct uroce_device *dev, struct uroce_context **out);
int uroce_context_close(struct uroce_context *ctx);
/* 0 when usable, -EIO after the daemon died. */
int uroce_context_alive(struct uroce_context *ctx);
/* Queue an async event for the application.  `obj` is the object of the event
 * type (cq, qp, srq, port number for port events).  Counts per-object reports. */
void uroce_async_event_post(struct uroce_context *ctx, enum ibv_event_type type, void *obj, int port);
/* Take the oldest event (blocking or not, per the fd's O_NONBLOCK).  0 / -errno. */
int uroce_async_event_get(struct uroce_context *ctx, struct ibv_async_event *ev);
void uroce_async_event_ack(struct ibv_async_event *ev);
/* Remove queued events that name `obj` (called by destroy verbs), then wait until
 * every delivered event of `obj` was acknowledged: *mutex / *cond / *completed
 * are the object's public fields. */
void uroce_async_event_drain(struct uroce_context *ctx, void *obj, const uint32_t *delivered,
			     pthread_mutex_t *mutex, pthread_cond_t *cond, uint32_t *completed);

int uroce_query_device(struct uroce_context *ctx, struct ibv_device_attr *attr);
int uroce_query_device_ex(struct uroce_context *ctx, const struct ibv_query_device_ex_input *in,
			  struct ibv_device_attr_ex *attr, size_t attr_size);
int uroce_query_port(struct uroce_context *ctx, uint8_t port, struct ibv_port_attr *attr);
/* GID slot: 0, -EINVAL (bad port/index), -ENODATA (empty slot). */
int uroce_query_gid(struct uroce_context *ctx, uint8_t port, unsigned index,
		    union ibv_gid *gid, uint8_t *type, uint32_t *ifindex);
/* Find a valid GID slot equal to `gid` of `type` (UROCE_GID_TYPE_*); index or -ENOENT. */
int uroce_find_gid(struct uroce_context *ctx, uint8_t port, const union ibv_gid *gid, uint8_t type);
/* The port's P_Key table (IBA 10.9), as ibv_query_pkey reports it and the receive check
 * (IBA 9.6.1.1, transport/rc_qp.c) reads it (core/devview.h).  0 or -EINVAL. */
int uroce_query_pkey(const struct uroce_context *ctx, uint8_t port, unsigned index, uint16_t *pkey);

/* ---- protection domain ---- */
struct uroce_pd {
	struct ibv_pd pd;
	atomic_uint usecnt;                   /* MRs, MWs, QPs, SRQs, AHs */
};
static inline struct uroce_pd *uroce_pd_from_ib(struct ibv_pd *p) { return (struct uroce_pd *)p; }
int uroce_pd_alloc(struct uroce_context *ctx, struct uroce_pd **out);
int uroce_pd_dealloc(struct uroce_pd *pd);

/* ---- memory keys, regions, windows: core/mem.h ---- */
/* ---- memory region ---- */
/* Validate an access-flag set for a registration; returns the flags to keep or -errno. */
int uroce_mr_check_access(unsigned access);
int uroce_mr_reg(struct uroce_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access,
		 struct uroce_mr **out);
int uroce_mr_rereg(struct uroce_mr *mr, int flags, struct uroce_pd *pd, void *addr, size_t length,
		   unsigned access);
int uroce_mr_dereg(struct uroce_mr *mr);

/* ---- memory window ---- */
int uroce_mw_alloc(struct uroce_pd *pd, enum ibv_mw_type type, struct uroce_mw **out);
int uroce_mw_dealloc(struct uroce_mw *mw);
/* uroce_mw_bind_check, uroce_mw_bind_exec, uroce_mw_unbind: core/mem.h */

/* ---- completion channel ---- */
struct uroce_comp_channel {
	struct ibv_comp_channel ch;           /* ch.fd is the read end of a token pipe */
	int wfd;
	pthread_mutex_t lock;
	struct uroce_list pending;            /* struct uroce_cq.ev_node of CQs with an event */
};
int uroce_comp_channel_create(struct uroce_context *ctx, struct uroce_comp_channel **out);
int uroce_comp_channel_destroy(struct uroce_comp_channel *ch);
/* Take the next CQ event; 0 / -errno (-EAGAIN on a non-blocking empty channel). */
int uroce_comp_channel_get(struct uroce_comp_channel *ch, struct ibv_cq **cq);

/* ---- completion queue ---- */

struct uroce_cq {
	struct ibv_cq_ex cqx;                 /* first 128 B are struct ibv_cq (abi-compat §3.2) */
	struct uroce_context *uctx;
	struct uroce_cqring r;                /* the ring, arming (core/cqring.h); r.lock also
					       * guards cur, the ibv_cq_ex poll cursor */
	uint64_t wc_flags;                    /* create_cq_ex wc_flags (0 for create_cq) */
	struct ibv_wc cur;                    /* entry being read by the ibv_cq_ex poll API */
	atomic_uint usecnt;                   /* QPs and SRQs using it */
	bool on_channel;                      /* queued on channel->pending */
	struct uroce_list ev_node;
	uint32_t comp_events_delivered;       /* handed out by ibv_get_cq_event */
	uint32_t async_events_delivered;
	void *transport;
};
static inline struct uroce_cq *uroce_cq_from_ib(struct ibv_cq *c) { return (struct uroce_cq *)c; }
int uroce_cq_create(struct uroce_context *ctx, const struct ibv_cq_init_attr_ex *attr,
		    struct uroce_cq **out);
int uroce_cq_destroy(struct uroce_cq *cq);
int uroce_cq_resize(struct uroce_cq *cq, int cqe);
int uroce_cq_poll(struct uroce_cq *cq, int n, struct ibv_wc *wc);
int uroce_cq_arm(struct uroce_cq *cq, int solicited_only);
/* Take QP @qpn's completions off @cq, keeping the others in order (a QP entering Reset). */
void uroce_cq_clean(struct uroce_cq *cq, uint32_t qpn);
/* Add a completion (uroce_cqring_push on the CQ's ring; the transports call that).
 * `solicited` is the solicited-event bit of the message (IBA 11.4.2.2: an ARM_SOLICITED
 * CQ fires only for those and for errors).  -ENOSPC when the ring is full: the CQ is then
 * in error (IBV_EVENT_CQ_ERR). */
int uroce_cq_push(struct uroce_cq *cq, const struct ibv_wc *wc, bool solicited);
/* Accepted wc_flags of create_cq_ex. */
#define UROCE_CQ_WC_FLAGS (IBV_WC_STANDARD_FLAGS)

/* ---- work queue rings: core/queue.h ---- */

/* ---- shared receive queue ---- */
struct uroce_srq {
	struct ibv_srq srq;
	struct uroce_context *uctx;
	struct uroce_wq rq;
	uint32_t srq_limit;                   /* 0 = not armed (IBA 10.2.9.5) */
	atomic_uint usecnt;                   /* attached QPs */
	uint32_t events_delivered;
	void *transport;
};
static inline struct uroce_srq *uroce_srq_from_ib(struct ibv_srq *s) { return (struct uroce_srq *)s; }
int uroce_srq_create(struct uroce_pd *pd, struct ibv_srq_init_attr *attr, struct uroce_srq **out);
int uroce_srq_modify(struct uroce_srq *srq, struct ibv_srq_attr *attr, int mask);
int uroce_srq_query(struct uroce_srq *srq, struct ibv_srq_attr *attr);
int uroce_srq_destroy(struct uroce_srq *srq);
int uroce_srq_post_recv(struct uroce_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* Take the oldest receive WQE for an incoming message (the transport's call).
 * When that leaves fewer WQEs than an armed srq_limit, raises
 * IBV_EVENT_SRQ_LIMIT_REACHED once and disarms (IBA 10.2.9.5, 11.6.3.4).
 * 0 or -ENOENT (empty: the sender gets an RNR NAK). */
int uroce_srq_pop(struct uroce_srq *srq, struct uroce_wqe *out);

/* ---- queue pair ---- */
struct uroce_qp {
	struct ibv_qp_ex qpx;                 /* qpx.qp_base is the struct ibv_qp */
	bool is_qp_ex;                        /* created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	uint64_t send_ops_flags;
	struct uroce_context *uctx;
	pthread_mutex_t lock;                 /* state and attributes */
	struct ibv_qp_attr attr;              /* current attributes (attr.qp_state is the state) */
	struct ibv_qp_cap cap;
	int sq_sig_all;
	struct uroce_wq sq, rq;               /* rq unused when the QP has an SRQ */
	/* ibv_wr_* staging: WQEs built since wr_start, not yet visible */
	uint32_t wr_pending;
	int wr_err;
	struct uroce_list ctx_node;
	uint32_t events_delivered;
	void *transport;
};
static inline struct uroce_qp *uroce_qp_from_ib(struct ibv_qp *q)
{
	return container_of(q, struct uroce_qp, qpx.qp_base);
}
int uroce_qp_create(struct uroce_context *ctx, struct ibv_qp_init_attr_ex *attr, struct uroce_qp **out);
int uroce_qp_destroy(struct uroce_qp *qp);
int uroce_qp_modify(struct uroce_qp *qp, struct ibv_qp_attr *attr, int mask);
int uroce_qp_query(struct uroce_qp *qp, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init);
int uroce_qp_post_recv(struct uroce_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int uroce_qp_post_send(struct uroce_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
void uroce_qp_ex_init_ops(struct uroce_qp *qp);
/* Errors the transport detects.  uroce_qp_error: the QP enters Error (IBA 10.3.1),
 * every posted WQE is flushed and `event` (e.g. IBV_EVENT_QP_FATAL,
 * IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR; 0 for none) is raised.
 * uroce_qp_sq_error: a UC/UD send-queue error enters SQ Error, flushing only the send
 * queue (the receive side keeps working); an RC QP goes to Error instead.  The WQE
 * that failed is completed by the caller, with its error status, before the call. */
void uroce_qp_error(struct uroce_qp *qp, enum ibv_event_type event);
void uroce_qp_sq_error(struct uroce_qp *qp);
/* The UC/UD part of uroce_qp_sq_error for a caller that holds qp->lock and sq.lock (the
 * requester): RTS/SQD -> SQ Error, the send queue flushed. */
void uroce_qp_sq_error_locked(struct uroce_qp *qp);

/* The IBTA QP state machine (IBA 10.3.1, 11.2.4.2): is `mask` a legal set of
 * attributes for cur → next on a QP of `type`?  (qp_state.c) */
bool uroce_qp_transition_ok(enum ibv_qp_state cur, enum ibv_qp_state next,
			    enum ibv_qp_type type, int mask);
const char *uroce_qp_state_name(enum ibv_qp_state s);

/* ---- address handle ---- */
struct uroce_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
	uint8_t sgid[16];                     /* source GID resolved at create */
	bool ipv4;                            /* dgid is IPv4-mapped: RoCEv2 over IPv4 */
};
int uroce_ah_create(struct uroce_pd *pd, struct ibv_ah_attr *attr, struct uroce_ah **out);
int uroce_ah_destroy(struct uroce_ah *ah);
/* ibv_init_ah_from_wc's parsing: 0 / -errno. */
int uroce_ah_attr_from_wc(struct uroce_context *ctx, uint8_t port, const struct ibv_wc *wc,
			  const struct ibv_grh *grh, struct ibv_ah_attr *attr);

/* ---- transport hooks (src/transport/engine.c) ----
 * uroce_transport_qp_modify: called with qp->lock held after the attributes of a
 *   cur -> next transition were applied; RC: binds the engine at Init -> RTR (starting the
 *   context's progress thread and data path if uroce_transport_ctx_start has not; taking
 *   the shared-memory link to a same-host peer), loads the requester at RTR ->
 *   RTS, detaches at Reset.  0 or -errno (the modify then fails).  Without the data path
 *   linked (no netio), returns 0 and leaves the QP without an engine.
 * uroce_transport_post: qp->lock and sq.lock held, WQEs already at the tail: runs the
 *   requester; false when the QP has no engine (the post then fails with EOPNOTSUPP).
 * uroce_transport_unlock_qp: releases qp->lock and raises an error the engine found.
 * uroce_transport_poll: drain received packets without blocking (ibv_poll_cq on empty);
 *   0 when it found nothing to do (then no CQ of this thread's can have changed).
 * uroce_transport_will_sleep: an application thread is about to wait for a completion
 *   event (ibv_req_notify_cq, ibv_get_cq_event): it no longer busy-polls.
 * uroce_transport_ctx_start: the context's first QP exists: start its data path (progress
 *   thread, sockets, the same-host shm link) now, so that a same-host peer can link to it
 *   before its QPs reach RTR; a failure is left for the modify to RTR to report.
 * uroce_transport_ctx_close: stop the progress thread, close the data path. */
int uroce_transport_qp_modify(struct uroce_qp *qp, enum ibv_qp_state cur, enum ibv_qp_state next);
void uroce_transport_qp_destroy(struct uroce_qp *qp);
bool uroce_transport_post(struct uroce_qp *qp);
void uroce_transport_unlock_qp(struct uroce_qp *qp);
int uroce_transport_poll(struct uroce_context *ctx);
void uroce_transport_will_sleep(struct uroce_context *ctx);
void uroce_transport_ctx_start(struct uroce_context *ctx);
void uroce_transport_ctx_close(struct uroce_context *ctx);
/* ibv_attach_mcast / ibv_detach_mcast of a UD QP (transport/mcast.h): 0, -EINVAL (not UD,
 * not a multicast GID), -ENOENT (detach: not attached), -errno of the socket join. */
int uroce_transport_mcast(struct uroce_qp *qp, const union ibv_gid *gid, bool attach);

/* Install the hooks of core/upcall.h (once; every entry point that hands out a context
 * or a CQ calls it). */
void uroce_verbs_init(void);

/* ---- ops tables (ops.c) ---- */
void uroce_context_set_ops(struct uroce_context *ctx);

#endif
