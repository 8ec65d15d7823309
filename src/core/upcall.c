/* upcall.c — the hooks the verbs layer installs for the layers below it (upcall.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/upcall.h"

static _Atomic(const struct uroce_upcalls *) upcalls;

void uroce_upcalls_install(const struct uroce_upcalls *up)
{
	atomic_store(&upcalls, up);
}

static const struct uroce_upcalls *get(const char *what)
{
	const struct uroce_upcalls *up = atomic_load_explicit(&upcalls, memory_order_acquire);

	if (!up) {
		/* Only possible if a test drives the transports without the verbs layer: an
		 * error silently dropped would make it pass for the wrong reason. */
		fprintf(stderr, "uroce: %s reported before the verbs layer installed its hooks\n", what);
		abort();
	}
	return up;
}

void uroce_up_async_event(struct uroce_context *ctx, enum ibv_event_type type, void *obj, int port)
{
	get("an async event")->async_event(ctx, type, obj, port);
}

void uroce_up_qp_error(struct uroce_qp *qp, enum ibv_event_type event)
{
	get("a QP error")->qp_error(qp, event);
}

void uroce_up_qp_sq_error_locked(struct uroce_qp *qp)
{
	get("a send queue error")->qp_sq_error_locked(qp);
}
