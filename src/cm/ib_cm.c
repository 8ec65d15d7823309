/* ib_cm.c — the IB Communication Manager (IBA vol. 1 ch. 12) as Linux 6.1's cm.c runs
 * it on RoCE: the connection and SIDR state machines, the messages on QP1, the
 * retransmission of REQ/REP/DREQ/SIDR_REQ, the MRA for a slow consumer, timewait, and
 * the tables that catch duplicate and stale messages.  docs/cm.md draws the states.
 *
 * The state machines are the table ib_fsm below: for each input (a message received,
 * a timer, a call of the rdma_cm layer) and each state, the next state and what to do.
 * The code around it only matches messages to connections, builds MADs and runs the
 * actions, so a transition is written in exactly one place.
 *
 * Matching (IBA 12.6, cm.c): a connection is found by its local comm ID (the field the
 * peer calls "remote"), and the peer's ID must be the one recorded (0 before the REP).
 * The remote-ID table, keyed by (remote comm ID, remote CA GUID), finds a duplicate
 * REQ or REP; the remote-QPN table, keyed by (remote QPN, remote CA GUID), finds a
 * stale connection (IBA 12.4.1, 12.9.8.3.1).  Both entries go when a connection
 * enters timewait or idle, as in Linux.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_priv.h"
#include "wire/wire.h"

/* ---- the state machines --------------------------------------------------------------- */

enum ib_input {
	IN_REP,             /* REP for our REQ */
	IN_RTU,
	IN_REJ,
	IN_MRA_REQ,         /* MRA, "message MRAed" = REQ */
	IN_MRA_REP,
	IN_DREQ,            /* DREQ naming our QPN */
	IN_DREP,
	IN_SIDR_REP,
	IN_DUP_REQ,         /* a REQ matching a connection in the remote-ID table */
	IN_DUP_REP,         /* a REP for a connection that already has its peer's ID */
	IN_SEND_TIMEOUT,    /* retries of the outstanding MAD ran out */
	IN_TIMEWAIT_END,
	U_REP,              /* the rdma_cm layer sends ... */
	U_RTU,
	U_REJ,
	U_DREQ,
	U_DREP,
	U_MRA,              /* arms the delayed MRA */
	U_COMM_EST,
	U_SIDR_REP,
	U_DESTROY,
	IN_N
};

/* Actions, run in this order. */
enum {
	A_CANCEL     = 1 << 0,  /* stop retransmitting the outstanding MAD */
	A_TW_STALE   = 1 << 1,  /* REJ: to timewait if its reason is "stale", else idle */
	A_EVENT      = 1 << 2,  /* tell the rdma_cm layer */
	A_RTU_AGAIN  = 1 << 3,  /* answer with the RTU sent before */
	A_MRA_AGAIN  = 1 << 4,  /* answer with the (delayed) MRA */
	A_DREP_AGAIN = 1 << 5,  /* answer with a DREP */
	A_DUP        = 1 << 6,  /* count a duplicate */
	A_REJ_STALE  = 1 << 7,  /* answer with REJ stale connection */
	A_SEND_REJ_TO = 1 << 8, /* destroy: REJ Timeout with our GUID */
	A_SEND_REJ   = 1 << 9,  /* destroy: REJ consumer defined */
	A_SEND_DREQ  = 1 << 10, /* destroy: one DREQ, no retransmission */
	A_SEND_DREP  = 1 << 11, /* destroy: DREP */
	A_SEND_SIDR_REJ = 1 << 12, /* destroy: SIDR_REP reject */
	A_MODIFY     = 1 << 13, /* MRA: the outstanding MAD waits the MRA's time */
	A_OK         = 1 << 14, /* allowed, nothing else to do */
};

/* next: the state to enter, S_SAME to stay.  A zero entry is "not in this state". */
#define S_SAME 0xff
struct ib_trans {
	uint8_t next;
	uint16_t act;
};
#define T(n, a) { IB_##n, (a) | A_OK }
#define STAY(a) { S_SAME, (a) | A_OK }

static const struct ib_trans ib_fsm[IN_N][IB_NSTATES] = {
	/* Active: the REP answers our REQ (12.9.6). */
	[IN_REP] = {
		[IB_REQ_SENT]     = T(REP_RCVD, A_CANCEL | A_EVENT),
		[IB_MRA_REQ_RCVD] = T(REP_RCVD, A_CANCEL | A_EVENT),
	},
	[IN_DUP_REP] = {
		[IB_ESTABLISHED]   = STAY(A_RTU_AGAIN | A_DUP),
		[IB_MRA_REP_SENT]  = STAY(A_MRA_AGAIN | A_DUP),
		[IB_REP_RCVD]      = STAY(A_DUP),
	},
	/* Passive: the RTU ends the handshake. */
	[IN_RTU] = {
		[IB_REP_SENT]     = T(ESTABLISHED, A_CANCEL | A_EVENT),
		[IB_MRA_REP_RCVD] = T(ESTABLISHED, A_CANCEL | A_EVENT),
	},
	[IN_REJ] = {
		[IB_REQ_SENT]     = T(IDLE, A_CANCEL | A_TW_STALE | A_EVENT),
		[IB_MRA_REQ_RCVD] = T(IDLE, A_CANCEL | A_TW_STALE | A_EVENT),
		[IB_REP_SENT]     = T(IDLE, A_CANCEL | A_TW_STALE | A_EVENT),
		[IB_MRA_REP_RCVD] = T(IDLE, A_CANCEL | A_TW_STALE | A_EVENT),
		[IB_REQ_RCVD]     = T(IDLE, A_TW_STALE | A_EVENT),
		[IB_MRA_REQ_SENT] = T(IDLE, A_TW_STALE | A_EVENT),
		[IB_DREQ_SENT]    = T(TIMEWAIT, A_CANCEL | A_EVENT),
		[IB_REP_RCVD]     = T(TIMEWAIT, A_EVENT),
		[IB_MRA_REP_SENT] = T(TIMEWAIT, A_EVENT),
		[IB_ESTABLISHED]  = T(TIMEWAIT, A_EVENT),
	},
	/* MRA: the sender of the REQ / REP waits longer (12.6.6). */
	[IN_MRA_REQ] = {
		[IB_REQ_SENT]     = T(MRA_REQ_RCVD, A_MODIFY | A_EVENT),
		[IB_MRA_REQ_RCVD] = STAY(A_DUP),
	},
	[IN_MRA_REP] = {
		[IB_REP_SENT]     = T(MRA_REP_RCVD, A_MODIFY | A_EVENT),
		[IB_MRA_REP_RCVD] = STAY(A_DUP),
	},
	/* DREQ (12.9.8.4); a DREQ in REP_SENT means our RTU was lost. */
	[IN_DREQ] = {
		[IB_REP_SENT]     = T(DREQ_RCVD, A_CANCEL | A_EVENT),
		[IB_MRA_REP_RCVD] = T(DREQ_RCVD, A_CANCEL | A_EVENT),
		[IB_DREQ_SENT]    = T(DREQ_RCVD, A_CANCEL | A_EVENT),
		[IB_ESTABLISHED]  = T(DREQ_RCVD, A_EVENT),
		[IB_TIMEWAIT]     = STAY(A_DREP_AGAIN | A_DUP),
		[IB_DREQ_RCVD]    = STAY(A_DUP),
	},
	[IN_DREP] = {
		[IB_DREQ_SENT]    = T(TIMEWAIT, A_CANCEL | A_EVENT),
		[IB_DREQ_RCVD]    = T(TIMEWAIT, A_CANCEL | A_EVENT),
	},
	[IN_SIDR_REP] = {
		[IB_SIDR_REQ_SENT] = T(IDLE, A_CANCEL | A_EVENT),
	},
	/* A REQ we already have: quiet while the consumer decides, MRA once it was told. */
	[IN_DUP_REQ] = {
		[IB_REQ_RCVD]     = STAY(A_DUP),
		[IB_MRA_REQ_SENT] = STAY(A_MRA_AGAIN | A_DUP),
		[IB_TIMEWAIT]     = STAY(A_REJ_STALE | A_DUP),
		[IB_REP_SENT]     = STAY(A_DUP),
		[IB_MRA_REP_RCVD] = STAY(A_DUP),
		[IB_ESTABLISHED]  = STAY(A_DUP),
	},
	[IN_SEND_TIMEOUT] = {
		[IB_REQ_SENT]      = T(IDLE, A_EVENT),
		[IB_MRA_REQ_RCVD]  = T(IDLE, A_EVENT),
		[IB_REP_SENT]      = T(IDLE, A_EVENT),
		[IB_MRA_REP_RCVD]  = T(IDLE, A_EVENT),
		[IB_DREQ_SENT]     = T(TIMEWAIT, A_EVENT),
		[IB_SIDR_REQ_SENT] = T(IDLE, A_EVENT),
	},
	[IN_TIMEWAIT_END] = {
		[IB_TIMEWAIT] = T(IDLE, A_EVENT),
	},
	[U_REP] = {
		[IB_REQ_RCVD]     = T(REP_SENT, 0),
		[IB_MRA_REQ_SENT] = T(REP_SENT, 0),
	},
	[U_RTU] = {
		[IB_REP_RCVD]     = T(ESTABLISHED, 0),
		[IB_MRA_REP_SENT] = T(ESTABLISHED, 0),
	},
	[U_REJ] = {
		[IB_REQ_SENT]     = T(IDLE, A_CANCEL),
		[IB_MRA_REQ_RCVD] = T(IDLE, A_CANCEL),
		[IB_REQ_RCVD]     = T(IDLE, 0),
		[IB_MRA_REQ_SENT] = T(IDLE, 0),
		[IB_REP_RCVD]     = T(IDLE, 0),
		[IB_MRA_REP_SENT] = T(IDLE, 0),
		[IB_REP_SENT]     = T(TIMEWAIT, A_CANCEL),
		[IB_MRA_REP_RCVD] = T(TIMEWAIT, A_CANCEL),
	},
	[U_DREQ] = {
		[IB_ESTABLISHED] = T(DREQ_SENT, 0),
	},
	[U_DREP] = {
		[IB_DREQ_RCVD] = T(TIMEWAIT, 0),
	},
	[U_MRA] = {
		[IB_REQ_RCVD] = T(MRA_REQ_SENT, 0),
		[IB_REP_RCVD] = T(MRA_REP_SENT, 0),
	},
	[U_COMM_EST] = {
		[IB_REP_SENT]     = T(ESTABLISHED, A_CANCEL | A_EVENT),
		[IB_MRA_REP_RCVD] = T(ESTABLISHED, A_CANCEL | A_EVENT),
	},
	[U_SIDR_REP] = {
		[IB_SIDR_REQ_RCVD] = T(IDLE, 0),
	},
	/* What a dying id leaves on the wire (cm.c cm_destroy_id). */
	[U_DESTROY] = {
		[IB_IDLE]          = STAY(0),
		[IB_TIMEWAIT]      = STAY(0),
		[IB_SIDR_REQ_SENT] = T(IDLE, A_CANCEL),
		[IB_SIDR_REQ_RCVD] = T(IDLE, A_SEND_SIDR_REJ),
		[IB_REQ_SENT]      = T(IDLE, A_CANCEL | A_SEND_REJ_TO),
		[IB_MRA_REQ_RCVD]  = T(IDLE, A_CANCEL | A_SEND_REJ_TO),
		[IB_REQ_RCVD]      = T(IDLE, A_SEND_REJ),
		[IB_MRA_REQ_SENT]  = T(IDLE, A_SEND_REJ),
		[IB_REP_RCVD]      = T(IDLE, A_SEND_REJ),
		[IB_MRA_REP_SENT]  = T(IDLE, A_SEND_REJ),
		[IB_REP_SENT]      = T(TIMEWAIT, A_CANCEL | A_SEND_REJ),
		[IB_MRA_REP_RCVD]  = T(TIMEWAIT, A_CANCEL | A_SEND_REJ),
		[IB_ESTABLISHED]   = T(TIMEWAIT, A_SEND_DREQ),
		[IB_DREQ_SENT]     = T(TIMEWAIT, A_CANCEL),
		[IB_DREQ_RCVD]     = T(TIMEWAIT, A_SEND_DREP),
	},
};

