/* rc_qp.h — entry points of rc_qp.c that rc.h (the engine's contract, owned with the
 * engine) does not declare: counters for `uroce stat` and the SQD bookkeeping.  They
 * apply to every QP with an engine (struct uroce_rc: RC, and UC/UD which share it).
 *
 * Counters (docs/daemon.md "Data-path counters"): each such QP has a slot in the
 * transport's block of its context's daemon connection (uroce_ipc_qp_counters, block 1);
 * the block's context part holds the totals of every QP the context has had, destroyed
 * ones included.  rc_qp.c takes the slot at attach, publishes at every state change, and
 * publishes a last time and frees the slot at detach.  Without a daemon connection (unit
 * tests) this is a no-op.
 */
#ifndef UROCE_TRANSPORT_RC_QP_H
#define UROCE_TRANSPORT_RC_QP_H

#include <stdbool.h>

#include "verbs/verbs.h"

/* Copy the QP's counters into its slot and add what grew since the last publish to the
 * context's totals.  Caller holds qp->lock.  Returns true if any counter had changed
 * (a periodic caller then publishes again later, so the final values of a burst show
 * without a caller polling forever); false if nothing changed or the QP has no slot.
 * Never fails; cheap enough to call every 200 ms per QP. */
bool uroce_rc_publish(struct uroce_qp *qp);

/* After ibv_modify_qp moved the QP from @cur to @next (qp->lock held, the new state and
 * attributes in place, also for QPs without an engine):
 *   - RTS -> SQD (IBA 10.3.1, 11.6.3.3): the requester starts no new WQE; the SQ is
 *     drained once every WQE it had started has completed.  If that is already so,
 *     returns true when the caller must raise IBV_EVENT_SQ_DRAINED (en_sqd_async_notify);
 *     otherwise sets qp->attr.sq_draining and uroce_rc_unlock_qp() clears it and raises
 *     the event when the last started WQE completes.
 *   - SQD -> RTS: runs the requester for the WQEs posted while the QP was in SQD (nothing
 *     else would: they were posted, nothing is in flight, no packet will arrive).
 *   - any other state: sq_draining cleared.
 * Publishes the QP's counters when the state changed.  Caller releases qp->lock with
 * uroce_transport_unlock_qp() (the requester may have recorded an error). */
bool uroce_rc_modified(struct uroce_qp *qp, enum ibv_qp_state cur, enum ibv_qp_state next);

#endif
