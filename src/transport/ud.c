/* ud.c — the UD service (IBA 9.8, 10.2.4, 11.4.1.2; docs/ud-uc.md).
 *
 * Requester: every posted WQE is one SEND (with or without immediate) in a single
 * SEND_ONLY packet carrying a DETH (Q_Key, source QPN); no ACK, no retransmission, the
 * WQE completes as soon as its packet is handed to the wire.
 * Responder: Q_Key check, a receive WQE taken from the RQ or SRQ, the 40-byte GRH area and
 * the payload placed, one receive completion with IBV_WC_GRH and the sender's QPN.
 *
 * The QP's engine container is struct uroce_rc (ud.h explains why).  Drops are counted in
 * rc->st.drops with the reasons of rc.h (QKEY, NO_RWQE, ...).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <string.h>

#include "transport/ud.h"
#include "wire/psn.h"

uroce_ud_xmit_fn uroce_ud_xmit;

static bool gid_v4mapped(const uint8_t *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };

	return !memcmp(g, prefix, sizeof(prefix));
}

void uroce_ud_grh_area(const struct uroce_rxpkt *p, uint8_t out[UROCE_UD_GRH_LEN])
{
	memset(out, 0, UROCE_UD_GRH_LEN);
	if (gid_v4mapped(p->src.gid)) {
		/* RoCEv2 over IPv4 (Annex A17.4.5.1): the IPv4 header sits in the last 20 bytes;
		 * Linux RoCE devices do this and ibv_init_ah_from_wc / UCX read it there.  The
		 * header the sender sent, as far as a UDP socket tells: DF (the ICRC check
		 * assumed it), the ID uroce sends (0) or the one recovered from the ICRC, the
		 * TOS and TTL as received. */
		uint8_t *h = out + 20;

		h[0] = 0x45;
		h[1] = p->traffic_class;
		uroce_put_be16(h + 2, (uint16_t)(20 + 8 + p->len));
		uroce_put_be16(h + 4, p->pkt.icrc_status == UROCE_ICRC_OK_ID ? p->pkt.ip_id : 0);
		uroce_put_be16(h + 6, 0x4000);
		h[8] = p->hop_limit;
		h[9] = IPPROTO_UDP;
		memcpy(h + 12, p->src.gid + 12, 4);
		memcpy(h + 16, p->dgid + 12, 4);
		uroce_put_be16(h + 10, uroce_ipv4_csum(h));
		return;
	}
	/* IPv6: the IPv6 header is the GRH (IBA 8.3): version 6, traffic class, flow label,
	 * payload length (the UDP length), next header UDP, hop limit, source, destination. */
	uint32_t vtf = 6u << 28 | (uint32_t)p->traffic_class << 20 | (p->flow_label & 0xFFFFF);
	uroce_put_be32(out, vtf);
	uroce_put_be16(out + 4, (uint16_t)(p->len + 8));
	out[6] = 17;
	out[7] = p->hop_limit;
	memcpy(out + 8, p->src.gid, 16);
	memcpy(out + 24, p->dgid, 16);
}

/* RoCE has no service level on the wire (the VL/SL of IBA 7.6 become the IP header's
 * DSCP/ECN), so the work completion's sl field is free.  mlx5 fills it from its CQE with the
 * packet's L3 header type (0 GRH, 1 IPv6, 2 IPv4), and UCX 1.13's ud_verbs reads it from
 * there to know where the destination address sits in the GRH area: with 0 it compares 16
 * bytes of IPv4 header with its GIDs and drops every datagram (UCX_UD_VERBS_ETH_DGID_CHECK).
 * rxe leaves it 0. */
uint8_t uroce_ud_wc_sl(const struct uroce_rxpkt *p)
{
	return gid_v4mapped(p->src.gid) ? 2 : 1;
}

/* ------------------------------------------------------------ requester */

static void complete_send(struct uroce_qp *qp, const struct uroce_wqe *w, enum ibv_wc_status st,
			  uint32_t len)
{
	if (qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED) || st != IBV_WC_SUCCESS) {
		struct ibv_wc wc = {
			.wr_id = w->wr_id, .status = st, .opcode = IBV_WC_SEND,
			.qp_num = qp->qpx.qp_base.qp_num, .byte_len = len,
		};

		uroce_cqring_push(&uroce_cq_from_ib(qp->qpx.qp_base.send_cq)->r, &wc, st != IBV_WC_SUCCESS);
	}
}