static const struct ib_trans *fsm(const struct cm_conn *c, enum ib_input in)
{
	const struct ib_trans *t = &ib_fsm[in][c->state];

	return t->act ? t : NULL;
}

/* ---- connections ----------------------------------------------------------------------- */

static uint64_t remote_key(uint32_t id, uint64_t guid) { return cm_hash64(id, guid); }
static uint64_t qpn_key(uint32_t qpn, uint64_t guid) { return cm_hash64(qpn | 1ull << 32, guid); }
static uint64_t sidr_key(uint32_t id, const uint8_t gid[16])
{
	uint64_t a, b;

	memcpy(&a, gid, 8);
	memcpy(&b, gid + 8, 8);
	return cm_hash64(id, cm_hash64(a, b));
}

static struct cm_conn *find_local(const struct uroce_cm *cm, uint32_t local_id)
{
	for (struct cm_hnode *n = cm_htab_first(&cm->local_ids, local_id); n;
	     n = cm_htab_next(n, local_id)) {
		struct cm_conn *c = cm_container_of(n, struct cm_conn, by_local);

		if (c->local_id == local_id)
			return c;
	}
	return NULL;
}

/* cm.c cm_acquire_id(): the local ID and the peer's ID as recorded. */
static struct cm_conn *acquire(const struct uroce_cm *cm, uint32_t local_id, uint32_t remote_id)
{
	struct cm_conn *c = find_local(cm, local_id);

	return c && c->remote_id == remote_id ? c : NULL;
}

static struct cm_conn *find_remote(const struct uroce_cm *cm, uint32_t remote_id, uint64_t guid)
{
	uint64_t k = remote_key(remote_id, guid);

	for (struct cm_hnode *n = cm_htab_first(&cm->remote_ids, k); n; n = cm_htab_next(n, k)) {
		struct cm_conn *c = cm_container_of(n, struct cm_conn, by_remote);

		if (c->remote_id == remote_id && c->remote_guid == guid)
			return c;
	}
	return NULL;
}

static struct cm_conn *find_qpn(const struct uroce_cm *cm, uint32_t qpn, uint64_t guid)
{
	uint64_t k = qpn_key(qpn, guid);

	for (struct cm_hnode *n = cm_htab_first(&cm->remote_qpns, k); n; n = cm_htab_next(n, k)) {
		struct cm_conn *c = cm_container_of(n, struct cm_conn, by_qpn);

		if (c->remote_qpn == qpn && c->remote_guid == guid)
			return c;
	}
	return NULL;
}

static struct cm_conn *find_sidr(const struct uroce_cm *cm, uint32_t id, const uint8_t src[16])
{
	uint64_t k = sidr_key(id, src);

	for (struct cm_hnode *n = cm_htab_first(&cm->sidr_reqs, k); n; n = cm_htab_next(n, k)) {
		struct cm_conn *c = cm_container_of(n, struct cm_conn, by_sidr);

		if (c->remote_id == id && !memcmp(c->sidr_src, src, 16))
			return c;
	}
	return NULL;
}

/* Comm IDs (cm.c cm_alloc_id_priv): a cyclic index XORed with a random operand, its
 * host-order bytes being the wire bytes — so consecutive IDs differ in the first wire
 * byte, as Linux's do [cap].  Unique among the live connections of the daemon, so per
 * device; 0 is never used (a REJ's remote ID 0 means "none"). */
static int alloc_comm_id(struct uroce_cm *cm, uint32_t *out)
{
	for (unsigned tries = 0; tries < 1u << 20; tries++) {
		uint32_t idx = cm->comm_next++;
		uint32_t id = __builtin_bswap32(idx ^ cm->comm_operand);

		if (id && !find_local(cm, id)) {
			*out = id;
			return 0;
		}
	}
	return -ENOSPC;
}

uint64_t ib_form_tid(const struct uroce_cm *cm, uint32_t local_id)
{
	/* cm.c cm_form_tid(): the agent's hi_tid, then the local ID as a host integer —
	 * byte-reversed against the ID field on a little-endian host [cap]. */
	return (uint64_t)cm->cfg.hi_tid << 32 | __builtin_bswap32(local_id);
}

struct cm_conn *ib_conn_new(struct uroce_cm *cm, uint32_t dev_id)
{
	const struct cm_devent *d = cm_dev(cm, dev_id);
	struct cm_conn *c = calloc(1, sizeof(*c));

	if (!c || !d || alloc_comm_id(cm, &c->local_id)) {
		free(c);
		return NULL;
	}
	c->dev_id = dev_id;
	c->uid = -1;
	c->local_guid = be64toh(d->d.info.node_guid);
	c->state = IB_IDLE;
	cm_timer_init(&c->send_timer, CM_T_SEND, c);
	cm_timer_init(&c->tw_timer, CM_T_TIMEWAIT, c);
	cm_timer_init(&c->hold_timer, CM_T_HOLD, c);
	cm_htab_add(&cm->local_ids, &c->by_local, c->local_id);
	cm_list_add_tail(&cm->conns, &c->all);
	return c;
}

static void remove_remote(struct uroce_cm *cm, struct cm_conn *c)
{
	cm_htab_del(&cm->remote_ids, &c->by_remote);
	cm_htab_del(&cm->remote_qpns, &c->by_qpn);
	cm_htab_del(&cm->sidr_reqs, &c->by_sidr);
}

static struct cm_held *unhold(struct uroce_cm *cm, struct cm_conn *c);

void ib_conn_free(struct uroce_cm *cm, struct cm_conn *c)
{
	free(unhold(cm, c));
	cm_timer_cancel(&cm->timers, &c->send_timer);
	cm_timer_cancel(&cm->timers, &c->tw_timer);
	remove_remote(cm, c);
	cm_htab_del(&cm->local_ids, &c->by_local);
	cm_list_del(&c->all);
	if (c->id && c->id->conn == c)
		c->id->conn = NULL;
	free(c);
}

/* A connection nobody refers to and nothing waits on goes away. */
static void maybe_free(struct uroce_cm *cm, struct cm_conn *c)
{
	if (!c->id && c->state == IB_IDLE && !cm_timer_armed(&c->tw_timer))
		ib_conn_free(cm, c);
}

/* ---- sending ------------------------------------------------------------------------------ */

static void tx_raw(struct uroce_cm *cm, uint32_t dev_id, const uint8_t sgid[16], const uint8_t dgid[16],
		   uint8_t tclass, uint8_t hop, const uint8_t mad[UROCE_MAD_SIZE], uint16_t attr,
		   uint16_t reason, int64_t uid)
{
	struct uroce_cm_tx tx;

	memset(&tx, 0, sizeof(tx));
	tx.dev_id = dev_id;
	memcpy(tx.sgid, sgid, 16);
	memcpy(tx.dgid, dgid, 16);
	tx.traffic_class = tclass;
	tx.hop_limit = hop;
	tx.uid = uid;
	memcpy(tx.mad, mad, UROCE_MAD_SIZE);
	cm->stats.mad_sent[cm_attr_slot(attr)]++;
	if (attr == UROCE_CM_ATTR_REJ && reason < 64)
		cm->stats.rej_sent[reason]++;
	if (cm->ops.send_mad)
		cm->ops.send_mad(cm->ctx, &tx);
}

