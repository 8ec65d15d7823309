/* rc_req.c — the RC requester (IBA 9.7.4): turns send-queue WQEs into request packets.
 *
 * States (one step per iteration of the loop in uroce_rc_requester):
 *   NEXT_WQE      pick the WQE at req_idx; stop when the queue is empty, a fence or the
 *                 max_rd_atomic credit (IBA 9.7.7.2, 10.8.3.3) holds it back
 *   LOCAL_OP      LOCAL_INV, BIND_MW: executed here, no packets (IBA 10.6.7, 10.8.2)
 *   CHECK_WINDOW  at most rc->window PSNs outstanding (512 KiB: rxe's 128 at MTU 4096), the
 *                 link not backed up (io.busy), and credits for the packet from a budget
 *                 shared with other QPs, where the sink has one (io.credit_take, below)
 *   BUILD         one packet: opcode by message position, the WQE's next PSN (psn.h),
 *                 AckReq on the last packet and every 64 packets (IBA 9.7.4.1.4, rxe)
 *   WAIT / DONE   leave the loop (WAIT: something must come back first)
 *
 * A WQE's PSNs are assigned when its first packet is built and kept: a retransmission
 * (uroce_rc_go_back) rebuilds exactly the same packets, so the responder can recognise
 * duplicates by PSN alone (IBA 9.7.5.1.3).
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "transport/rc.h"
#include "wire/psn.h"

bool uroce_rc_is_rd_atomic(uint32_t op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static uint32_t npkts_for(const struct uroce_rc *rc, uint32_t len)
{
	return len ? (len + rc->mtu - 1) / rc->mtu : 1;
}

/* Opcode of the packet at [off, off + n) of a len-byte SEND/WRITE message (IBA table 43). */
static uint8_t msg_opcode(const struct uroce_wqe *w, uint32_t off, uint32_t n, uint32_t len)
{
	bool first = off == 0, last = off + n >= len;

	switch (w->opcode) {
	case IBV_WR_SEND:
		return first && last ? UROCE_OP_SEND_ONLY : first ? UROCE_OP_SEND_FIRST
		       : last ? UROCE_OP_SEND_LAST : UROCE_OP_SEND_MIDDLE;
	case IBV_WR_SEND_WITH_IMM:
		return first && last ? UROCE_OP_SEND_ONLY_IMM : first ? UROCE_OP_SEND_FIRST
		       : last ? UROCE_OP_SEND_LAST_IMM : UROCE_OP_SEND_MIDDLE;
	case IBV_WR_SEND_WITH_INV:
		return first && last ? UROCE_OP_SEND_ONLY_INV : first ? UROCE_OP_SEND_FIRST
		       : last ? UROCE_OP_SEND_LAST_INV : UROCE_OP_SEND_MIDDLE;
	case IBV_WR_RDMA_WRITE:
		return first && last ? UROCE_OP_WRITE_ONLY : first ? UROCE_OP_WRITE_FIRST
		       : last ? UROCE_OP_WRITE_LAST : UROCE_OP_WRITE_MIDDLE;
	default: /* IBV_WR_RDMA_WRITE_WITH_IMM */
		return first && last ? UROCE_OP_WRITE_ONLY_IMM : first ? UROCE_OP_WRITE_FIRST
		       : last ? UROCE_OP_WRITE_LAST_IMM : UROCE_OP_WRITE_MIDDLE;
	}
}

/* End a WQE locally with an error: it completes (in order) with @err's status and the
 * QP goes to Error. */
static void local_error(struct uroce_rc *rc, uint32_t idx, enum uroce_rc_err err)
{
	struct uroce_rc_swqe *sw = &rc->swqe[idx & (rc->qp->sq.size - 1)];

	sw->done = 1;
	sw->sent = 1;
	sw->started = 1;
	sw->status = uroce_rc_err_table[err].status;
	if (idx == rc->req_idx)
		rc->req_idx++;
	if ((int32_t)(rc->req_idx - rc->sent_idx) > 0)
		rc->sent_idx = rc->req_idx;
	uroce_rc_complete_ready(rc->qp);
	uroce_rc_fail(rc, err);
}

