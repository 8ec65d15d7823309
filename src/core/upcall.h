/* upcall.h — how the layers below the verbs layer report to it.
 *
 * The transports find errors on QPs (IBA 10.3.1: the QP enters Error, its WQEs are flushed,
 * an affiliated event is raised) and events (SQ drained, SRQ limit reached, CQ overrun).
 * Changing a verbs object's state and queueing an async event are the verbs layer's work,
 * so the transports do not call it by name: the verbs layer installs these hooks
 * (uroce_upcalls_install) before it hands out a context or a CQ, and the layers below
 * call them through uroce_up_*.  A missing installation is a bug and aborts with a message
 * rather than losing an error.
 */
#ifndef UROCE_CORE_UPCALL_H
#define UROCE_CORE_UPCALL_H

#include <infiniband/verbs.h>

struct uroce_context;
struct uroce_qp;

struct uroce_upcalls {
	/* Queue an async event for the application (verbs.h uroce_async_event_post). */
	void (*async_event)(struct uroce_context *ctx, enum ibv_event_type type, void *obj, int port);
	/* The QP enters Error, every posted WQE flushed, @event raised (0: none). */
	void (*qp_error)(struct uroce_qp *qp, enum ibv_event_type event);
	/* A UC/UD send-queue error with qp->lock and sq.lock held: RTS/SQD -> SQ Error. */
	void (*qp_sq_error_locked)(struct uroce_qp *qp);
};

void uroce_upcalls_install(const struct uroce_upcalls *up);

void uroce_up_async_event(struct uroce_context *ctx, enum ibv_event_type type, void *obj, int port);
void uroce_up_qp_error(struct uroce_qp *qp, enum ibv_event_type event);
void uroce_up_qp_sq_error_locked(struct uroce_qp *qp);

#endif