static int encode(const struct uroce_cm_msg *m, uint8_t out[UROCE_MAD_SIZE])
{
	int r = uroce_cm_encode(m, out, UROCE_MAD_SIZE);

	return r == (int)UROCE_MAD_SIZE ? 0 : (r < 0 ? r : -EINVAL);
}

static uint16_t rej_reason_of(const struct uroce_cm_msg *m)
{
	return m->hdr.attr_id == UROCE_CM_ATTR_REJ ? m->u.rej.reason : 0;
}

/* A message of connection c, along its address vector. */
static int tx_conn(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_msg *m)
{
	uint8_t mad[UROCE_MAD_SIZE];
	int r = encode(m, mad);

	if (r)
		return r;
	tx_raw(cm, c->dev_id, c->av.sgid, c->av.dgid, c->av.traffic_class, c->av.hop_limit, mad,
	       m->hdr.attr_id, rej_reason_of(m), c->uid);
	return 0;
}

/* A message answering a received one: back to where it came from (@uid: the owner of
 * the connection it belongs to, -1 for none). */
static void tx_response(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *m,
			int64_t uid)
{
	uint8_t mad[UROCE_MAD_SIZE];

	if (!encode(m, mad))
		tx_raw(cm, rx->dev_id, rx->dgid, rx->sgid, 0, 0, mad, m->hdr.attr_id, rej_reason_of(m),
		       uid);
}

/* Send m and keep it for retransmission (the MAD layer's retries, mad.c): the same
 * MAD again every timeout_ms, max_cm_retries times, until the answer cancels it. */
static int tx_retrans(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_msg *m,
		      uint32_t timeout_ms)
{
	int r = encode(m, c->msg);

	if (r)
		return r;
	c->msg_active = true;
	c->msg_attr = m->hdr.attr_id;
	c->msg_timeout_ms = timeout_ms;
	c->retries_left = c->max_cm_retries;
	tx_raw(cm, c->dev_id, c->av.sgid, c->av.dgid, c->av.traffic_class, c->av.hop_limit, c->msg,
	       c->msg_attr, 0, c->uid);
	return cm_timer_arm(&cm->timers, &c->send_timer, cm->now + timeout_ms);
}

static void cancel_msg(struct uroce_cm *cm, struct cm_conn *c)
{
	c->msg_active = false;
	cm_timer_cancel(&cm->timers, &c->send_timer);
}

static void set_priv(struct cm_conn *c, const uint8_t *priv, uint8_t len)
{
	c->priv_len = priv ? len : 0;
	if (c->priv_len)
		memcpy(c->priv, priv, c->priv_len);
}

static void enter_timewait(struct uroce_cm *cm, struct cm_conn *c)
{
	/* cm.c cm_enter_timewait(): out of the remote tables; wait the ACK timeout. */
	remove_remote(cm, c);
	c->state = IB_TIMEWAIT;
	cm_timer_arm(&cm->timers, &c->tw_timer, cm->now + cm_iba_time_ms(c->av.timeout));
}

static void reset_to_idle(struct uroce_cm *cm, struct cm_conn *c)
{
	remove_remote(cm, c);
	c->state = IB_IDLE;
}

static void enter(struct uroce_cm *cm, struct cm_conn *c, uint8_t next)
{
	if (next == S_SAME || next == c->state)
		return;
	if (next == IB_TIMEWAIT)
		enter_timewait(cm, c);
	else if (next == IB_IDLE)
		reset_to_idle(cm, c);
	else
		c->state = next;
}

/* ---- formatting (cm.c cm_format_*) --------------------------------------------------- */

void ib_format_req(const struct uroce_cm *cm, const struct cm_conn *c,
		   const struct ib_req_param *p, struct uroce_cm_msg *m)
{
	struct uroce_cm_req *r = &m->u.req;
	const struct cm_path *path = p->path;

	memset(m, 0, sizeof(*m));
	uroce_cm_hdr_init(&m->hdr, UROCE_CM_ATTR_REQ, ib_form_tid(cm, c->local_id));
	r->local_comm_id = c->local_id;
	r->service_id = p->service_id;
	r->local_ca_guid = c->local_guid;
	r->local_qpn = p->qpn & 0xFFFFFF;
	r->responder_resources = p->responder_resources;
	r->initiator_depth = p->initiator_depth;
	r->remote_cm_response_timeout = p->remote_cm_response_timeout & 0x1f;
	r->transport_service_type = p->qp_type == IBV_QPT_UC ? 1 : 0;
	r->end_to_end_flow_control = p->flow_control & 1;
	r->starting_psn = p->starting_psn & 0xFFFFFF;
	r->local_cm_response_timeout = p->local_cm_response_timeout & 0x1f;
	r->retry_count = p->retry_count & 7;
	r->pkey = path->pkey;
	r->path_mtu = path->mtu & 0xf;
	r->rnr_retry_count = p->rnr_retry_count & 7;
	r->max_cm_retries = p->max_cm_retries & 0xf;
	r->srq = p->srq & 1;
	memcpy(r->primary.local_gid, path->sgid, 16);
	memcpy(r->primary.remote_gid, path->dgid, 16);
	/* RoCE has no LIDs: a routed path (hop limit > 1) names the permissive LID, as
	 * Linux does "until there's a way to obtain remote LID info"; a local one the
	 * path's (0) and the subnet-local bit. */
	if (path->hop_limit > 1) {
		r->primary.local_lid = 0xFFFF;
		r->primary.remote_lid = 0xFFFF;
	}
	r->primary.subnet_local = path->hop_limit <= 1;
	r->primary.flow_label = path->flow_label & 0xFFFFF;
	r->primary.packet_rate = path->rate & 0x3f;
	r->primary.traffic_class = path->traffic_class;
	r->primary.hop_limit = path->hop_limit;
	r->primary.sl = path->sl & 0xf;
	r->primary.local_ack_timeout = cm_ack_timeout(cm->cfg.ack_delay, path->packet_life_time);
	if (p->priv && p->priv_len)
		memcpy(r->private_data, p->priv, p->priv_len);
}

static void format_rej(struct cm_conn *c, uint8_t state, uint16_t reason, const uint8_t *ari,
		       uint8_t ari_len, const uint8_t *priv, uint8_t len, struct uroce_cm_msg *m)
{
	struct uroce_cm_rej *j = &m->u.rej;

	memset(m, 0, sizeof(*m));
	uroce_cm_hdr_init(&m->hdr, UROCE_CM_ATTR_REJ, c->tid);
	j->remote_comm_id = c->remote_id;
	/* IBA 12.6.7: which message is rejected; before our own ID reached the peer (REQ
	 * received, not yet answered) the local ID is 0. */
	switch (state) {
	case IB_REQ_RCVD:
		j->local_comm_id = 0;
		j->message_rejected = UROCE_CM_REJ_MSG_REQ;
		break;
	case IB_MRA_REQ_SENT:
		j->local_comm_id = c->local_id;
		j->message_rejected = UROCE_CM_REJ_MSG_REQ;
		break;
	case IB_REP_RCVD:
	case IB_MRA_REP_SENT:
		j->local_comm_id = c->local_id;
		j->message_rejected = UROCE_CM_REJ_MSG_REP;
		break;
	default:
		j->local_comm_id = c->local_id;
		j->message_rejected = UROCE_CM_REJ_MSG_OTHER;
		break;
	}
	j->reason = reason;
	if (ari && ari_len) {
		j->reject_info_length = ari_len;
		memcpy(j->ari, ari, ari_len);
	}
	if (priv && len)
		memcpy(j->private_data, priv, len);
}

static void format_mra(const struct cm_conn *c, uint8_t what, struct uroce_cm_msg *m)
{
	memset(m, 0, sizeof(*m));
	uroce_cm_hdr_init(&m->hdr, UROCE_CM_ATTR_MRA, c->tid);
	m->u.mra.message_mraed = what;
	m->u.mra.local_comm_id = c->local_id;
	m->u.mra.remote_comm_id = c->remote_id;
	m->u.mra.service_timeout = c->service_timeout & 0x1f;
	if (c->priv_len)
		memcpy(m->u.mra.private_data, c->priv,
		       c->priv_len < UROCE_CM_MRA_PRIV ? c->priv_len : UROCE_CM_MRA_PRIV);
}

static void format_rtu(const struct cm_conn *c, struct uroce_cm_msg *m)
{
	memset(m, 0, sizeof(*m));
	uroce_cm_hdr_init(&m->hdr, UROCE_CM_ATTR_RTU, c->tid);
	m->u.rtu.local_comm_id = c->local_id;
	m->u.rtu.remote_comm_id = c->remote_id;
	if (c->priv_len)
		memcpy(m->u.rtu.private_data, c->priv, c->priv_len);
}

static void format_drep(const struct cm_conn *c, struct uroce_cm_msg *m)
{
	memset(m, 0, sizeof(*m));
	uroce_cm_hdr_init(&m->hdr, UROCE_CM_ATTR_DREP, c->tid);
	m->u.drep.local_comm_id = c->local_id;
	m->u.drep.remote_comm_id = c->remote_id;
	if (c->priv_len)
		memcpy(m->u.drep.private_data, c->priv, c->priv_len);
}

/* ---- calls of the rdma_cm layer ---------------------------------------------------------- */