/* LOCAL_INV and BIND_MW, executed when the requester reaches them (IBA 10.6.7, 10.8.2.x):
 * in order with the WQEs before them.  Returns the error or NONE. */
static enum uroce_rc_err local_op(struct uroce_rc *rc, struct uroce_wqe *w)
{
	struct uroce_qp *qp = rc->qp;

	if (w->opcode == IBV_WR_LOCAL_INV) {
		struct uroce_mw *mw = uroce_key_lookup(w->imm_data, UROCE_KEY_MW);

		/* Only type 2 windows are invalidated through the send queue (IBA 10.6.7.2.4,
		 * o10-37.2.26); invalidating a Free window leaves it Free. */
		if (!mw || mw->key != w->imm_data || mw->mw.type != IBV_MW_TYPE_2 ||
		    mw->mw.pd != qp->qpx.qp_base.pd)
			return UROCE_RC_ERR_LOC_QP_OP;
		uroce_mw_unbind(mw);
		return UROCE_RC_ERR_NONE;
	} else {
		struct ibv_mw_bind_info info = {
			.mr = w->u.bind.mr, .addr = w->u.bind.addr, .length = w->u.bind.length,
			.mw_access_flags = w->u.bind.access,
		};

		/* The rules again, now that the WQEs before this one have run (a LOCAL_INV
		 * may have freed the window, a rereg changed the MR), and the window's state;
		 * a failure completes the WQE with the memory window bind error and the QP enters Error
		 * (the MW_BIND row of rc.h's error table). */
		if (uroce_mw_bind_exec((struct uroce_mw *)w->u.bind.mw, qp->qpx.qp_base.pd,
				       qp->qpx.qp_base.qp_num, &info, w->imm_data))
			return UROCE_RC_ERR_MW_BIND;
		return UROCE_RC_ERR_NONE;
	}
}

int uroce_rc_xmit_pieces(struct uroce_rc *rc, size_t len, uint32_t n, const struct iovec *data,
			 unsigned ndata)
{
	size_t tlen = uroce_pad_for(n) + UROCE_ICRC_LEN, hlen = len - n - tlen;
	int ret;

	if (!rc->io.xmitv)
		return -EOPNOTSUPP;
	/* uroce_rc_build left the headers at the start of scratch and the pad and ICRC slot
	 * right after the payload's place. */
	ret = rc->io.xmitv(rc->io.arg, rc->qp, rc->scratch, hlen, data, ndata,
			   rc->scratch + hlen + n, tlen);
	rc->st.tx_packets++;
	if (ret < 0)
		rc->st.drops[UROCE_RC_DROP_TX_FAIL]++;
	return ret;
}

/* Credits (io.credit_take).  The requester reserves a run of PSNs before it sends the
 * run's first packet, and the run's last packet asks for an ACK (build_one): so a QP that
 * waits for credits has nothing in flight that nobody will acknowledge, and the ACKs of
 * every QP's runs keep freeing credits for the others.  A run ends where an AckReq falls
 * anyway (the message's end, every UROCE_RC_MAX_PKT_PER_ACK packets), so on a path with
 * credits to spare the packets are exactly those without a budget.  A READ reserves its
 * responses (they are what fills our receive socket), at most a window's worth
 * (rc->window; its request asks for the whole message, so the responses of a
 * READ longer than that are partly outside the budget); an atomic one PSN.  A go-back
 * returns the credits (uroce_rc_go_back) and the resent packets reserve again. */
static uint32_t credit_run(const struct uroce_rc *rc, const struct uroce_wqe *w,
			   const struct uroce_rc_swqe *sw)
{
	uint32_t len, left;

	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	len = sw->started ? sw->len : uroce_rc_wqe_len(rc->qp, w);
	left = len > rc->req_off ? npkts_for(rc, len - rc->req_off) : 1;
	if (w->opcode == IBV_WR_RDMA_READ)
		return left < rc->window ? left : rc->window;
	return left < UROCE_RC_MAX_PKT_PER_ACK - rc->noack_pkts ? left
	       : UROCE_RC_MAX_PKT_PER_ACK - rc->noack_pkts;
}

