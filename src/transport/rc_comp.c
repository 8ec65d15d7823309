/* rc_comp.c — the RC completer (IBA 9.7.6, 9.9.2): ACKs, NAKs, READ responses and atomic
 * ACKs -> send completions, retransmission, RNR waits.
 *
 * States:
 *   CHECK_PSN    a response must name a PSN we sent (before high_psn): else dropped
 *                (RESP_PSN); one before comp_psn is a duplicate (counted, ignored: IBA
 *                9.7.6.1.2 "ghost" responses)
 *   CHECK_ACK    a READ response or ATOMIC ACK goes to the WQE whose PSNs hold its PSN,
 *                and acknowledges every WQE before it: READ / ATOMIC when the kinds match,
 *                ERROR (BAD_RESP) when they do not, IMPLIED_NAK when an earlier READ or
 *                atomic has no answer.  An ACK by its AETH kind: ACK -> ACK_WQES; RNR NAK
 *                -> RNR; NAK -> RETRY (sequence) or ERROR
 *   READ         place the payload in order, after the PSN, opcode-sequence and length
 *                checks of read_resp (a misfit is BAD_RESP or RESP_LEN, not a retry)
 *   ATOMIC       store the original value in the WQE's 8-byte buffer
 *   ACK_WQES     every SEND/WRITE WQE whose last PSN is covered is done (an ACK is
 *                cumulative, IBA 9.7.5.1.1); an ACK at or past a READ's or atomic's PSN
 *                that has no answer is an implied NAK
 *   IMPLIED_NAK  go back to the first missing response now (IBA 9.7.6.1.3), once per PSN,
 *                counted against retry_cnt; RETRY_EXC_ERR when it is spent
 *   RETRY        go back to the NAK's PSN (IBA 9.7.5.2.1)
 *   RNR          wait the RNR timer, then resend (IBA 9.7.5.2.8); rnr_retry, 7 = forever
 *   ERROR        the WQE ends with the table's status, the QP enters Error
 * What each misfit response becomes, and where Soft-RoCE differs: docs/soft-roce-differences.md.
 */
#include <endian.h>
#include <string.h>

#include "transport/rc.h"
#include "wire/psn.h"

static enum ibv_wc_opcode wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
	default: return IBV_WC_SEND;
	}
}

/* Retire done WQEs from the head of the send queue, in order (IBA 10.8.3: completions of
 * one queue are returned in order).  Unsignaled successes leave no CQE (IBA 10.8.3.1). */
void uroce_rc_complete_ready(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	while (qp->sq.head != rc->sent_idx) {
		struct uroce_rc_swqe *sw = &rc->swqe[qp->sq.head & (qp->sq.size - 1)];
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, qp->sq.head);

		if (!sw->done)
			break;
		if (uroce_rc_is_rd_atomic(w->opcode) && sw->started && rc->rd_atomic)
			rc->rd_atomic--;
		if (qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED) || sw->status != IBV_WC_SUCCESS) {
			struct ibv_wc wc = {
				.wr_id = w->wr_id, .status = sw->status, .opcode = wc_opcode(w->opcode),
				.qp_num = qp->qpx.qp_base.qp_num, .byte_len = sw->len,
			};

			uroce_cqring_push(&uroce_cq_from_ib(qp->qpx.qp_base.send_cq)->r, &wc, sw->status != IBV_WC_SUCCESS);
		}
		memset(sw, 0, sizeof(*sw));
		qp->sq.head++;
	}
	/* A cumulative ACK can cover WQEs the requester had gone back to resend. */
	if ((int32_t)(qp->sq.head - rc->req_idx) > 0 || psn_before(rc->req_psn, rc->comp_psn))
		uroce_rc_go_back(rc, rc->comp_psn);
}

/* Progress: the retry counters reload (IBA 9.7.6.1.1: the count is per attempt to make
 * progress) and the local ACK timer restarts or stops. */