int ib_send_req(struct uroce_cm *cm, struct cm_conn *c, const struct ib_req_param *p)
{
	struct uroce_cm_msg m;
	const struct cm_devent *d = cm_dev(cm, c->dev_id);
	int r;

	if (c->state != IB_IDLE || !d)
		return -EINVAL;
	if (p->priv_len > UROCE_CM_REQ_PRIV)
		return -EINVAL;
	/* The connection's address vector and timers (cm.c ib_send_cm_req). */
	memset(&c->av, 0, sizeof(c->av));
	memcpy(c->av.sgid, p->path->sgid, 16);
	memcpy(c->av.dgid, p->path->dgid, 16);
	c->av.flow_label = p->path->flow_label;
	c->av.hop_limit = p->path->hop_limit;
	c->av.traffic_class = p->path->traffic_class;
	c->av.sl = p->path->sl;
	c->av.rate = p->path->rate;
	c->av.timeout = (uint8_t)(p->path->packet_life_time + 1);
	c->service_id = p->service_id;
	c->timeout_ms = (uint32_t)(cm_iba_time_ms(p->path->packet_life_time) * 2 +
				   cm_iba_time_ms(p->remote_cm_response_timeout));
	c->max_cm_retries = p->max_cm_retries;
	c->initiator_depth = p->initiator_depth;
	c->responder_resources = p->responder_resources;
	c->retry_count = p->retry_count;
	c->path_mtu = p->path->mtu;
	c->pkey = p->path->pkey;
	c->qp_type = p->qp_type;
	c->flow_control = p->flow_control;
	c->srq = p->srq;
	c->passive = false;
	ib_format_req(cm, c, p, &m);
	c->tid = m.hdr.tid;
	c->local_qpn = m.u.req.local_qpn;
	c->rq_psn = m.u.req.starting_psn;
	c->msg_state = IB_REQ_SENT;
	r = tx_retrans(cm, c, &m, c->timeout_ms);
	if (r)
		return r;
	c->state = IB_REQ_SENT;
	return 0;
}

int ib_send_rep(struct uroce_cm *cm, struct cm_conn *c, const struct ib_rep_param *p)
{
	struct uroce_cm_msg m;
	struct uroce_cm_rep *r = &m.u.rep;
	const struct ib_trans *t = fsm(c, U_REP);
	int err;

	if (!t || p->priv_len > UROCE_CM_REP_PRIV)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REP, c->tid);
	r->local_comm_id = c->local_id;
	r->remote_comm_id = c->remote_id;
	r->starting_psn = p->starting_psn & 0xFFFFFF;
	r->responder_resources = p->responder_resources;
	r->target_ack_delay = cm->cfg.ack_delay & 0x1f;
	r->failover_accepted = 0;
	r->rnr_retry_count = p->rnr_retry_count & 7;
	r->local_ca_guid = c->local_guid;
	r->initiator_depth = p->initiator_depth;
	r->end_to_end_flow_control = p->flow_control & 1;
	r->srq = p->srq & 1;
	r->local_qpn = p->qpn & 0xFFFFFF;
	if (p->priv && p->priv_len)
		memcpy(r->private_data, p->priv, p->priv_len);
	c->msg_state = IB_REP_SENT;
	err = tx_retrans(cm, c, &m, c->timeout_ms);
	if (err)
		return err;
	enter(cm, c, t->next);
	c->initiator_depth = p->initiator_depth;
	c->responder_resources = p->responder_resources;
	c->rq_psn = r->starting_psn;
	c->local_qpn = r->local_qpn;
	c->srq = p->srq;
	return 0;
}

int ib_send_rtu(struct uroce_cm *cm, struct cm_conn *c, const uint8_t *priv, uint8_t len)
{
	struct uroce_cm_msg m;
	const struct ib_trans *t = fsm(c, U_RTU);

	if (!t || len > UROCE_CM_RTU_PRIV)
		return -EINVAL;
	set_priv(c, priv, len);
	format_rtu(c, &m);
	if (tx_conn(cm, c, &m))
		return -EINVAL;
	enter(cm, c, t->next);
	return 0;
}

int ib_send_rej(struct uroce_cm *cm, struct cm_conn *c, uint16_t reason, const uint8_t *ari,
		uint8_t ari_len, const uint8_t *priv, uint8_t len)
{
	struct uroce_cm_msg m;
	const struct ib_trans *t = fsm(c, U_REJ);
	uint8_t state = c->state;

	if (!t || len > UROCE_CM_REJ_PRIV || ari_len > UROCE_CM_ARI_MAX)
		return -EINVAL;
	if (t->act & A_CANCEL)
		cancel_msg(cm, c);
	enter(cm, c, t->next);
	format_rej(c, state, reason, ari, ari_len, priv, len, &m);
	return tx_conn(cm, c, &m);
}

int ib_send_dreq(struct uroce_cm *cm, struct cm_conn *c, const uint8_t *priv, uint8_t len)
{
	struct uroce_cm_msg m;
	const struct ib_trans *t = fsm(c, U_DREQ);
	int r;

	if (!t || len > UROCE_CM_DREQ_PRIV)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	/* A fresh TID from this side's local ID (cm.c cm_format_dreq). */
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_DREQ, ib_form_tid(cm, c->local_id));
	m.u.dreq.local_comm_id = c->local_id;
	m.u.dreq.remote_comm_id = c->remote_id;
	m.u.dreq.remote_qpn_eecn = c->remote_qpn & 0xFFFFFF;
	if (priv && len)
		memcpy(m.u.dreq.private_data, priv, len);
	c->msg_state = IB_DREQ_SENT;
	r = tx_retrans(cm, c, &m, c->timeout_ms);
	if (r) {
		enter_timewait(cm, c);
		return r;
	}
	enter(cm, c, t->next);
	return 0;
}

int ib_send_drep(struct uroce_cm *cm, struct cm_conn *c, const uint8_t *priv, uint8_t len)
{
	struct uroce_cm_msg m;
	const struct ib_trans *t = fsm(c, U_DREP);

	if (!t || len > UROCE_CM_DREP_PRIV)
		return -EINVAL;
	set_priv(c, priv, len);
	enter(cm, c, t->next);
	format_drep(c, &m);
	return tx_conn(cm, c, &m);
}

int ib_send_mra_delayed(struct uroce_cm *cm, struct cm_conn *c, uint8_t service_timeout)
{
	const struct ib_trans *t = fsm(c, U_MRA);

	if (!t)
		return -EINVAL;
	/* Nothing on the wire now: the MRA answers a duplicate REQ / REP (cm.c
	 * ib_send_cm_mra with IB_CM_MRA_FLAG_DELAY, which rdma_cm always uses). */
	enter(cm, c, t->next);
	c->service_timeout = service_timeout & 0x1f;
	set_priv(c, NULL, 0);
	return 0;
}

int ib_establish(struct uroce_cm *cm, struct cm_conn *c)
{
	const struct ib_trans *t = fsm(c, U_COMM_EST);
	struct cm_ib_ev ev = { .type = CM_EV_USER_ESTABLISHED };

	if (c->state == IB_ESTABLISHED)
		return -EISCONN;
	if (!t)
		return -EINVAL;
	cancel_msg(cm, c);
	enter(cm, c, t->next);
	cma_ib_event(cm, c, &ev);
	return 0;
}

int ib_send_sidr_req(struct uroce_cm *cm, struct cm_conn *c, const struct ib_sidr_req_param *p)
{
	struct uroce_cm_msg m;
	int r;

	if (c->state != IB_IDLE || p->priv_len > UROCE_CM_SIDR_REQ_PRIV)
		return -EINVAL;
	memset(&c->av, 0, sizeof(c->av));
	memcpy(c->av.sgid, p->path->sgid, 16);
	memcpy(c->av.dgid, p->path->dgid, 16);
	c->av.flow_label = p->path->flow_label;
	c->av.hop_limit = p->path->hop_limit;
	c->av.traffic_class = p->path->traffic_class;
	c->av.sl = p->path->sl;
	c->av.timeout = (uint8_t)(p->path->packet_life_time + 1);
	c->service_id = p->service_id;
	c->timeout_ms = p->timeout_ms;
	c->max_cm_retries = p->max_cm_retries;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_SIDR_REQ, ib_form_tid(cm, c->local_id));
	m.u.sidr_req.request_id = c->local_id;
	m.u.sidr_req.pkey = p->path->pkey;
	m.u.sidr_req.service_id = p->service_id;
	if (p->priv && p->priv_len)
		memcpy(m.u.sidr_req.private_data, p->priv, p->priv_len);
	c->tid = m.hdr.tid;
	c->msg_state = IB_SIDR_REQ_SENT;
	r = tx_retrans(cm, c, &m, c->timeout_ms);
	if (r)
		return r;
	c->state = IB_SIDR_REQ_SENT;
	return 0;
}

int ib_send_sidr_rep(struct uroce_cm *cm, struct cm_conn *c, uint8_t status, uint32_t qpn,
		     uint32_t qkey, const uint8_t *priv, uint8_t len)
{
	struct uroce_cm_msg m;
	const struct ib_trans *t = fsm(c, U_SIDR_REP);
	int r;

	if (!t || len > UROCE_CM_SIDR_REP_PRIV)
		return -EINVAL;
	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_SIDR_REP, c->tid);
	m.u.sidr_rep.request_id = c->remote_id;
	m.u.sidr_rep.status = status;
	m.u.sidr_rep.qpn = qpn & 0xFFFFFF;
	m.u.sidr_rep.service_id = c->service_id;
	m.u.sidr_rep.qkey = qkey;
	if (priv && len)
		memcpy(m.u.sidr_rep.private_data, priv, len);
	r = tx_conn(cm, c, &m);
	enter(cm, c, t->next);
	return r;
}