void uroce_rc_credit_sync(struct uroce_rc *rc, bool all)
{
	uint32_t keep = 0;

	if (!rc->cr_held)
		return;
	if (!all && psn_before(rc->comp_psn, rc->cr_psn))
		keep = psn_dist(rc->comp_psn, rc->cr_psn);
	if (keep < rc->cr_held) {
		rc->io.credit_give(rc->io.arg, (rc->cr_held - keep) * rc->mtu);
		rc->cr_held = keep;
	}
}

/* The packet at @psn is inside the credits this QP holds. */
static bool credit_held(const struct uroce_rc *rc, uint32_t psn)
{
	return rc->cr_held && psn_before(psn, rc->cr_psn);
}

/* Whether the packet at @psn asks for an ACK (IBA 9.7.6.1.1 leaves the choice to the
 * requester): a message's @last packet, every UROCE_RC_MAX_PKT_PER_ACK-th, and the last
 * one the held credits cover (a run's end), so that what they cover comes back. */
static bool ackreq_for(struct uroce_rc *rc, uint32_t psn, bool last)
{
	if (++rc->noack_pkts < UROCE_RC_MAX_PKT_PER_ACK && !last &&
	    !(rc->cr_held && psn_add(psn, 1) == rc->cr_psn))
		return false;
	rc->noack_pkts = 0;
	return true;
}

/* The counters of a request packet at @psn with @n payload bytes, sent now. */
static void count_tx(struct uroce_rc *rc, uint32_t psn, uint32_t n)
{
	if (psn_before(psn, rc->high_psn))
		rc->st.retransmissions++;
	rc->st.tx_bytes += n;
}

/* Credits for the packet at @next: held already, or reserved now.  False: wait. */
static bool credit_for(struct uroce_rc *rc, uint32_t next, const struct uroce_wqe *w,
		       const struct uroce_rc_swqe *sw)
{
	uint32_t n;

	if (credit_held(rc, next))
		return true;
	uroce_rc_credit_sync(rc, false);
	n = credit_run(rc, w, sw);
	if (!rc->io.credit_take(rc->io.arg, n * rc->mtu)) {
		rc->st.credit_waits++;
		return false;
	}
	rc->cr_held += n;
	rc->cr_psn = psn_add(next, n);
	return true;
}

/* The clock for one requester run, read once (*now, 0 until then): the retransmission timer
 * its first packet arms and the last_req stamp at its end (rc_resp.c, acknowledge) share
 * it.  A run sends at most a window (128 packets), so the stamp is early by at most that
 * run's time against the millisecond it is compared with. */
static uint64_t req_clock(uint64_t *now)
{
	if (!*now)
		*now = uroce_rc_clock();
	return *now;
}

/* Packets were just built: arm the retransmission timer (IBA 9.7.6.1.1) if it is off, now,
 * or, in a post's run (stamp_late), once they have left (uroce_rc_stamp). */
static void arm_retrans(struct uroce_rc *rc, uint64_t *now)
{
	if (rc->t_retrans)
		return;
	if (rc->stamp_late)
		rc->stamp_retrans = true;
	else
		uroce_rc_timer_retrans_arm_at(rc, req_clock(now));
}

void uroce_rc_stamp(struct uroce_rc *rc)
{
	uint64_t now;

	rc->stamp_late = false;
	if (!rc->stamp_retrans && !rc->stamp_req)
		return;
	now = uroce_rc_clock();
	if (rc->stamp_retrans && !rc->t_retrans)
		uroce_rc_timer_retrans_arm_at(rc, now);
	if (rc->stamp_req)
		rc->last_req = now;
	rc->stamp_retrans = rc->stamp_req = false;
}

/* Build and send the next packet of WQE @w (the run's clock in *now, req_clock).  Returns
 * false when the WQE failed. */
