/* uc.h — the UC engine (issue #5, docs/ud-uc.md).
 *
 * Like UD (ud.h), a UC QP uses struct uroce_rc as its engine container, bound to its fixed
 * peer exactly as an RC QP (engine.c); only the requester and the responder differ: no
 * ACKs, no retransmission, no timers.  Caller holds qp->lock (and sq.lock for the
 * requester).
 */
#ifndef UROCE_TRANSPORT_UC_H
#define UROCE_TRANSPORT_UC_H

#include "transport/rc.h"

/* Send every posted WQE (SEND / RDMA WRITE, with or without immediate), segmented at the
 * path MTU; each WQE completes once its packets are handed to the wire. */
void uroce_uc_requester(struct uroce_qp *qp);
/* One received, validated UC packet addressed to @qp. */
void uroce_uc_input(struct uroce_qp *qp, const struct uroce_pkt *pkt);

#endif