void ib_conn_release(struct uroce_cm *cm, struct cm_conn *c)
{
	const struct ib_trans *t = fsm(c, U_DESTROY);
	uint8_t state = c->state;
	struct uroce_cm_msg m;
	const struct uroce_cm_failure *f;

	if (c->id && c->id->conn == c)
		c->id->conn = NULL;
	c->id = NULL;
	if (!t) {
		ib_conn_free(cm, c);
		return;
	}
	if (t->act & A_CANCEL)
		cancel_msg(cm, c);
	if (t->act & A_SEND_REJ_TO) {
		/* IBA 12.6.7: reason Timeout carries the rejecting CA's GUID as ARI. */
		uint8_t guid[8];
		uint64_t be = htobe64(c->local_guid);

		f = uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_REQ_SENT);
		memcpy(guid, &be, 8);
		format_rej(c, state, f->reason, guid, 8, NULL, 0, &m);
		tx_conn(cm, c, &m);
	}
	if (t->act & A_SEND_REJ) {
		f = uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_CONNECTING);
		format_rej(c, state, f->reason, NULL, 0, NULL, 0, &m);
		tx_conn(cm, c, &m);
	}
	if (t->act & A_SEND_DREQ) {
		/* One DREQ and straight to timewait (cm.c: sent, then cancelled at once). */
		memset(&m, 0, sizeof(m));
		uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_DREQ, ib_form_tid(cm, c->local_id));
		m.u.dreq.local_comm_id = c->local_id;
		m.u.dreq.remote_comm_id = c->remote_id;
		m.u.dreq.remote_qpn_eecn = c->remote_qpn & 0xFFFFFF;
		tx_conn(cm, c, &m);
	}
	if (t->act & A_SEND_DREP) {
		set_priv(c, NULL, 0);
		format_drep(c, &m);
		tx_conn(cm, c, &m);
	}
	if (t->act & A_SEND_SIDR_REJ) {
		f = uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_SIDR_RCVD);
		memset(&m, 0, sizeof(m));
		uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_SIDR_REP, c->tid);
		m.u.sidr_rep.request_id = c->remote_id;
		m.u.sidr_rep.status = (uint8_t)f->reason;
		m.u.sidr_rep.service_id = c->service_id;
		tx_conn(cm, c, &m);
	}
	enter(cm, c, t->next);
	maybe_free(cm, c);
}

/* ---- INIT_QP_ATTR (cm.c cm_init_qp_{init,rtr,rts}_attr) ---------------------------------- */

int ib_init_qp_attr(const struct uroce_cm *cm, const struct cm_conn *c, struct ibv_qp_attr *a,
		    int *mask)
{
	static const uint16_t init_ok = 1u << IB_REQ_SENT | 1u << IB_MRA_REQ_RCVD |
		1u << IB_REQ_RCVD | 1u << IB_MRA_REQ_SENT | 1u << IB_REP_RCVD |
		1u << IB_MRA_REP_SENT | 1u << IB_REP_SENT | 1u << IB_MRA_REP_RCVD |
		1u << IB_ESTABLISHED;
	/* RTR and RTS need the peer's values: not before it answered. */
	static const uint16_t rtx_ok = init_ok & ~(1u << IB_REQ_SENT | 1u << IB_MRA_REQ_RCVD);
	bool rc = c->qp_type == IBV_QPT_RC;

	(void)cm;
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		if (!(init_ok & 1u << c->state))
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (c->responder_resources)
			a->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		a->pkey_index = 0;
		a->port_num = 1;
		return 0;
	case IBV_QPS_RTR:
		if (!(rtx_ok & 1u << c->state))
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		memset(&a->ah_attr, 0, sizeof(a->ah_attr));
		a->ah_attr.is_global = 1;
		memcpy(a->ah_attr.grh.dgid.raw, c->av.dgid, 16);
		a->ah_attr.grh.flow_label = c->av.flow_label;
		a->ah_attr.grh.sgid_index = (uint8_t)c->av.sgid_index;
		a->ah_attr.grh.hop_limit = c->av.hop_limit;
		a->ah_attr.grh.traffic_class = c->av.traffic_class;
		a->ah_attr.sl = c->av.sl;
		a->ah_attr.static_rate = c->av.rate;
		a->ah_attr.port_num = 1;
		a->path_mtu = (enum ibv_mtu)c->path_mtu;
		a->dest_qp_num = c->remote_qpn;
		a->rq_psn = c->rq_psn;
		if (rc) {
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			a->max_dest_rd_atomic = c->responder_resources;
			a->min_rnr_timer = 0;
		}
		return 0;
	case IBV_QPS_RTS:
		if (!(rtx_ok & 1u << c->state))
			return -EINVAL;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		a->sq_psn = c->sq_psn;
		if (rc) {
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
				 IBV_QP_TIMEOUT;
			a->retry_cnt = c->retry_count;
			a->rnr_retry = c->rnr_retry_count;
			a->max_rd_atomic = c->initiator_depth;
			a->timeout = c->av.timeout;
		}
		return 0;
	default:
		return -EINVAL;
	}
}

/* ---- receiving ------------------------------------------------------------------------------ */

/* Run a transition for a received message or a timer; `answer` is the received
 * message's context for the answers (NULL for timers). */
static void run(struct uroce_cm *cm, struct cm_conn *c, const struct ib_trans *t,
		enum cm_ib_event ev, const struct uroce_cm_msg *msg, const struct uroce_cm_rx *rx)
{
	struct uroce_cm_msg m;

	if (t->act & A_DUP)
		cm_count_drop(cm, UROCE_CM_DROP_DUPLICATE);
	if (t->act & A_RTU_AGAIN && rx) {
		format_rtu(c, &m);
		tx_response(cm, rx, &m, c->uid);
	}
	if (t->act & A_MRA_AGAIN && rx) {
		format_mra(c, c->state == IB_MRA_REQ_SENT ? UROCE_CM_MRA_MSG_REQ : UROCE_CM_MRA_MSG_REP, &m);
		tx_response(cm, rx, &m, c->uid);
	}
	if (t->act & A_DREP_AGAIN && rx) {
		format_drep(c, &m);
		tx_response(cm, rx, &m, c->uid);
	}
	if (t->act & A_REJ_STALE && rx) {
		format_rej(c, c->state, UROCE_CM_REJ_STALE_CONN, NULL, 0, NULL, 0, &m);
		tx_response(cm, rx, &m, c->uid);
	}
	if (t->act & A_CANCEL)
		cancel_msg(cm, c);
	if (t->act & A_MODIFY && msg) {
		/* cm.c cm_mra_handler + ib_modify_mad: the service time plus the ACK
		 * timeout, for this wait and the retries after it. */
		uint64_t ms = cm_iba_time_ms(msg->u.mra.service_timeout) + cm_iba_time_ms(c->av.timeout);

		c->msg_timeout_ms = (uint32_t)ms;
		if (c->msg_active)
			cm_timer_arm(&cm->timers, &c->send_timer, cm->now + ms);
	}
	if (t->act & A_TW_STALE && msg && msg->u.rej.reason == UROCE_CM_REJ_STALE_CONN)
		enter(cm, c, IB_TIMEWAIT);
	else
		enter(cm, c, t->next);
	if (t->act & A_MODIFY)
		c->msg_state = c->state;
	if (t->act & A_EVENT) {
		struct cm_ib_ev e = { .type = ev, .msg = msg };

		if (c->id)
			cma_ib_event(cm, c, &e);
	}
	maybe_free(cm, c);
}

/* cm.c cm_issue_rej(): a REJ answering a message no connection takes. */
static void issue_rej(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *in,
		      enum uroce_cm_fail f, uint8_t rejected, const uint8_t *ari, uint8_t ari_len)
{
	struct uroce_cm_msg m;

	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_REJ, in->hdr.tid);
	/* The IDs are the first two words of whatever came, read as a REJ's (cm.c does
	 * the same): for a REQ the "remote" word is its reserved word, bytes 4..7. */
	if (in->hdr.attr_id == UROCE_CM_ATTR_REQ) {
		m.u.rej.remote_comm_id = in->u.req.local_comm_id;
		m.u.rej.local_comm_id = (uint32_t)in->u.req.resv4 << 24 | in->u.req.vendor_id;
	} else {
		m.u.rej.remote_comm_id = in->u.rep.local_comm_id;
		m.u.rej.local_comm_id = in->u.rep.remote_comm_id;
	}
	m.u.rej.message_rejected = rejected;
	m.u.rej.reason = uroce_cm_fail_info(f)->reason;
	if (ari && ari_len) {
		m.u.rej.reject_info_length = ari_len;
		memcpy(m.u.rej.ari, ari, ari_len);
	}
	tx_response(cm, rx, &m, -1);
}

/* cm.c cm_issue_drep(): a DREQ for a connection we do not have still gets a DREP. */
static void issue_drep(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *in)
{
	struct uroce_cm_msg m;

	memset(&m, 0, sizeof(m));
	uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_DREP, in->hdr.tid);
	m.u.drep.remote_comm_id = in->u.dreq.local_comm_id;
	m.u.drep.local_comm_id = in->u.dreq.remote_comm_id;
	tx_response(cm, rx, &m, -1);
}

static int gid_index(const struct cm_devent *d, const uint8_t gid[16])
{
	for (unsigned i = 0; i < d->d.info.num_gids && i < UROCE_MAX_GIDS; i++)
		if (d->d.info.gids[i].valid && !memcmp(d->d.info.gids[i].gid, gid, 16))
			return (int)i;
	return -1;
}