static void progress(struct uroce_rc *rc)
{
	rc->retry_left = rc->qp->attr.retry_cnt;
	rc->rnr_left = rc->qp->attr.rnr_retry;
	rc->gb_valid = false;
	rc->backoff = 0;
	if (psn_cmp(rc->comp_psn, rc->high_psn) == 0)
		uroce_rc_timer_retrans_stop(rc);
	else
		uroce_rc_timer_retrans_arm(rc);
}

/* The oldest WQE not done (between head and req_idx), or idx == req_idx. */
static uint32_t oldest(struct uroce_rc *rc)
{
	struct uroce_qp *qp = rc->qp;
	uint32_t idx = qp->sq.head;

	while (idx != rc->sent_idx && rc->swqe[idx & (qp->sq.size - 1)].done)
		idx++;
	return idx;
}

/* Go back once per PSN (a burst of out-of-order responses asks only once). */
static void go_back_once(struct uroce_rc *rc, uint32_t psn)
{
	if (rc->gb_valid && rc->gb_psn == psn)
		return;
	rc->gb_valid = true;
	rc->gb_psn = psn;
	uroce_rc_go_back(rc, psn);
}

/* Implied NAK (IBA 9.7.6.1.3): an ACK or a response names a PSN at or after a READ or
 * atomic whose answer is missing, so its responses were lost (or never sent): resume at
 * the first missing response, now, once per PSN.  It counts against retry_cnt as a
 * sequence NAK does (IBA 9.7.6.1.1; rxe's COMPST_ERROR_RETRY): a responder that never
 * answers ends in RETRY_EXC_ERR, not in an endless loop.  Returns RETRY_EXC then. */
static enum uroce_rc_err implied_nak(struct uroce_rc *rc)
{
	if (rc->gb_valid && rc->gb_psn == rc->comp_psn)
		return UROCE_RC_ERR_NONE;       /* asked already */
	if (rc->retry_left == 0)
		return UROCE_RC_ERR_RETRY_EXC;
	if (rc->qp->attr.retry_cnt != 7)
		rc->retry_left--;
	go_back_once(rc, rc->comp_psn);
	return UROCE_RC_ERR_NONE;
}

/* Everything before @psn is acknowledged: the SEND/WRITE WQEs there are done and comp_psn
 * moves up to @psn.  Returns false when a READ or atomic whose request comes before @psn
 * has no complete answer (an implied NAK, the caller goes back): a READ is answered only by
 * its READ responses, an atomic by its ATOMIC ACK (IBA 9.7.5.1), never by an ACK; comp_psn
 * then stays at its first missing response. */
static bool ack_before(struct uroce_rc *rc, uint32_t psn)
{
	struct uroce_qp *qp = rc->qp;

	for (uint32_t idx = oldest(rc); idx != rc->sent_idx; idx++) {
		struct uroce_rc_swqe *sw = &rc->swqe[idx & (qp->sq.size - 1)];
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, idx);

		if (sw->done)
			continue;
		if (!sw->started)
			break;
		if (uroce_rc_is_rd_atomic(w->opcode)) {
			if (psn_before(sw->first_psn, psn))
				return false;
			break;
		}
		if (!psn_before(sw->last_psn, psn))
			break;
		sw->done = 1;
		sw->status = IBV_WC_SUCCESS;
		rc->comp_psn = psn_add(sw->last_psn, 1);
	}
	if (psn_before(rc->comp_psn, psn))
		rc->comp_psn = psn;
	return true;
}

/* The WQE whose PSNs hold @psn (comp_psn <= @psn < high_psn), or sent_idx if none. */
static uint32_t owner_of(struct uroce_rc *rc, uint32_t psn)
{
	struct uroce_qp *qp = rc->qp;

	for (uint32_t idx = oldest(rc); idx != rc->sent_idx; idx++) {
		struct uroce_rc_swqe *sw = &rc->swqe[idx & (qp->sq.size - 1)];

		if (sw->done)
			continue;
		if (!sw->started || psn_before(psn, sw->first_psn))
			break;
		if (!psn_before(sw->last_psn, psn))
			return idx;
	}
	return rc->sent_idx;
}

