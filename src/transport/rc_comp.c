/* rc_comp.c — the RC completer (IBA 9.7.6, 9.9.2): ACKs, NAKs, READ responses and atomic
 * ACKs -> send completions, retransmission, RNR waits.
 *
 * States:
 *   CHECK_PSN   a response must name a PSN we sent (before req_psn); one before comp_psn
 *               is a duplicate (counted, ignored: IBA 9.7.6.1.2 "ghost" responses)
 *   CHECK_ACK   by AETH kind / opcode: ACK -> ACK_WQES; RNR NAK -> RNR; NAK -> RETRY
 *               (sequence) or ERROR; READ response -> READ; atomic ACK -> ATOMIC
 *   READ        place the payload in order (the next expected PSN only)
 *   ATOMIC      store the original value in the WQE's 8-byte buffer
 *   ACK_WQES    every SEND/WRITE WQE whose last PSN is covered is done (an ACK is
 *               cumulative, IBA 9.7.5.1.1); a READ/atomic it covers whose answer was lost
 *               means go back (implicit NAK, IBA 9.7.6.1.3)
 *   RETRY       go back to the NAK's PSN (IBA 9.7.5.2.1)
 *   RNR         wait the RNR timer, then resend (IBA 9.7.5.2.8); rnr_retry, 7 = forever
 *   ERROR       the WQE ends with the table's status, the QP enters Error
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

			uroce_cq_push(uroce_cq_from_ib(qp->qpx.qp_base.send_cq), &wc, sw->status != IBV_WC_SUCCESS);
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

/* Everything before @psn is acknowledged.  Returns false when a READ/atomic before @psn
 * has no answer yet (its response was lost): the caller goes back. */
static bool ack_before(struct uroce_rc *rc, uint32_t psn)
{
	struct uroce_qp *qp = rc->qp;

	for (uint32_t idx = oldest(rc); idx != rc->sent_idx; idx++) {
		struct uroce_rc_swqe *sw = &rc->swqe[idx & (qp->sq.size - 1)];
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, idx);

		if (sw->done)
			continue;
		if (!sw->started || !psn_before(sw->last_psn, psn))
			break;
		if (uroce_rc_is_rd_atomic(w->opcode))
			return false;
		sw->done = 1;
		sw->status = IBV_WC_SUCCESS;
		rc->comp_psn = psn_add(sw->last_psn, 1);
	}
	if (psn_before(rc->comp_psn, psn))
		rc->comp_psn = psn;
	return true;
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
			idx = oldest(rc);
			if (idx != rc->sent_idx) {
				sw = &rc->swqe[idx & (qp->sq.size - 1)];
				w = uroce_wq_slot(&qp->sq, idx);
			}
			if (pkt->op->mask & UROCE_OPF_READ) {
				state = UROCE_COMP_READ;
			} else if (pkt->bth.opcode == UROCE_OP_ATOMIC_ACK) {
				state = UROCE_COMP_ATOMIC;
			} else {
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
			}
			break;
		case UROCE_COMP_READ:
			if (!sw || !sw->started || w->opcode != IBV_WR_RDMA_READ ||
			    !psn_in_range(psn, sw->first_psn, sw->last_psn)) {
				/* A response for a WQE that is not the oldest: everything before that
				 * WQE was acknowledged implicitly, but an answer is missing. */
				if (!ack_before(rc, psn))
					go_back_once(rc, rc->comp_psn);
				else
					rc->st.drops[UROCE_RC_DROP_RESP_OPCODE]++;
				state = UROCE_COMP_DONE;
				break;
			}
			if (psn != rc->comp_psn || psn_dist(sw->first_psn, psn) * rc->mtu != sw->read_done) {
				/* IBA 9.7.6.1.3: a gap in the responses; ask again from the gap. */
				if (psn_after(psn, rc->comp_psn))
					go_back_once(rc, rc->comp_psn);
				else
					rc->st.dup_responses++;
				state = UROCE_COMP_DONE;
				break;
			}
			{
				uint32_t expect = sw->len - sw->read_done;

				/* Every response but the message's last carries a full MTU.  (LAST may also
				 * end a piece of a READ retried in pieces, rc_req.c.) */
				if (expect > rc->mtu)
					expect = rc->mtu;
				if (pkt->payload_len != expect) {
					rc->st.drops[UROCE_RC_DROP_RESP_OPCODE]++;
					state = UROCE_COMP_DONE;
					break;
				}
				err = uroce_rc_sge_copy(qp, w->sge, w->num_sge, sw->read_done,
							(uint8_t *)pkt->payload, pkt->payload_len, true);
				if (err != UROCE_RC_ERR_NONE) {
					state = UROCE_COMP_ERROR;
					break;
				}
				sw->read_done += pkt->payload_len;
				rc->comp_psn = psn_add(psn, 1);
				if (sw->read_done == sw->len) {
					sw->done = 1;
					sw->status = IBV_WC_SUCCESS;
				}
				progress(rc);
				uroce_rc_complete_ready(qp);
				uroce_rc_requester(qp, true);   /* credits and window opened */
				state = UROCE_COMP_DONE;
			}
			break;
		case UROCE_COMP_ATOMIC:
			if (!sw || !sw->started || !uroce_rc_is_rd_atomic(w->opcode) ||
			    w->opcode == IBV_WR_RDMA_READ || psn != sw->first_psn) {
				if (!ack_before(rc, psn))
					go_back_once(rc, rc->comp_psn);
				else
					rc->st.drops[UROCE_RC_DROP_RESP_OPCODE]++;
				state = UROCE_COMP_DONE;
				break;
			}
			{
				uint8_t buf[8];

				/* The original value, in host order, into the WQE's buffer. */
				memcpy(buf, &pkt->atmack, 8);
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
			}
			break;
		case UROCE_COMP_ACK_WQES:
			if (!ack_before(rc, psn_add(psn, 1)))
				go_back_once(rc, rc->comp_psn);
			else
				progress(rc);
			uroce_rc_complete_ready(qp);
			uroce_rc_requester(qp, true);
			state = UROCE_COMP_DONE;
			break;
		case UROCE_COMP_RETRY:
			/* IBA 9.7.5.2.1: a sequence NAK acknowledges everything before its PSN. */
			if (!ack_before(rc, psn)) {
				go_back_once(rc, rc->comp_psn);
			} else {
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
			}
			uroce_rc_requester(qp, true);
			state = UROCE_COMP_DONE;
			break;
		case UROCE_COMP_RNR:
			if (!ack_before(rc, psn)) {
				go_back_once(rc, rc->comp_psn);
				uroce_rc_requester(qp, true);
				state = UROCE_COMP_DONE;
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