static enum ibv_wc_status send_one(struct uroce_rc *rc, const struct uroce_wqe *w)
{
	struct uroce_qp *qp = rc->qp;
	const struct uroce_ah *ah = (const struct uroce_ah *)w->u.ud.ah;
	uint32_t len = uroce_rc_wqe_len(qp, w);
	struct uroce_pkt p = { 0 };
	uint8_t *pl;
	size_t n;
	long hl;
	unsigned pad;

	if (w->opcode != IBV_WR_SEND && w->opcode != IBV_WR_SEND_WITH_IMM)
		return IBV_WC_LOC_QP_OP_ERR;      /* IBA 9.8.1: UD carries SEND only */
	if (!ah)
		return IBV_WC_LOC_QP_OP_ERR;
	if (len > rc->mtu) {
		/* IBA C10-93.1.1: a UD message longer than the port MTU emits no packet and
		 * raises no error; rxe completes it successfully (docs/soft-roce-differences.md). */
		rc->st.drops[UROCE_RC_DROP_UD_TOO_LONG]++;
		return IBV_WC_SUCCESS;
	}
	p.bth.opcode = UROCE_OP_UD | (w->opcode == IBV_WR_SEND_WITH_IMM ? UROCE_OP_SEND_ONLY_IMM
									 : UROCE_OP_SEND_ONLY);
	p.bth.se = (w->send_flags & IBV_SEND_SOLICITED) != 0;
	p.bth.pkey = UROCE_PKEY_DEFAULT;
	p.bth.tver = UROCE_TVER;
	p.bth.dqpn = w->u.ud.remote_qpn & 0xFFFFFF;
	p.bth.psn = rc->req_psn;
	pad = uroce_pad_for(len);
	p.bth.padcnt = (uint8_t)pad;
	/* IBA 10.2.4 (C10-15): a WR Q_Key with the high-order bit set selects the QP's own
	 * Q_Key; so a non-privileged consumer cannot send a controlled Q_Key it was not given. */
	p.deth.qkey = (w->u.ud.remote_qkey & UROCE_QKEY_CONTROLLED) ? qp->attr.qkey : w->u.ud.remote_qkey;
	p.deth.srcqp = qp->qpx.qp_base.qp_num;
	if (w->opcode == IBV_WR_SEND_WITH_IMM)
		p.imm = be32toh(w->imm_data);
	hl = uroce_pkt_build_hdrs(rc->scratch, UROCE_RC_MAX_PKT, &p);
	if (hl < 0)
		return IBV_WC_LOC_QP_OP_ERR;
	pl = rc->scratch + hl;
	if (w->send_flags & IBV_SEND_INLINE) {
		memcpy(pl, uroce_rc_wqe_inline(qp, w), len);
	} else if (len) {
		enum uroce_rc_err e = uroce_rc_sge_copy(qp, w->sge, w->num_sge, 0, pl, len, false);

		if (e != UROCE_RC_ERR_NONE)
			return uroce_rc_err_table[e].status;
	}
	memset(pl + len, 0, pad + UROCE_ICRC_LEN);
	n = (size_t)hl + len + pad + UROCE_ICRC_LEN;
	rc->req_psn = (rc->req_psn + 1) & 0xFFFFFF;
	rc->st.tx_packets++;
	rc->st.tx_bytes += len;
	if (!uroce_ud_xmit || uroce_ud_xmit(qp, ah, rc->scratch, n) < 0)
		rc->st.drops[UROCE_RC_DROP_TX_FAIL]++;   /* unreliable: the datagram is lost */
	return IBV_WC_SUCCESS;
}

void uroce_ud_uc_sq_error(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	uroce_up_qp_sq_error_locked(qp);
	if (rc)
		rc->req_idx = rc->sent_idx = qp->sq.head;
}

void uroce_ud_requester(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (!rc)
		return;
	while (qp->sq.head != qp->sq.tail) {
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, qp->sq.head);
		enum ibv_wc_status st = send_one(rc, w);

		complete_send(qp, w, st, uroce_rc_wqe_len(qp, w));
		qp->sq.head++;
		if (st != IBV_WC_SUCCESS) {
			/* IBA 10.3.1: a send-queue completion error of a UD QP enters SQE. */
			uroce_ud_uc_sq_error(qp);
			return;
		}
	}
	rc->req_idx = rc->sent_idx = qp->sq.head;
}

/* ------------------------------------------------------------ responder */