/* A READ response at @psn for READ WQE @w (@sw), every WQE before it done.  The checks of
 * IBA 9.7.6.1 on what a requester accepts, in order:
 *   PSN      the next response expected (comp_psn); a later one means responses were lost
 *            (implied NAK, IBA 9.7.6.1.3): dropped, go back
 *   opcode   a READ's first response is FIRST or ONLY; after FIRST or MIDDLE comes MIDDLE or
 *            LAST, unless the READ was asked again since (a re-issued READ is answered from
 *            FIRST/ONLY at its PSN, IBA 9.7.5.1.3).  Otherwise BAD_RESP (IBV_WC_BAD_RESP_ERR:
 *            an unexpected opcode from the responder)
 *   length   FIRST and MIDDLE carry exactly the PMTU and leave more to come; LAST and ONLY
 *            carry what is left (at most the PMTU); only the end of a piece of a READ asked
 *            again in pieces (rc_req.c) may end early, at a PMTU.  Otherwise RESP_LEN
 *            (IBV_WC_LOC_LEN_ERR: the response is longer or shorter than the READ)
 * An error ends the WQE and the QP enters Error (uroce_rc_fail_wqe). */
static enum uroce_comp_state read_resp(struct uroce_rc *rc, const struct uroce_pkt *pkt, struct uroce_wqe *w,
				       struct uroce_rc_swqe *sw, enum uroce_rc_err *err)
{
	struct uroce_qp *qp = rc->qp;
	uint32_t psn = pkt->bth.psn, mask = pkt->op->mask, pl = pkt->payload_len;
	uint32_t left = sw->len - sw->read_done;
	bool start = mask & UROCE_OPF_FIRST, end = mask & UROCE_OPF_LAST;

	if (psn != rc->comp_psn || psn_dist(sw->first_psn, psn) * rc->mtu != sw->read_done) {
		rc->st.drops[UROCE_RC_DROP_RESP_GAP]++;
		return UROCE_COMP_IMPLIED_NAK;
	}
	if (sw->read_done == 0 ? !start
	    : start && rc->rd_cont && rc->rd_cont_psn == psn && rc->rd_cont_retx == rc->st.retransmissions) {
		*err = UROCE_RC_ERR_BAD_RESP;
		return UROCE_COMP_ERROR;
	}
	if (end ? pl > left || pl > rc->mtu || (pl < left && !(sw->pieces && pl == rc->mtu))
		: pl != rc->mtu || left <= rc->mtu) {
		*err = UROCE_RC_ERR_RESP_LEN;
		return UROCE_COMP_ERROR;
	}
	*err = uroce_rc_sge_copy(qp, w->sge, w->num_sge, sw->read_done, (uint8_t *)pkt->payload, pl, true);
	if (*err != UROCE_RC_ERR_NONE)
		return UROCE_COMP_ERROR;
	sw->read_done += pl;
	rc->comp_psn = psn_add(psn, 1);
	rc->rd_cont = !end;
	rc->rd_cont_psn = rc->comp_psn;
	rc->rd_cont_retx = rc->st.retransmissions;
	if (sw->read_done == sw->len) {
		sw->done = 1;
		sw->status = IBV_WC_SUCCESS;
	}
	progress(rc);
	uroce_rc_complete_ready(qp);
	uroce_rc_requester(qp, true);   /* credits and window opened */
	return UROCE_COMP_DONE;
}

