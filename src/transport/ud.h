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

/* Run the UD requester over every posted WQE (caller holds qp->lock and sq.lock). */
void uroce_ud_requester(struct uroce_qp *qp);
/* One received, validated UD packet addressed to @qp (caller holds qp->lock). */
void uroce_ud_input(struct uroce_qp *qp, const struct uroce_rxpkt *p);
/* Fill the 40-byte GRH area of a UD receive as RoCEv2 receivers do: IPv4 → 20 zero bytes
 * then the IPv4 header; IPv6 → the IPv6 header (a GRH, IBA 8.3).  Pure; never fails. */
void uroce_ud_grh_area(const struct uroce_rxpkt *p, uint8_t out[UROCE_UD_GRH_LEN]);

#endif
