/* ud.h — the UD engine (issue #5, docs/ud-uc.md).
 *
 * A UD QP reuses struct uroce_rc as its engine container (qp->transport): its io binding,
 * packet scratch buffer, PSN counter, held receive WQE and counters.  The RC state machines
 * never run on it; uroce_rc_unlock_qp, uroce_rc_detach, uroce_rc_stats and the timer scan
 * work unchanged because a UD QP never records an error or arms a timer.
 *
 * Locking: as the RC engine (rc.h): the caller holds qp->lock (and sq.lock for the
 * requester).  Errors: 0 or -errno.
 */
#ifndef UROCE_TRANSPORT_UD_H
#define UROCE_TRANSPORT_UD_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/netio.h"
#include "transport/rc.h"

/* IBA 10.2.4 / C10-15: a WR Q_Key with its high-order bit set means "use the QP's Q_Key";
 * Q_Keys with that bit set are controlled (privileged). */
#define UROCE_QKEY_CONTROLLED 0x80000000u
#define UROCE_UD_GRH_LEN 40             /* receive buffers start with the GRH area (IBA 11.4.1.2) */

/* The engine's UD transmit: one packet to @dgid (an AH's destination), from @sgid, with the
 * AH's traffic class and hop limit.  Implemented by engine.c (netio) or a test's wire.
 * Returns packets sent (1) or -errno. */
typedef int (*uroce_ud_xmit_fn)(struct uroce_qp *qp, const struct uroce_ah *ah,
				uint8_t *pkt, size_t len);
extern uroce_ud_xmit_fn uroce_ud_xmit;

/* A UD or UC send WQE completed in error (a local error: bad L_Key or SGE outside its MR,
 * an opcode the service lacks, no AH): the QP enters SQ Error (IBA 10.3.1; 11.6.2: on an
 * unreliable service a send-queue error does not affect the receive queue).  Flushes every
 * WQE behind the SQ head (IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND or IBV_WC_RDMA_WRITE) and moves
 * the send-queue head to the tail; later posts are flushed by ibv_post_send (SQE), until
 * the consumer modifies the QP SQE -> RTS.  No affiliated event: the error completion is
 * the notification.  Caller holds qp->lock and sq.lock, has completed the failed WQE and
 * advanced sq.head past it.  Never fails. */
void uroce_ud_uc_sq_error(struct uroce_qp *qp);
/* Run the UD requester over every posted WQE (caller holds qp->lock and sq.lock). */
void uroce_ud_requester(struct uroce_qp *qp);
/* One received, validated UD packet addressed to @qp (caller holds qp->lock). */
void uroce_ud_input(struct uroce_qp *qp, const struct uroce_rxpkt *p);
/* Fill the 40-byte GRH area of a UD receive as RoCEv2 receivers do: IPv4 → 20 zero bytes
 * then the IPv4 header; IPv6 → the IPv6 header (a GRH, IBA 8.3).  Pure; never fails. */
void uroce_ud_grh_area(const struct uroce_rxpkt *p, uint8_t out[UROCE_UD_GRH_LEN]);
/* The receive completion's sl for a UD packet: the network header type in the low three
 * bits, 2 for IPv4 and 1 for IPv6, as mlx5 reports it on RoCE (docs/soft-roce-differences.md).
 * Pure. */
uint8_t uroce_ud_wc_sl(const struct uroce_rxpkt *p);

#endif