void uroce_rc_fail_wqe(struct uroce_rc *rc, enum uroce_rc_err e)
{
	uint32_t idx = oldest(rc);

	if (idx != rc->sent_idx) {
		struct uroce_rc_swqe *sw = &rc->swqe[idx & (rc->qp->sq.size - 1)];

		sw->done = 1;
		sw->status = uroce_rc_err_table[e].status;
	}
	uroce_rc_complete_ready(rc->qp);
	uroce_rc_fail(rc, e);
}

void uroce_rc_completer(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	enum uroce_comp_state state = UROCE_COMP_CHECK_PSN;
	uint32_t psn = pkt->bth.psn, idx = 0;
	struct uroce_rc_swqe *sw = NULL;
	struct uroce_wqe *w = NULL;
	enum uroce_rc_err err = UROCE_RC_ERR_NONE;

	if (rc->pending_err != UROCE_RC_ERR_NONE)
		return;
	while (state != UROCE_COMP_DONE) {
		switch (state) {
		case UROCE_COMP_CHECK_PSN:
			/* IBA 9.7.6.1.2: a PSN we never sent is invalid, one before the oldest
			 * outstanding a duplicate ("ghost"); both are dropped and counted. */
			if (!psn_before(psn, rc->high_psn)) {
				rc->st.drops[UROCE_RC_DROP_RESP_PSN]++;
				state = UROCE_COMP_DONE;
			} else if (psn_before(psn, rc->comp_psn)) {
				rc->st.dup_responses++;
				state = UROCE_COMP_DONE;
			} else {
				state = UROCE_COMP_CHECK_ACK;
			}
			break;
		case UROCE_COMP_CHECK_ACK:
			if (pkt->op->mask & (UROCE_OPF_READ | UROCE_OPF_ATOMIC)) {
				/* A READ response or ATOMIC ACK answers the WQE whose PSNs hold its
				 * PSN; it acknowledges every WQE before that one (responses come in
				 * order, IBA 9.7.5.1), and one of those lacking its own answer is an
				 * implied NAK. */
				idx = owner_of(rc, psn);
				if (idx == rc->sent_idx) {
					rc->st.drops[UROCE_RC_DROP_RESP_PSN]++;
					state = UROCE_COMP_DONE;
					break;
				}
				sw = &rc->swqe[idx & (qp->sq.size - 1)];
				w = uroce_wq_slot(&qp->sq, idx);
				if (!ack_before(rc, sw->first_psn)) {
					rc->st.drops[UROCE_RC_DROP_RESP_GAP]++;
					state = UROCE_COMP_IMPLIED_NAK;
				} else if (pkt->op->mask & UROCE_OPF_READ) {
					state = w->opcode == IBV_WR_RDMA_READ ? UROCE_COMP_READ : UROCE_COMP_ERROR;
				} else {
					state = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
						w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? UROCE_COMP_ATOMIC
											 : UROCE_COMP_ERROR;
				}
				/* IBA 9.7.6.1 / 11.6.2: a response of the wrong kind for its request
				 * (READ response for an atomic, SEND or WRITE; ATOMIC ACK for a READ,
				 * SEND or WRITE) is a bad response: the WQE fails, the QP enters Error. */
				if (state == UROCE_COMP_ERROR)
					err = UROCE_RC_ERR_BAD_RESP;
				break;
			}
			switch (uroce_aeth_kind(pkt->aeth.syndrome)) {
			case UROCE_AETH_ACK:
				rc->st.acks_rx++;
				state = UROCE_COMP_ACK_WQES;
				break;
			case UROCE_AETH_RNR_NAK:
				rc->st.rnr_naks_rx++;
				state = UROCE_COMP_RNR;
				break;
			case UROCE_AETH_NAK: {
				unsigned code = uroce_aeth_value(pkt->aeth.syndrome);

				if (code < 5)
					rc->st.naks_rx[code]++;
				err = uroce_rc_err_from_nak(code);
				state = err == UROCE_RC_ERR_PSN_SEQ ? UROCE_COMP_RETRY : UROCE_COMP_ERROR;
				break;
			}
			default:
				rc->st.drops[UROCE_RC_DROP_RESP_OPCODE]++;
				state = UROCE_COMP_DONE;
				break;
			}
			break;
		case UROCE_COMP_READ:
			state = read_resp(rc, pkt, w, sw, &err);
			break;
		case UROCE_COMP_ATOMIC: {
			uint8_t buf[8];

			/* One PSN, and the owner's every predecessor is done: psn == comp_psn. */
			memcpy(buf, &pkt->atmack, 8);   /* the original value, in host order */
			err = uroce_rc_sge_copy(qp, w->sge, w->num_sge, 0, buf, 8, true);
			if (err != UROCE_RC_ERR_NONE) {
				state = UROCE_COMP_ERROR;
				break;
			}
			sw->done = 1;
			sw->status = IBV_WC_SUCCESS;
			rc->comp_psn = psn_add(psn, 1);
			progress(rc);
			uroce_rc_complete_ready(qp);
			uroce_rc_requester(qp, true);   /* credits and window opened */
			state = UROCE_COMP_DONE;
			break;
		}
		case UROCE_COMP_ACK_WQES:
			/* An ACK covers every request up to its PSN (IBA 9.7.5.1.1), a READ's or
			 * atomic's too: one of those without its answer is an implied NAK. */
			if (!ack_before(rc, psn_add(psn, 1))) {
				state = UROCE_COMP_IMPLIED_NAK;
				break;
			}
			progress(rc);
			uroce_rc_complete_ready(qp);
			uroce_rc_requester(qp, true);
			state = UROCE_COMP_DONE;
			break;
		case UROCE_COMP_IMPLIED_NAK:
			err = implied_nak(rc);
			if (err != UROCE_RC_ERR_NONE) {
				state = UROCE_COMP_ERROR;
				break;
			}
			uroce_rc_complete_ready(qp);
			uroce_rc_requester(qp, true);
			state = UROCE_COMP_DONE;
			break;
		case UROCE_COMP_RETRY:
			/* IBA 9.7.5.2.1: a sequence NAK acknowledges everything before its PSN. */
			if (!ack_before(rc, psn)) {
				state = UROCE_COMP_IMPLIED_NAK;
				break;
			}
			uroce_rc_complete_ready(qp);
			rc->st.seq_naks_rx++;
			if (rc->retry_left == 0) {
				err = UROCE_RC_ERR_RETRY_EXC;
				state = UROCE_COMP_ERROR;
				break;
			}
			if (qp->attr.retry_cnt != 7)
				rc->retry_left--;
			go_back_once(rc, psn);
			uroce_rc_requester(qp, true);
			state = UROCE_COMP_DONE;
			break;
		case UROCE_COMP_RNR:
			if (!ack_before(rc, psn)) {
				state = UROCE_COMP_IMPLIED_NAK;
				break;
			}
			uroce_rc_complete_ready(qp);
			if (rc->rnr_left == 0) {
				err = UROCE_RC_ERR_RNR_RETRY_EXC;
				state = UROCE_COMP_ERROR;
				break;
			}
			if (qp->attr.rnr_retry != 7)
				rc->rnr_left--;
			rc->comp_psn = psn;
			uroce_rc_timer_rnr_arm(rc, uroce_aeth_value(pkt->aeth.syndrome));
			state = UROCE_COMP_DONE;
			break;
		case UROCE_COMP_ERROR:
			if (err != UROCE_RC_ERR_RETRY_EXC && err != UROCE_RC_ERR_RNR_RETRY_EXC &&
			    uroce_rc_err_table[err].status != IBV_WC_SUCCESS && pkt->bth.opcode == UROCE_OP_ACK)
				ack_before(rc, psn);
			uroce_rc_fail_wqe(rc, err);
			state = UROCE_COMP_DONE;
			break;
		default:
			state = UROCE_COMP_DONE;
			break;
		}
	}
}