static bool take_rwqe(struct uroce_rc *rc)
{
	struct uroce_qp *qp = rc->qp;
	int ret;

	if (qp->qpx.qp_base.srq) {
		ret = uroce_rc_srq_pop(qp, rc->resp_rwqe);
	} else {
		pthread_mutex_lock(&qp->rq.lock);
		ret = uroce_wq_pop(&qp->rq, rc->resp_rwqe);
		pthread_mutex_unlock(&qp->rq.lock);
	}
	return ret == 0;
}

void uroce_ud_input(struct uroce_qp *qp, const struct uroce_rxpkt *rp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	const struct uroce_pkt *pkt = &rp->pkt;
	enum ibv_qp_state s = qp->attr.qp_state;
	struct uroce_wqe *rw;
	uint8_t grh[UROCE_UD_GRH_LEN];
	uint64_t room = 0;
	struct ibv_wc wc = { 0 };
	enum uroce_rc_err e;

	if (!rc)
		return;
	if (uroce_opcode_transport(pkt->bth.opcode) != UROCE_TRANSPORT_UD ||
	    !(pkt->op->mask & UROCE_OPF_DETH)) {
		rc->st.drops[UROCE_RC_DROP_WRONG_TRANSPORT]++;
		return;
	}
	/* IBA 9.6.1.1: the P_Key is compared with the table entry at the QP's P_Key index
	 * (before the Q_Key, C9-44); a mismatch is dropped silently.  A multicast datagram is
	 * checked by every attached QP against its own entry. */
	if (!uroce_rc_pkey_ok(rc, pkt))
		return;
	rc->st.rx_packets++;
	rc->st.rx_bytes += pkt->payload_len;
	/* IBA 10.3.1: a UD QP receives in RTR, RTS, SQD and SQE. */
	if (s != IBV_QPS_RTR && s != IBV_QPS_RTS && s != IBV_QPS_SQD && s != IBV_QPS_SQE) {
		rc->st.drops[UROCE_RC_DROP_NOT_READY]++;
		return;
	}
	/* IBA 9.6.1.1 / C9-44: a Q_Key that does not match the QP's is silently dropped. */
	if (pkt->deth.qkey != qp->attr.qkey) {
		rc->st.drops[UROCE_RC_DROP_QKEY]++;
		return;
	}
	/* IBA 9.8.? (UD has no RNR): no receive WQE → the datagram is dropped. */
	if (!take_rwqe(rc)) {
		rc->st.drops[UROCE_RC_DROP_NO_RWQE]++;
		return;
	}
	rw = rc->resp_rwqe;
	for (uint32_t i = 0; i < rw->num_sge; i++)
		room += rw->sge[i].length;
	wc.wr_id = rw->wr_id;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	wc.opcode = IBV_WC_RECV;
	if (room < UROCE_UD_GRH_LEN + (uint64_t)pkt->payload_len) {
		/* IBA 10.8.3 / C11-?: the message does not fit the receive buffer: the WQE
		 * completes with a local length error (rxe: IB_WC_LOC_LEN_ERR), the QP stays up. */
		wc.status = IBV_WC_LOC_LEN_ERR;
		rc->st.drops[UROCE_RC_DROP_UD_RX_LEN]++;
		uroce_cqring_push(&uroce_cq_from_ib(qp->qpx.qp_base.recv_cq)->r, &wc, true);
		return;
	}
	uroce_ud_grh_area(rp, grh);
	e = uroce_rc_sge_copy(qp, rw->sge, rw->num_sge, 0, grh, UROCE_UD_GRH_LEN, true);
	if (e == UROCE_RC_ERR_NONE && pkt->payload_len)
		e = uroce_rc_sge_copy(qp, rw->sge, rw->num_sge, UROCE_UD_GRH_LEN,
				      (uint8_t *)(uintptr_t)pkt->payload, pkt->payload_len, true);
	wc.status = uroce_rc_err_table[e].status;
	if (wc.status == IBV_WC_SUCCESS) {
		wc.byte_len = UROCE_UD_GRH_LEN + pkt->payload_len;
		wc.src_qp = pkt->deth.srcqp;
		wc.wc_flags = IBV_WC_GRH;
		wc.pkey_index = qp->attr.pkey_index;   /* the entry the P_Key matched */
		wc.sl = uroce_ud_wc_sl(rp);
		if (pkt->op->mask & UROCE_OPF_IMM) {
			wc.wc_flags |= IBV_WC_WITH_IMM;
			wc.imm_data = htobe32(pkt->imm);
		}
	}
	uroce_cqring_push(&uroce_cq_from_ib(qp->qpx.qp_base.recv_cq)->r, &wc,
		      wc.status != IBV_WC_SUCCESS || pkt->bth.se);
}