/* ---- requests before their listener ------------------------------------------------------
 *
 * Real programs race their own listen: qperf tells its client the CM port before it
 * calls rdma_listen (src/rdma.c cm_open_server), perftest -R's client connects its
 * second id before the server's second listener exists.  Linux answers such a REQ
 * with REJ 8 (SIDR_REQ: SIDR_REP status 1) at once, and the programs fail.  Here a
 * REQ / SIDR_REQ that finds nobody listening on its service ID on its device waits
 * up to cfg.listen_grace_ms, in REQ_RCVD / SIDR_REQ_RCVD and in the remote tables
 * as any REQ being processed (so a retransmission of it is a duplicate, a REJ or the
 * peer's destroy finds it); a LISTEN command matches the held requests again
 * (ib_held_rematch) and the ones a listener now takes go on from there.  When the
 * grace ends it is refused as it would have been at once.  docs/cm.md.
 */
static void req_match(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_rx *rx,
		      const struct uroce_cm_msg *m, bool may_hold);
static void sidr_match(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_rx *rx,
		       const struct uroce_cm_msg *m, bool may_hold);

static bool hold(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_rx *rx,
		 const struct uroce_cm_msg *m)
{
	struct cm_held *h;

	if (!cm->cfg.listen_grace_ms || c->held)
		return false;
	h = malloc(sizeof(*h));
	if (!h)
		return false;
	if (cm_timer_arm(&cm->timers, &c->hold_timer, cm->now + cm->cfg.listen_grace_ms)) {
		free(h);
		return false;
	}
	h->conn = c;
	h->dev_id = rx->dev_id;
	memcpy(h->sgid, rx->sgid, 16);
	memcpy(h->dgid, rx->dgid, 16);
	h->msg = *m;
	c->held = h;
	cm_list_add_tail(&cm->held, &h->node);
	cm->stats.held++;
	cm_note(cm, "%s 0x%08x for service 0x%llx: nobody listens yet, held %u ms",
		m->hdr.attr_id == UROCE_CM_ATTR_REQ ? "REQ" : "SIDR_REQ", c->remote_id,
		(unsigned long long)c->service_id, cm->cfg.listen_grace_ms);
	return true;
}

/* Take the held request off its connection; the caller owns (and frees) it. */
static struct cm_held *unhold(struct uroce_cm *cm, struct cm_conn *c)
{
	struct cm_held *h = c->held;

	if (h) {
		cm_timer_cancel(&cm->timers, &c->hold_timer);
		cm_list_del(&h->node);
		c->held = NULL;
	}
	return h;
}

/* Match a held request again, for good: a listener takes it or it is refused. */
static void release(struct uroce_cm *cm, struct cm_conn *c)
{
	struct cm_held *h = unhold(cm, c);
	struct uroce_cm_rx rx;

	if (!h)
		return;
	memset(&rx, 0, sizeof(rx));
	rx.dev_id = h->dev_id;
	memcpy(rx.sgid, h->sgid, 16);
	memcpy(rx.dgid, h->dgid, 16);
	if (h->msg.hdr.attr_id == UROCE_CM_ATTR_REQ)
		req_match(cm, c, &rx, &h->msg, false);
	else
		sidr_match(cm, c, &rx, &h->msg, false);
	free(h);
}

static uint64_t held_sid(const struct cm_held *h)
{
	return h->msg.hdr.attr_id == UROCE_CM_ATTR_REQ ? h->msg.u.req.service_id
						       : h->msg.u.sidr_req.service_id;
}

void ib_held_rematch(struct uroce_cm *cm)
{
	/* One at a time, from the oldest: what a match does may change the list. */
	for (;;) {
		struct cm_conn *found = NULL;

		cm_list_each(p, &cm->held) {
			struct cm_held *h = cm_container_of(p, struct cm_held, node);

			if (cma_ib_listening(cm, h->dev_id, held_sid(h))) {
				found = h->conn;
				break;
			}
		}
		if (!found)
			return;
		cm->stats.held_matched++;
		release(cm, found);
	}
}

unsigned ib_held_count(const struct uroce_cm *cm)
{
	unsigned n = 0;

	cm_list_each(p, &cm->held)
		n++;
	return n;
}

static void rx_req(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *m)
{
	const struct uroce_cm_req *q = &m->u.req;
	struct cm_conn *c, *other;

	c = ib_conn_new(cm, rx->dev_id);
	if (!c) {
		cm_count_drop(cm, UROCE_CM_DROP_BUSY);
		return;
	}
	c->passive = true;
	c->remote_id = q->local_comm_id;
	c->service_id = q->service_id;
	c->tid = m->hdr.tid;
	c->timeout_ms = (uint32_t)cm_iba_time_ms(q->local_cm_response_timeout);
	c->max_cm_retries = q->max_cm_retries;
	c->remote_qpn = q->local_qpn;
	/* The peer's responder resources are our initiator depth and vice versa. */
	c->initiator_depth = q->responder_resources;
	c->responder_resources = q->initiator_depth;
	c->path_mtu = q->path_mtu;
	c->pkey = q->pkey;
	/* The active sends from the PSN the REP gives; we send from the REQ's. */
	c->sq_psn = q->starting_psn;
	c->retry_count = q->retry_count;
	c->rnr_retry_count = q->rnr_retry_count;
	c->flow_control = q->end_to_end_flow_control;
	c->srq = q->srq;
	c->qp_type = q->transport_service_type == 0 ? IBV_QPT_RC :
		     q->transport_service_type == 1 ? IBV_QPT_UC : 0;
	c->remote_guid = q->local_ca_guid;
	c->state = IB_REQ_RCVD;

	/* Duplicate: the peer's ID is known (12.9.5.x, cm.c cm_match_req). */
	other = find_remote(cm, c->remote_id, c->remote_guid);
	if (other) {
		ib_conn_free(cm, c);
		const struct ib_trans *t = fsm(other, IN_DUP_REQ);

		if (t)
			run(cm, other, t, 0, m, rx);
		else
			cm_count_drop(cm, UROCE_CM_DROP_DUPLICATE);
		return;
	}
	/* Stale: the peer's QP is connected to us already (12.9.8.3.1): REJ this REQ,
	 * and a DREQ for the old connection. */
	other = find_qpn(cm, c->remote_qpn, c->remote_guid);
	if (other) {
		ib_conn_free(cm, c);
		issue_rej(cm, rx, m, UROCE_CM_FAIL_STALE_CONN, UROCE_CM_REJ_MSG_REQ, NULL, 0);
		ib_send_dreq(cm, other, NULL, 0);
		return;
	}
	cm_htab_add(&cm->remote_ids, &c->by_remote, remote_key(c->remote_id, c->remote_guid));
	cm_htab_add(&cm->remote_qpns, &c->by_qpn, qpn_key(c->remote_qpn, c->remote_guid));
	req_match(cm, c, rx, m, true);
}

/* The rest of a REQ in REQ_RCVD, in the remote tables: its listener, the path back,
 * the MTU, then rdma_cm.  With may_hold, a REQ nobody listens for is held (above). */
static void req_match(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_rx *rx,
		      const struct uroce_cm_msg *m, bool may_hold)
{
	const struct uroce_cm_req *q = &m->u.req;
	const struct cm_devent *d = cm_dev(cm, rx->dev_id);
	struct uroce_cm_route rt;
	struct sockaddr_storage to, from;
	int idx, r;

	if (!d) {
		ib_conn_free(cm, c);
		return;
	}
	if (!cma_ib_listening(cm, rx->dev_id, q->service_id)) {
		if (may_hold && hold(cm, c, rx, m))
			return;
		cm_note(cm, "REQ 0x%08x for service 0x%llx: nobody listens", q->local_comm_id,
			(unsigned long long)q->service_id);
		ib_conn_free(cm, c);
		issue_rej(cm, rx, m, UROCE_CM_FAIL_NO_LISTENER, UROCE_CM_REJ_MSG_REQ, NULL, 0);
		return;
	}

	/* The path back (cm.c cm_format_paths_from_req, cm_init_av_by_path): to the
	 * REQ's primary local GID, from the GID the REQ arrived at; REJ invalid GID when
	 * the families differ or nothing routes there through this device. */
	memset(&c->av, 0, sizeof(c->av));
	memcpy(c->av.dgid, q->primary.local_gid, 16);
	memcpy(c->av.sgid, rx->dgid, 16);
	idx = gid_index(d, rx->dgid);
	cm_gid_to_sa(q->primary.local_gid, d->d.info.ifindex, &to);
	cm_gid_to_sa(rx->dgid, d->d.info.ifindex, &from);
	r = -EINVAL;
	if (idx >= 0 && cm_gid_v4mapped(q->primary.local_gid) == cm_gid_v4mapped(q->primary.remote_gid) &&
	    cm->ops.route)
		r = cm->ops.route(cm->ctx, (struct sockaddr *)&to, (struct sockaddr *)&from,
				  d->d.info.ifindex, &rt);
	if (r) {
		uint8_t gid0[16];
		struct uroce_cm_msg rej;

		cm_note(cm, "REQ 0x%08x: no path back (%d)", q->local_comm_id, r);
		memcpy(gid0, d->d.info.gids[0].gid, 16);
		format_rej(c, IB_REQ_RCVD, UROCE_CM_REJ_INVALID_GID, gid0, 16, NULL, 0, &rej);
		ib_conn_free(cm, c);
		tx_response(cm, rx, &rej, -1);
		return;
	}
	c->av.sgid_index = (uint32_t)idx;
	c->av.flow_label = q->primary.flow_label;
	c->av.hop_limit = rt.hop_limit;
	c->av.traffic_class = q->primary.traffic_class;
	c->av.sl = q->primary.sl;
	c->av.rate = q->primary.packet_rate;
	/* The path's packet life time is the REQ's ACK timeout - 1; the AV's timeout
	 * the life time + 1. */
	c->av.timeout = q->primary.local_ack_timeout ? q->primary.local_ack_timeout : 1;

	/* IBA 12.7.37 / REJ 26: a path MTU the device cannot carry is refused (Linux
	 * copies it into the QP unchecked); ARI = the largest MTU code we take. */
	if (q->path_mtu < 1 || q->path_mtu > 5 || q->path_mtu > d->mtu) {
		struct uroce_cm_msg rej;
		uint8_t mtu = d->mtu;

		format_rej(c, IB_REQ_RCVD, uroce_cm_fail_info(UROCE_CM_FAIL_INVALID_MTU)->reason,
			   &mtu, 1, NULL, 0, &rej);
		ib_conn_free(cm, c);
		tx_response(cm, rx, &rej, -1);
		return;
	}

	r = cma_req(cm, c, m, rx);
	if (r)
		cm_note(cm, "REQ 0x%08x for service 0x%llx refused: %s", q->local_comm_id,
			(unsigned long long)q->service_id,
			r == -ENOMEM ? "BACKLOG" : uroce_cm_fail_info((enum uroce_cm_fail)r)->name);
	if (r == -ENOMEM) {
		/* cm.c cm_destroy_id(-ENOMEM) in REQ_RCVD: no REJ, the active retries. */
		cm_count_drop(cm, UROCE_CM_DROP_BUSY);
		ib_conn_free(cm, c);
		return;
	}
	if (r) {
		struct uroce_cm_msg rej;

		format_rej(c, c->state, uroce_cm_fail_info((enum uroce_cm_fail)r)->reason, NULL, 0,
			   NULL, 0, &rej);
		ib_conn_free(cm, c);
		tx_response(cm, rx, &rej, -1);
	}
}