static bool build_one(struct uroce_rc *rc, uint32_t idx, struct uroce_wqe *w, struct uroce_rc_swqe *sw,
		      uint64_t *now)
{
	struct uroce_qp *qp = rc->qp;
	struct uroce_pkt p = { 0 };
	uint32_t off = rc->req_off, n = 0, psn;
	struct iovec data[UROCE_RC_XMITV_MAX];
	int ndata = 0;
	uint8_t *pl;
	size_t len;
	bool last;

	if (!sw->started) {
		sw->len = uroce_rc_wqe_len(qp, w);
		if (sw->len > UROCE_MAX_MSG_SZ) {
			local_error(rc, idx, UROCE_RC_ERR_LOC_LEN);
			return false;
		}
		sw->first_psn = rc->req_psn;
		/* A READ's PSNs are those of its responses (IBA 9.7.4.1.3); an atomic uses one. */
		sw->last_psn = psn_add(rc->req_psn, w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
				       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 0
				       : npkts_for(rc, sw->len) - 1);
		sw->read_done = 0;
		sw->pieces = 0;
		sw->started = 1;
		sw->done = 0;
		sw->status = IBV_WC_SUCCESS;
		if (uroce_rc_is_rd_atomic(w->opcode))
			rc->rd_atomic++;
		if (idx == rc->sent_idx)
			rc->sent_idx = idx + 1;
	}
	psn = psn_add(sw->first_psn, off / rc->mtu);
	switch (w->opcode) {
	case IBV_WR_RDMA_READ:
		p.bth.opcode = UROCE_OP_READ_REQ;
		p.reth.va = w->u.rdma.remote_addr + off;
		p.reth.rkey = w->u.rdma.rkey;
		p.reth.len = sw->len - off;
		/* A retried READ asks for at most UROCE_RC_READ_RETRY_PKTS responses at a time:
		 * on a lossy path, asking again for the whole remainder after each loss costs
		 * O(n^2) response packets; pieces keep it linear.  The responder replays any
		 * sub-range of the original request (IBA 9.7.5.1.3 allows the requester to
		 * resume a READ at the PSN of the first missing response).  Only once a response
		 * arrived: then the responder holds the whole original request as its resource;
		 * before, the original may have been lost and this request is the new one. */
		if (psn_before(psn, rc->high_psn) && sw->read_done &&
		    p.reth.len > UROCE_RC_READ_RETRY_PKTS * rc->mtu) {
			p.reth.len = UROCE_RC_READ_RETRY_PKTS * rc->mtu;
			sw->pieces = 1;     /* the completer accepts a LAST at the piece's end */
		}
		last = off + p.reth.len >= sw->len;
		n = 0;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		/* IBA 10.8.3.x: the local buffer of an atomic is exactly 8 bytes. */
		if (sw->len != 8) {
			local_error(rc, idx, UROCE_RC_ERR_LOC_LEN);
			return false;
		}
		p.bth.opcode = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? UROCE_OP_CMP_SWAP : UROCE_OP_FETCH_ADD;
		p.atmeth.va = w->u.atomic.remote_addr;
		p.atmeth.rkey = w->u.atomic.rkey;
		p.atmeth.swap_add = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->u.atomic.swap
									    : w->u.atomic.compare_add;
		p.atmeth.compare = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->u.atomic.compare_add : 0;
		last = true;
		break;
	default:
		n = sw->len - off;
		if (n > rc->mtu)
			n = rc->mtu;
		p.bth.opcode = msg_opcode(w, off, n, sw->len);
		last = off + n >= sw->len;
		if (off == 0 && (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
			p.reth.va = w->u.rdma.remote_addr;
			p.reth.rkey = w->u.rdma.rkey;
			p.reth.len = sw->len;
		}
		if (last && (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
			p.imm = be32toh(w->imm_data);
		if (last && w->opcode == IBV_WR_SEND_WITH_INV)
			p.ieth = w->imm_data;
		/* IBA 9.2.3: Solicited Event on the last packet of a SEND / WRITE with Imm. */
		if (last && (w->send_flags & IBV_SEND_SOLICITED) && w->opcode != IBV_WR_RDMA_WRITE)
			p.bth.se = true;
		break;
	}
	p.bth.psn = psn;
	p.bth.ackreq = ackreq_for(rc, psn, last);
	len = uroce_rc_build(rc, &p, n, &pl);
	if (!len) {
		local_error(rc, idx, UROCE_RC_ERR_LOC_QP_OP);
		return false;
	}
	if (n) {
		if (w->send_flags & IBV_SEND_INLINE) {
			memcpy(pl, uroce_rc_wqe_inline(qp, w) + off, n);
		} else {
			enum uroce_rc_err e = UROCE_RC_ERR_NONE;

			/* The payload straight from the application's memory when the sink
			 * takes pieces (one copy, into the kernel); else into the packet. */
			if (rc->io.xmitv)
				ndata = uroce_rc_sge_iov(qp, w->sge, w->num_sge, off, n, 0, data,
							 UROCE_RC_XMITV_MAX, &e);
			if (ndata == 0)
				e = uroce_rc_sge_copy(qp, w->sge, w->num_sge, off, pl, n, false);
			if (ndata < 0 || e != UROCE_RC_ERR_NONE) {
				local_error(rc, idx, e);
				return false;
			}
		}
	}
	count_tx(rc, psn, n);
	if (ndata > 0)
		uroce_rc_xmit_pieces(rc, len, n, data, (unsigned)ndata);
	else
		uroce_rc_xmit(rc, rc->scratch, len);
	if (w->opcode == IBV_WR_RDMA_READ) {
		rc->req_psn = psn_add(sw->last_psn, 1);
		rc->req_off = off + p.reth.len;
	} else {
		rc->req_psn = psn_add(psn, 1);
		rc->req_off = off + n;
	}
	if (!psn_before(rc->req_psn, rc->high_psn))
		rc->high_psn = rc->req_psn;
	if (last) {
		sw->sent = 1;
		rc->req_idx++;
		rc->req_off = 0;
	}
	arm_retrans(rc, now);
	return true;
}

/* After build_one sent a packet of a SEND or WRITE that goes on, the MIDDLE packets that
 * follow, as many as the checks of UROCE_REQ_CHECK_WINDOW let through, built from one BTH
 * template: they differ from each other only in PSN and AckReq, so the state machine's
 * walk, the header encoding by table and the SGE resolution per packet (about 40% of a
 * 64 KiB WRITE's instructions outside the ICRC at MTU 1024) are paid once per run.  The
 * packets are those build_one would have built, byte for byte (transport_rc's burst check
 * compares both).  Where a check fails -- the window, a busy link, credits not yet
 * held, a message in several SGEs or inline -- it stops and the state machine goes on as
 * before, with the same checks and their side effects (timers, credit reservations). */
static void burst_middle(struct uroce_rc *rc, const struct uroce_wqe *w, const struct uroce_rc_swqe *sw,
			 uint64_t *now)
{
	struct uroce_qp *qp = rc->qp;
	uint32_t mtu = rc->mtu, off = rc->req_off, start = off;
	uint8_t hdr[UROCE_BTH_LEN], tail[UROCE_ICRC_LEN] = { 0 };
	struct uroce_bth bth = { 0 };
	const uint8_t *base;
	bool sent = false;

	if (!rc->io.xmitv || !mtu || off == 0 || off + mtu >= sw->len || w->num_sge != 1 ||
	    (w->send_flags & IBV_SEND_INLINE) || w->sge[0].length != sw->len ||
	    (w->opcode != IBV_WR_SEND && w->opcode != IBV_WR_SEND_WITH_IMM &&
	     w->opcode != IBV_WR_SEND_WITH_INV && w->opcode != IBV_WR_RDMA_WRITE &&
	     w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM))
		return;
	/* The rest of the message, checked once (build_one checks each packet's piece). */
	base = uroce_rc_local_ptr(qp, &w->sge[0], off, sw->len - off, 0);
	if (!base)
		return;   /* build_one reports it at the next packet */
	uroce_rc_bth_fill(rc, &bth);
	bth.opcode = msg_opcode(w, off, mtu, sw->len);
	while (off + mtu < sw->len) {
		uint32_t psn = psn_add(sw->first_psn, off / mtu);
		struct iovec data = { (void *)(base + (off - start)), mtu };
		int ret;

		if (psn_dist(rc->comp_psn, psn) >= rc->window ||
		    (rc->io.busy && rc->io.busy(rc->io.arg)) ||
		    (rc->io.credit_take && !credit_held(rc, psn)))
			break;
		bth.psn = psn;
		bth.ackreq = ackreq_for(rc, psn, false);
		uroce_bth_put(hdr, &bth);
		count_tx(rc, psn, mtu);
		ret = rc->io.xmitv(rc->io.arg, qp, hdr, sizeof(hdr), &data, 1, tail, sizeof(tail));
		rc->st.tx_packets++;
		rc->st.tx_runs++;
		if (ret < 0)
			rc->st.drops[UROCE_RC_DROP_TX_FAIL]++;
		off += mtu;
		rc->req_psn = psn_add(psn, 1);
		rc->req_off = off;
		if (!psn_before(rc->req_psn, rc->high_psn))
			rc->high_psn = rc->req_psn;
		sent = true;
	}
	if (sent)
		arm_retrans(rc, now);
}

void uroce_rc_requester(struct uroce_qp *qp, bool sq_locked)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	enum uroce_req_state state = UROCE_REQ_NEXT_WQE;
	struct uroce_wqe *w = NULL;
	struct uroce_rc_swqe *sw = NULL;
	uint64_t now = 0;   /* req_clock */
	uint32_t start_psn;

	if (!rc || rc->rnr_wait || rc->pending_err != UROCE_RC_ERR_NONE)
		return;
	start_psn = rc->req_psn;
	/* IBA 10.3.1: new WQEs start only in RTS; SQD finishes the ones already started. */
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	if (!sq_locked)
		pthread_mutex_lock(&qp->sq.lock);
	while (state != UROCE_REQ_DONE && state != UROCE_REQ_WAIT) {
		switch (state) {
		case UROCE_REQ_NEXT_WQE:
			if (rc->req_idx == qp->sq.tail || rc->pending_err != UROCE_RC_ERR_NONE) {
				state = UROCE_REQ_DONE;
				break;
			}
			w = uroce_wq_slot(&qp->sq, rc->req_idx);
			sw = &rc->swqe[rc->req_idx & (qp->sq.size - 1)];
			if (sw->done && sw->sent) {          /* a local op done before a go-back */
				rc->req_idx++;
				break;
			}
			if (!sw->started && qp->attr.qp_state == IBV_QPS_SQD) {
				state = UROCE_REQ_DONE;
				break;
			}
			/* A READ retried in pieces: the next piece once the last one has arrived. */
			if (sw->started && w->opcode == IBV_WR_RDMA_READ && rc->req_off > sw->read_done) {
				state = UROCE_REQ_WAIT;
				break;
			}
			if (w->opcode == IBV_WR_LOCAL_INV || w->opcode == IBV_WR_BIND_MW) {
				state = UROCE_REQ_LOCAL_OP;
				break;
			}
			/* IBA 10.8.3.3: a fenced WQE waits for every earlier READ and atomic. */
			if (!sw->started && (w->send_flags & IBV_SEND_FENCE) && rc->rd_atomic) {
				state = UROCE_REQ_WAIT;
				break;
			}
			if (!sw->started && uroce_rc_is_rd_atomic(w->opcode) &&
			    rc->rd_atomic >= (qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1u)) {
				state = UROCE_REQ_WAIT;
				break;
			}
			state = UROCE_REQ_CHECK_WINDOW;
			break;
		case UROCE_REQ_LOCAL_OP: {
			enum uroce_rc_err e = local_op(rc, w);

			if (e != UROCE_RC_ERR_NONE) {
				local_error(rc, rc->req_idx, e);
				state = UROCE_REQ_DONE;
				break;
			}
			sw->started = sw->sent = sw->done = 1;
			sw->status = IBV_WC_SUCCESS;
			sw->len = 0;
			rc->req_idx++;
			if ((int32_t)(rc->req_idx - rc->sent_idx) > 0)
				rc->sent_idx = rc->req_idx;
			uroce_rc_complete_ready(qp);
			state = UROCE_REQ_NEXT_WQE;
			break;
		}
		case UROCE_REQ_CHECK_WINDOW: {
			/* The PSN this packet will carry: a started WQE keeps its own. */
			uint32_t next = sw->started ? psn_add(sw->first_psn, rc->req_off / rc->mtu) : rc->req_psn;

			state = psn_dist(rc->comp_psn, next) >= rc->window
				? UROCE_REQ_WAIT : UROCE_REQ_BUILD;
			/* The link is backed up (io.busy): wait as for a closed window, and
			 * look again shortly (t_busy), whatever else runs the QP before. */
			if (state == UROCE_REQ_BUILD && rc->io.busy && rc->io.busy(rc->io.arg)) {
				if (!rc->t_busy)
					uroce_rc_timer_busy_arm(rc);
				/* Stopped in the middle of a message, its packets so far carry
				 * no AckReq and nothing acknowledges them until the rest goes:
				 * the local ACK timeout (IBA 9.7.6.1.1, for packets lost on the
				 * way) counts from when the requester may send again, or a QP
				 * that waited its turn behind 999 others resends a window
				 * nobody lost. */
				if (rc->t_retrans)
					uroce_rc_timer_retrans_arm(rc);
				state = UROCE_REQ_WAIT;
			}
			if (state == UROCE_REQ_BUILD && rc->io.credit_take && !credit_for(rc, next, w, sw))
				state = UROCE_REQ_WAIT;
			break;
		}
		case UROCE_REQ_BUILD:
			if (!build_one(rc, rc->req_idx, w, sw, &now)) {
				state = UROCE_REQ_DONE;
				break;
			}
			if (rc->burst)
				burst_middle(rc, w, sw, &now);
			state = UROCE_REQ_NEXT_WQE;
			break;
		default:
			state = UROCE_REQ_DONE;
			break;
		}
	}
	/* A deferred ACK follows the request packets just sent (rc_resp.c, acknowledge). */
	if (rc->io.defer_timed && rc->req_psn != start_psn) {
		if (rc->stamp_late)
			rc->stamp_req = true;
		else
			rc->last_req = req_clock(&now);
	}
	if (rc->ack_pending && rc->req_psn != start_psn)
		uroce_rc_flush_ack(rc);
	if (!sq_locked)
		pthread_mutex_unlock(&qp->sq.lock);
}

/* Go back to @psn (IBA 9.7.5.2.1 NAK, 9.7.6.1.1 timeout, 9.7.5.2.8 RNR): resume at the
 * oldest WQE not yet acknowledged, at the packet carrying @psn; later WQEs are resent with
 * the PSNs they already have. */
void uroce_rc_go_back(struct uroce_rc *rc, uint32_t psn)
{
	struct uroce_qp *qp = rc->qp;
	uint32_t idx = qp->sq.head;

	while (idx != rc->sent_idx) {
		struct uroce_rc_swqe *sw = &rc->swqe[idx & (qp->sq.size - 1)];

		if (!sw->done)
			break;
		idx++;
	}
	for (uint32_t i = idx; i != rc->sent_idx; i++) {
		struct uroce_rc_swqe *sw = &rc->swqe[i & (qp->sq.size - 1)];

		if (!sw->done)
			sw->sent = 0;
	}
	rc->req_idx = idx;
	rc->req_off = 0;
	rc->noack_pkts = 0;
	rc->req_psn = psn;
	if (idx != qp->sq.tail) {
		struct uroce_rc_swqe *sw = &rc->swqe[idx & (qp->sq.size - 1)];
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, idx);

		if (sw->started) {
			if (w->opcode == IBV_WR_RDMA_READ) {
				rc->req_off = sw->read_done;
			} else if (!uroce_rc_is_rd_atomic(w->opcode) &&
				   psn_in_range(psn, sw->first_psn, sw->last_psn)) {
				rc->req_off = psn_dist(sw->first_psn, psn) * rc->mtu;
			}
			rc->req_psn = psn_add(sw->first_psn, rc->req_off / rc->mtu);
		}
	}
	rc->comp_psn = rc->req_psn;
	/* What was in flight was lost, NAKed or refused (RNR): it fills no receive socket any
	 * more.  The credits go back, and the resent packets reserve again -- a QP that waits
	 * out an RNR timer or retries to a dead peer holds none meanwhile. */
	uroce_rc_credit_sync(rc, true);
}
