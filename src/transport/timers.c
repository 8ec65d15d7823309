/* timers.c — every timer of an RC QP, and nothing else decides when one fires.
 *
 *   timer        armed when                                   stopped when                   on expiry
 *   ----------   ------------------------------------------   ----------------------------   ---------------------------------
 *   t_retrans    a request packet is sent while none was      every PSN sent is acknowledged  retry_cnt-- (7 = forever, as rxe);
 *   (local ACK   outstanding; re-armed (pushed back) by each  (comp_psn == req_psn), QP       0 left: RETRY_EXC_ERR; else go back
 *   timeout,     ACK/response that makes progress             error, detach                   to comp_psn and resend (IBA 9.7.6.1.1)
 *   IBA 9.7.6.1.1)  4.096 us * 2^timeout, floor UROCE_RC_MIN_TIMEOUT_NS; timeout 0 = never;
 *                with retry_cnt 7 (forever) doubled after each expiry without progress, at
 *                most 16x, reset by progress
 *   t_rnr        an RNR NAK is received (IBA 9.7.5.2.8)       it fires; QP error, detach      resend from the NAK's PSN
 *                for the AETH's timer code (uroce_rnr_timer_usec)
 *   t_ack        the responder defers an ACK (rc_resp.c,      the deferred ACK is sent        send the deferred ACK
 *                io.defer_timed: the QP sent a request         (uroce_rc_flush_ack: after the
 *                recently); UROCE_RC_ACK_DEFER_NS, or a        requester's packets, before
 *                quarter of the QP's own local ACK timeout     any other responder packet)
 *                if that is shorter
 *
 *   t_busy       the requester stopped because its link       it fires; QP error, detach      run the requester (it stops and
 *                holds packets it could not send (io.busy,                                    arms t_busy again if the link
 *                a shm ring's spill); UROCE_RC_BUSY_RETRY_NS                                  is still backed up)
 * Apart from t_ack the responder acknowledges only on AckReq and on duplicates, as rxe.
 *
 * Deadlines are CLOCK_MONOTONIC nanoseconds, 0 = not armed.  The progress thread
 * (engine.c) sleeps in a timerfd until the earliest deadline of any QP of the context.
 */
#include <time.h>

#include "transport/rc.h"
#include "wire/psn.h"

uint64_t uroce_rc_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t (*uroce_rc_clock)(void) = uroce_rc_now;

/* IBA 9.7.6.1.1: Local ACK Timeout = 4.096 us * 2^timeout; 0 means infinite. */
static uint64_t retrans_ns(const struct uroce_rc *rc)
{
	unsigned t = rc->qp->attr.timeout;
	uint64_t ns;

	if (!t)
		return 0;
	ns = 4096ull << (t > 31 ? 31 : t);
	if (ns < UROCE_RC_MIN_TIMEOUT_NS)
		ns = UROCE_RC_MIN_TIMEOUT_NS;
	/* Back off while retries make no progress (docs/soft-roce-differences.md): a 1 MiB
	 * READ answered more slowly than the timeout must not be asked for again and again. */
	return ns << rc->backoff;
}

void uroce_rc_timer_retrans_arm(struct uroce_rc *rc)
{
	uroce_rc_timer_retrans_arm_at(rc, uroce_rc_clock());
}

void uroce_rc_timer_retrans_arm_at(struct uroce_rc *rc, uint64_t now)
{
	uint64_t ns = retrans_ns(rc);

	rc->t_retrans = ns ? now + ns : 0;
	if (rc->t_retrans && rc->io.timer)
		rc->io.timer(rc->io.arg, rc->t_retrans);
}

void uroce_rc_timer_retrans_stop(struct uroce_rc *rc)
{
	rc->t_retrans = 0;
}

void uroce_rc_timer_rnr_arm(struct uroce_rc *rc, unsigned rnr_code)
{
	rc->t_rnr = uroce_rc_clock() + (uint64_t)uroce_rnr_timer_usec(rnr_code) * 1000ull;
	rc->rnr_wait = true;
	/* While waiting out the RNR timer the local ACK timer does not run (IBA 9.7.5.2.8). */
	rc->t_retrans = 0;
	if (rc->io.timer)
		rc->io.timer(rc->io.arg, rc->t_rnr);
}

void uroce_rc_timer_ack_arm(struct uroce_rc *rc)
{
	uroce_rc_timer_ack_arm_at(rc, uroce_rc_clock());
}

void uroce_rc_timer_ack_arm_at(struct uroce_rc *rc, uint64_t now)
{
	/* The peer's local ACK timeout is not known here; the two ends of a connection are
	 * usually given the same one.  Holding an ACK for more than a quarter of ours would
	 * risk the peer's retransmission if its timeout is as short (timeout <= 5). */
	uint64_t hold = UROCE_RC_ACK_DEFER_NS, tmo = rc->qp->attr.timeout;

	if (tmo && tmo < 32 && (4096ull << tmo) / 4 < hold)
		hold = (4096ull << tmo) / 4;
	rc->t_ack = now + hold;
	if (rc->io.timer)
		rc->io.timer(rc->io.arg, rc->t_ack);
}

void uroce_rc_timer_busy_arm(struct uroce_rc *rc)
{
	rc->t_busy = uroce_rc_clock() + UROCE_RC_BUSY_RETRY_NS;
	if (rc->io.timer)
		rc->io.timer(rc->io.arg, rc->t_busy);
}

uint64_t uroce_rc_next_deadline(const struct uroce_qp *qp)
{
	const struct uroce_rc *rc = uroce_rc_of(qp);
	uint64_t d = 0;

	if (!rc)
		return 0;
	if (rc->t_retrans)
		d = rc->t_retrans;
	if (rc->t_rnr && (!d || rc->t_rnr < d))
		d = rc->t_rnr;
	if (rc->t_ack && (!d || rc->t_ack < d))
		d = rc->t_ack;
	if (rc->t_busy && (!d || rc->t_busy < d))
		d = rc->t_busy;
	return d;
}

uint64_t uroce_rc_timers_run(struct uroce_qp *qp, uint64_t now)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (!rc)
		return 0;
	if (rc->t_ack && now >= rc->t_ack)
		uroce_rc_flush_ack(rc);
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return 0;
	if (rc->t_busy && now >= rc->t_busy) {
		rc->t_busy = 0;
		if (!rc->rnr_wait)
			uroce_rc_requester(qp, true);
	}
	if (rc->t_rnr && now >= rc->t_rnr) {
		rc->t_rnr = 0;
		rc->rnr_wait = false;
		uroce_rc_go_back(rc, rc->comp_psn);
		uroce_rc_requester(qp, true);
	}
	if (rc->t_retrans && now >= rc->t_retrans) {
		rc->t_retrans = 0;
		if (psn_cmp(rc->comp_psn, rc->high_psn) != 0) {
			rc->st.timeouts++;
			if (rc->retry_left == 0) {
				uroce_rc_fail_wqe(rc, UROCE_RC_ERR_RETRY_EXC);
			} else {
				if (qp->attr.retry_cnt != 7)
					rc->retry_left--;
				/* Only when retrying forever (retry_cnt 7): a finite retry_cnt keeps the
				 * spec's timing, so RETRY_EXC_ERR comes after exactly retry_cnt + 1
				 * timeouts. */
				if (qp->attr.retry_cnt == 7 && rc->backoff < 4)
					rc->backoff++;
				uroce_rc_go_back(rc, rc->comp_psn);
				uroce_rc_requester(qp, true);
			}
		}
	}
	return uroce_rc_next_deadline(qp);
}