static void rx_rep(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *m)
{
	const struct uroce_cm_rep *p = &m->u.rep;
	struct cm_conn *c = acquire(cm, p->remote_comm_id, 0), *other;
	const struct ib_trans *t;

	if (!c) {
		/* cm.c cm_dup_rep_handler(): a REP for a connection that has its peer. */
		c = acquire(cm, p->remote_comm_id, p->local_comm_id);
		t = c ? fsm(c, IN_DUP_REP) : NULL;
		if (t)
			run(cm, c, t, 0, m, rx);
		else
			cm_count_drop(cm, c ? UROCE_CM_DROP_DUPLICATE : UROCE_CM_DROP_NO_MATCH);
		return;
	}
	t = fsm(c, IN_REP);
	if (!t) {
		cm_count_drop(cm, UROCE_CM_DROP_NO_MATCH);
		return;
	}
	/* Duplicate (the peer's ID already known with another connection) or stale. */
	if (find_remote(cm, p->local_comm_id, p->local_ca_guid)) {
		cm_count_drop(cm, UROCE_CM_DROP_DUPLICATE);
		return;
	}
	other = find_qpn(cm, p->local_qpn, p->local_ca_guid);
	if (other) {
		issue_rej(cm, rx, m, UROCE_CM_FAIL_STALE_CONN, UROCE_CM_REJ_MSG_REP, NULL, 0);
		ib_send_dreq(cm, other, NULL, 0);
		return;
	}
	c->remote_id = p->local_comm_id;
	c->remote_guid = p->local_ca_guid;
	c->remote_qpn = p->local_qpn;
	cm_htab_add(&cm->remote_ids, &c->by_remote, remote_key(c->remote_id, c->remote_guid));
	cm_htab_add(&cm->remote_qpns, &c->by_qpn, qpn_key(c->remote_qpn, c->remote_guid));
	c->initiator_depth = p->responder_resources;
	c->responder_resources = p->initiator_depth;
	c->sq_psn = p->starting_psn;
	c->rnr_retry_count = p->rnr_retry_count;
	c->target_ack_delay = p->target_ack_delay;
	c->av.timeout = cm_ack_timeout(c->target_ack_delay, (uint8_t)(c->av.timeout - 1));
	run(cm, c, t, CM_EV_REP_RCVD, m, rx);
}

static void rx_simple(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *m,
		      struct cm_conn *c, enum ib_input in, enum cm_ib_event ev)
{
	const struct ib_trans *t = c ? fsm(c, in) : NULL;

	if (!t) {
		cm_count_drop(cm, c ? UROCE_CM_DROP_DUPLICATE : UROCE_CM_DROP_NO_MATCH);
		return;
	}
	run(cm, c, t, ev, m, rx);
}

/* cm.c cm_acquire_rejected_id(): REJ Timeout by (ARI GUID, the rejecter's ID) in the
 * remote-ID table; a REJ of our REQ by our ID alone; otherwise both IDs. */
static struct cm_conn *rejected_conn(const struct uroce_cm *cm, const struct uroce_cm_rej *j)
{
	if (j->reason == UROCE_CM_REJ_TIMEOUT) {
		uint64_t guid;
		struct cm_conn *c;

		memcpy(&guid, j->ari, 8);
		c = find_remote(cm, j->local_comm_id, be64toh(guid));
		return c ? acquire(cm, c->local_id, j->local_comm_id) : NULL;
	}
	if (j->message_rejected == UROCE_CM_REJ_MSG_REQ)
		return acquire(cm, j->remote_comm_id, 0);
	return acquire(cm, j->remote_comm_id, j->local_comm_id);
}

static void rx_sidr_req(struct uroce_cm *cm, const struct uroce_cm_rx *rx, const struct uroce_cm_msg *m)
{
	const struct uroce_cm_sidr_req *q = &m->u.sidr_req;
	const struct cm_devent *d = cm_dev(cm, rx->dev_id);
	struct cm_conn *c;
	int idx = gid_index(d, rx->dgid);

	/* A duplicate (same request ID from the same source) while the first is
	 * processed is dropped (cm.c cm_insert_remote_sidr; keyed by the source GID
	 * here where Linux uses the LID, 0 on RoCE). */
	if (find_sidr(cm, q->request_id, rx->sgid)) {
		cm_count_drop(cm, UROCE_CM_DROP_DUPLICATE);
		return;
	}
	c = ib_conn_new(cm, rx->dev_id);
	if (!c) {
		cm_count_drop(cm, UROCE_CM_DROP_BUSY);
		return;
	}
	c->passive = true;
	c->remote_id = q->request_id;
	c->service_id = q->service_id;
	c->tid = m->hdr.tid;
	c->pkey = q->pkey;
	memcpy(c->sidr_src, rx->sgid, 16);
	/* SIDR has no path: answers go back to the packet's source. */
	memcpy(c->av.sgid, rx->dgid, 16);
	memcpy(c->av.dgid, rx->sgid, 16);
	c->av.sgid_index = idx < 0 ? 0 : (uint32_t)idx;
	c->state = IB_SIDR_REQ_RCVD;
	cm_htab_add(&cm->sidr_reqs, &c->by_sidr, sidr_key(c->remote_id, c->sidr_src));
	sidr_match(cm, c, rx, m, true);
}

static void sidr_match(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_rx *rx,
		       const struct uroce_cm_msg *m, bool may_hold)
{
	int r;

	if (!cma_ib_listening(cm, rx->dev_id, m->u.sidr_req.service_id)) {
		if (may_hold && hold(cm, c, rx, m))
			return;
		ib_send_sidr_rep(cm, c, (uint8_t)uroce_cm_fail_info(UROCE_CM_FAIL_SIDR_NO_LISTENER)->reason,
				 0, 0, NULL, 0);
		ib_conn_free(cm, c);
		return;
	}
	r = cma_req(cm, c, m, rx);
	if (r) {
		/* Any refusal, a full backlog included, is a SIDR_REP reject (cm.c destroys
		 * the id in SIDR_REQ_RCVD). */
		if (r == -ENOMEM)
			cm_count_drop(cm, UROCE_CM_DROP_BUSY);
		ib_send_sidr_rep(cm, c, (uint8_t)uroce_cm_fail_info(UROCE_CM_FAIL_SIDR_REJECT)->reason,
				 0, 0, NULL, 0);
		ib_conn_free(cm, c);
	}
}

static enum uroce_cm_drop decode_drop(int err)
{
	switch (err) {
	case -EPROTONOSUPPORT: return UROCE_CM_DROP_MAD_VERSION;
	case -ENOMSG: return UROCE_CM_DROP_MAD_CLASS;
	case -EBADMSG: return UROCE_CM_DROP_MAD_BAD;
	default: return UROCE_CM_DROP_MAD_LEN;
	}
}

static bool gid_usable_source(const uint8_t g[16])
{
	static const uint8_t zero[16];

	if (!memcmp(g, zero, 16) || g[0] == 0xff)
		return false;  /* unspecified or IPv6 multicast */
	if (cm_gid_v4mapped(g) && ((g[12] & 0xf0) == 0xe0 || !memcmp(g + 12, "\xff\xff\xff\xff", 4) ||
				   g[12] == 0))
		return false;  /* IPv4 multicast, broadcast or 0.0.0.0/8 */
	return true;
}

int64_t uroce_cm_packet_uid(const struct uroce_cm *cm, const uint8_t *pkt, size_t len,
			    const uint8_t src[16])
{
	/* BTH + DETH, then the MAD (qp1.c has checked the rest by the time it matters). */
	const size_t at = UROCE_BTH_LEN + 8;
	struct uroce_cm_msg *m;
	struct cm_conn *c = NULL;
	int64_t uid = -1;

	if (len < at + UROCE_MAD_SIZE)
		return -1;
	m = malloc(sizeof(*m));
	if (!m)
		return -1;
	if (uroce_cm_decode(pkt + at, UROCE_MAD_SIZE, m)) {
		free(m);
		return -1;
	}
	/* The look-ups uroce_cm_recv makes, by the IDs alone: the owner, not a match. */
	switch (m->hdr.attr_id) {
	case UROCE_CM_ATTR_REQ:
		c = find_remote(cm, m->u.req.local_comm_id, m->u.req.local_ca_guid);
		break;
	case UROCE_CM_ATTR_REP:
		c = find_local(cm, m->u.rep.remote_comm_id);
		break;
	case UROCE_CM_ATTR_RTU:
		c = find_local(cm, m->u.rtu.remote_comm_id);
		break;
	case UROCE_CM_ATTR_REJ:
		c = rejected_conn(cm, &m->u.rej);
		break;
	case UROCE_CM_ATTR_MRA:
		c = find_local(cm, m->u.mra.remote_comm_id);
		break;
	case UROCE_CM_ATTR_DREQ:
		c = find_local(cm, m->u.dreq.remote_comm_id);
		break;
	case UROCE_CM_ATTR_DREP:
		c = find_local(cm, m->u.drep.remote_comm_id);
		break;
	case UROCE_CM_ATTR_SIDR_REQ:
		c = find_sidr(cm, m->u.sidr_req.request_id, src);
		break;
	case UROCE_CM_ATTR_SIDR_REP:
		c = find_local(cm, m->u.sidr_rep.request_id);
		break;
	}
	if (c)
		uid = c->uid;
	free(m);
	return uid;
}

void uroce_cm_recv(struct uroce_cm *cm, uint64_t now, const struct uroce_cm_rx *rx)
{
	struct uroce_cm_msg *m;
	const struct cm_devent *d;
	int err;

	cm->now = now;
	d = cm_dev(cm, rx->dev_id);
	if (!d) {
		cm_count_drop(cm, UROCE_CM_DROP_NO_DEVICE);
		return;
	}
	m = malloc(sizeof(*m));
	if (!m) {
		cm_count_drop(cm, UROCE_CM_DROP_BUSY);
		return;
	}
	err = uroce_cm_decode(rx->mad, rx->len, m);
	if (err) {
		cm_count_drop(cm, decode_drop(err));
		goto out;
	}
	/* IBA 12.6: every CM message is a Send (Linux's MAD layer drops the rest). */
	if (m->hdr.method != UROCE_MAD_METHOD_SEND) {
		cm_count_drop(cm, UROCE_CM_DROP_MAD_METHOD);
		goto out;
	}
	if (!uroce_cm_attr_known(m->hdr.attr_id) || m->hdr.attr_id == UROCE_CM_ATTR_LAP ||
	    m->hdr.attr_id == UROCE_CM_ATTR_APR) {
		/* ClassPortInfo is never asked by rdma_cm on RoCE; LAP/APR are refused by
		 * Linux on RoCE ports (no alternate paths). */
		cm_count_drop(cm, UROCE_CM_DROP_MAD_ATTR);
		goto out;
	}
	/* rxe accepts only packets to one of the device's GIDs; answers go back to the
	 * source, which must be a unicast address. */
	if (gid_index(d, rx->dgid) < 0 || !gid_usable_source(rx->sgid) ||
	    cm_gid_v4mapped(rx->sgid) != cm_gid_v4mapped(rx->dgid)) {
		cm_count_drop(cm, UROCE_CM_DROP_ADDR);
		goto out;
	}
	cm->stats.mad_rcvd[cm_attr_slot(m->hdr.attr_id)]++;
	switch (m->hdr.attr_id) {
	case UROCE_CM_ATTR_REQ:
		rx_req(cm, rx, m);
		break;
	case UROCE_CM_ATTR_REP:
		rx_rep(cm, rx, m);
		break;
	case UROCE_CM_ATTR_RTU:
		rx_simple(cm, rx, m, acquire(cm, m->u.rtu.remote_comm_id, m->u.rtu.local_comm_id),
			  IN_RTU, CM_EV_RTU_RCVD);
		break;
	case UROCE_CM_ATTR_REJ:
		if (m->u.rej.reason < 64)
			cm->stats.rej_rcvd[m->u.rej.reason]++;
		rx_simple(cm, rx, m, rejected_conn(cm, &m->u.rej), IN_REJ, CM_EV_REJ_RCVD);
		break;
	case UROCE_CM_ATTR_MRA: {
		const struct uroce_cm_mra *a = &m->u.mra;
		struct cm_conn *c = a->message_mraed == UROCE_CM_MRA_MSG_REQ ?
			acquire(cm, a->remote_comm_id, 0) : acquire(cm, a->remote_comm_id, a->local_comm_id);
		enum ib_input in = a->message_mraed == UROCE_CM_MRA_MSG_REQ ? IN_MRA_REQ :
				   a->message_mraed == UROCE_CM_MRA_MSG_REP ? IN_MRA_REP : IN_N;

		if (in == IN_N)
			cm_count_drop(cm, UROCE_CM_DROP_NO_MATCH);  /* MRA of a LAP: no LAP here */
		else
			rx_simple(cm, rx, m, c, in, CM_EV_MRA_RCVD);
		break;
	}
	case UROCE_CM_ATTR_DREQ: {
		struct cm_conn *c = acquire(cm, m->u.dreq.remote_comm_id, m->u.dreq.local_comm_id);

		if (!c) {
			issue_drep(cm, rx, m);
			cm_count_drop(cm, UROCE_CM_DROP_NO_MATCH);
		} else if (c->local_qpn != m->u.dreq.remote_qpn_eecn) {
			/* IBA 12.6.9: the DREQ must name our QP; otherwise it is ignored. */
			cm_count_drop(cm, UROCE_CM_DROP_NO_MATCH);
		} else {
			if (c->state != IB_TIMEWAIT)
				c->tid = m->hdr.tid;  /* the DREP echoes the DREQ's TID */
			rx_simple(cm, rx, m, c, IN_DREQ, CM_EV_DREQ_RCVD);
		}
		break;
	}
	case UROCE_CM_ATTR_DREP:
		rx_simple(cm, rx, m, acquire(cm, m->u.drep.remote_comm_id, m->u.drep.local_comm_id),
			  IN_DREP, CM_EV_DREP_RCVD);
		break;
	case UROCE_CM_ATTR_SIDR_REQ:
		rx_sidr_req(cm, rx, m);
		break;
	case UROCE_CM_ATTR_SIDR_REP:
		rx_simple(cm, rx, m, acquire(cm, m->u.sidr_rep.request_id, 0), IN_SIDR_REP,
			  CM_EV_SIDR_REP_RCVD);
		break;
	}
out:
	free(m);
}

/* ---- timers ---------------------------------------------------------------------------------- */

static void send_timeout(struct uroce_cm *cm, struct cm_conn *c)
{
	const struct ib_trans *t;
	static const enum cm_ib_event ev_of[IB_NSTATES] = {
		[IB_REQ_SENT] = CM_EV_REQ_ERROR, [IB_MRA_REQ_RCVD] = CM_EV_REQ_ERROR,
		[IB_REP_SENT] = CM_EV_REP_ERROR, [IB_MRA_REP_RCVD] = CM_EV_REP_ERROR,
		[IB_DREQ_SENT] = CM_EV_DREQ_ERROR, [IB_SIDR_REQ_SENT] = CM_EV_SIDR_REQ_ERROR,
	};

	if (!c->msg_active)
		return;
	if (c->retries_left) {
		c->retries_left--;
		cm->stats.retransmits++;
		/* The same MAD, same TID (the BTH PSN is the sender's next). */
		tx_raw(cm, c->dev_id, c->av.sgid, c->av.dgid, c->av.traffic_class, c->av.hop_limit,
		       c->msg, c->msg_attr, 0, c->uid);
		cm_timer_arm(&cm->timers, &c->send_timer, cm->now + c->msg_timeout_ms);
		return;
	}
	c->msg_active = false;
	cm->stats.timeouts++;
	/* cm.c cm_process_send_error(): only if the connection is still where it sent it. */
	if (c->msg_state != c->state)
		return;
	t = fsm(c, IN_SEND_TIMEOUT);
	if (t)
		run(cm, c, t, ev_of[c->state], NULL, NULL);
}

static void timewait_end(struct uroce_cm *cm, struct cm_conn *c)
{
	const struct ib_trans *t = fsm(c, IN_TIMEWAIT_END);

	if (t)
		run(cm, c, t, CM_EV_TIMEWAIT_EXIT, NULL, NULL);
	else
		maybe_free(cm, c);
}

void uroce_cm_tick(struct uroce_cm *cm, uint64_t now)
{
	struct cm_timer *t;

	cm->now = now;
	while ((t = cm_timer_pop_due(&cm->timers, now))) {
		struct cm_conn *c = t->owner;

		if (t->kind == CM_T_SEND)
			send_timeout(cm, c);
		else if (t->kind == CM_T_HOLD)
			release(cm, c);     /* the grace is over: matched or refused now */
		else
			timewait_end(cm, c);
	}
}

int64_t uroce_cm_next_timer(const struct uroce_cm *cm)
{
	return cm->timers.n ? (int64_t)cm->timers.v[0]->when : -1;
}
