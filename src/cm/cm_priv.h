/* cm_priv.h — the connection manager's internals (src/cm; tests/cm uses them too).
 *
 * Files:
 *   cm_util.c   lists, hash tables, the timer heap, addresses and GIDs
 *   cm_fail.c   the failure table (cm.h UROCE_CM_FAILURES) and the name tables
 *   ib_cm.c     the IB CM: connection state machines, MADs in and out, retransmission,
 *               MRA, timewait, the remote-ID / remote-QPN / SIDR tables
 *   cma.c       rdma_cm: ids, events and channels, commands, port spaces, listeners,
 *               address and route resolution, INIT_QP_ATTR, multicast
 *   qp1.c       the QP1 packet: checks on receive, BTH/DETH/ICRC on send
 */
#ifndef UROCE_CM_PRIV_H
#define UROCE_CM_PRIV_H

#include <stdbool.h>

#include "cm/cm.h"

/* ---- lists and hash tables (cm_util.c) --------------------------------------------- */

struct cm_list {
	struct cm_list *next, *prev;
};
static inline void cm_list_init(struct cm_list *l) { l->next = l->prev = l; }
static inline bool cm_list_empty(const struct cm_list *l) { return l->next == l; }
static inline void cm_list_add_tail(struct cm_list *l, struct cm_list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}
static inline void cm_list_add_head(struct cm_list *l, struct cm_list *n)
{
	n->next = l->next;
	n->prev = l;
	l->next->prev = n;
	l->next = n;
}
static inline void cm_list_del(struct cm_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}
#define cm_container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))
#define cm_list_each(pos, head) for (struct cm_list *pos = (head)->next, *pos##_n = pos->next; \
				     pos != (head); pos = pos##_n, pos##_n = pos->next)

/* A chained hash of nodes with a 64-bit key (the key is a hash: users compare their
 * own fields while walking the nodes of one key). */
struct cm_hnode {
	struct cm_hnode *next;
	uint64_t key;
	bool linked;
};
struct cm_htab {
	struct cm_hnode **b;
	size_t nb, n;
};
int cm_htab_init(struct cm_htab *t);
void cm_htab_free(struct cm_htab *t);
void cm_htab_add(struct cm_htab *t, struct cm_hnode *n, uint64_t key);
void cm_htab_del(struct cm_htab *t, struct cm_hnode *n);
struct cm_hnode *cm_htab_first(const struct cm_htab *t, uint64_t key);
struct cm_hnode *cm_htab_next(const struct cm_hnode *n, uint64_t key);
uint64_t cm_hash64(uint64_t a, uint64_t b);

/* Timers: a binary min-heap of deadlines (ms). */
struct cm_timer {
	uint64_t when;
	int idx;                         /* position in the heap, -1: not armed */
	uint8_t kind;                    /* enum cm_timer_kind */
	void *owner;
};
enum cm_timer_kind { CM_T_SEND, CM_T_TIMEWAIT, CM_T_HOLD };
struct cm_heap {
	struct cm_timer **v;
	size_t n, cap;
};
void cm_timer_init(struct cm_timer *t, uint8_t kind, void *owner);
int cm_timer_arm(struct cm_heap *h, struct cm_timer *t, uint64_t when);
void cm_timer_cancel(struct cm_heap *h, struct cm_timer *t);
static inline bool cm_timer_armed(const struct cm_timer *t) { return t->idx >= 0; }
/* The earliest timer due at @now, removed from the heap, or NULL. */
struct cm_timer *cm_timer_pop_due(struct cm_heap *h, uint64_t now);

/* Addresses. */
bool cm_sa_any(const struct sockaddr *sa);          /* 0.0.0.0 / :: */
bool cm_sa_loopback(const struct sockaddr *sa);     /* 127/8 / ::1 (and ::ffff:127/8) */
bool cm_sa_zero_port(const struct sockaddr *sa);
uint16_t cm_sa_port(const struct sockaddr *sa);     /* host order */
void cm_sa_set_port(struct sockaddr *sa, uint16_t port);
size_t cm_sa_len(const struct sockaddr *sa);        /* 0 for another family */
/* Same family and address (ports and flowinfo ignored; IPv6 scope compared). */
bool cm_sa_addr_eq(const struct sockaddr *a, const struct sockaddr *b);
/* The RoCEv2 GID of an address: IPv4 as ::ffff:a.b.c.d, IPv6 as is. */
void cm_sa_to_gid(const struct sockaddr *sa, uint8_t gid[16]);
/* The address of a GID (port 0); scope_id for link-local IPv6. */
void cm_gid_to_sa(const uint8_t gid[16], uint32_t scope, struct sockaddr_storage *ss);
bool cm_gid_v4mapped(const uint8_t gid[16]);
bool cm_gid_linklocal(const uint8_t gid[16]);
/* cm_convert_to_ms() of Linux: 4.096 us * 2^t, as whole ms (1 << max(t - 8, 0)). */
static inline uint64_t cm_iba_time_ms(unsigned t) { return t > 8 ? 1ull << (t - 8) : 1; }
/* IBA 12.7.34 local ACK timeout from the CA ACK delay and the packet life time, as
 * Linux's cm_ack_timeout(). */
uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time);
/* The IB MTU code for a netdev MTU, as Linux's iboe_get_mtu(): the largest IB MTU not
 * above MTU - 96 (GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4); 0 if none. */
uint8_t cm_iboe_mtu(uint32_t netdev_mtu);

/* ---- the core ----------------------------------------------------------------------- */

/* A path as rdma_cm keeps it (route.path_rec[0]); GIDs in wire order. */
struct cm_path {
	uint8_t sgid[16], dgid[16];
	uint32_t flow_label;             /* 20 bits */
	uint8_t hop_limit, traffic_class, sl, mtu, rate, packet_life_time;
	uint16_t pkey;
};

/* The address vector of a connection: where its MADs and its QP's packets go. */
struct cm_av {
	uint8_t sgid[16], dgid[16];
	uint32_t sgid_index;
	uint32_t flow_label;
	uint8_t hop_limit, traffic_class, sl, rate;
	uint8_t timeout;                 /* IBA 5-bit: local ACK timeout (plt + 1) */
};

enum cm_ib_state {
	IB_IDLE,
	IB_REQ_SENT,
	IB_REQ_RCVD,
	IB_MRA_REQ_SENT,
	IB_MRA_REQ_RCVD,
	IB_REP_SENT,
	IB_REP_RCVD,
	IB_MRA_REP_SENT,
	IB_MRA_REP_RCVD,
	IB_ESTABLISHED,
	IB_DREQ_SENT,
	IB_DREQ_RCVD,
	IB_TIMEWAIT,
	IB_SIDR_REQ_SENT,
	IB_SIDR_REQ_RCVD,
	IB_NSTATES
};
const char *cm_ib_state_name(unsigned s);

struct cm_id;
struct cm_conn;

/* A REQ or SIDR_REQ that found no listener, held for the listen grace period
 * (cfg.listen_grace_ms) in case its listener is about to appear (ib_cm.c "requests
 * before their listener"): the message and where it came from, to be matched again. */
struct cm_held {
	struct cm_list node;             /* cm->held, in arrival order */
	struct cm_conn *conn;
	uint32_t dev_id;
	uint8_t sgid[16], dgid[16];
	struct uroce_cm_msg msg;
};

/* One IB CM communication (the kernel's cm_id_private).  It may outlive its rdma_cm
 * id: a destroyed id's connection stays in timewait until the timer expires. */
struct cm_conn {
	struct cm_list all;              /* cm->conns */
	int64_t uid;                     /* its rdma_cm id's owner (kept through timewait), -1 */
	struct cm_hnode by_local;        /* cm->local_ids, key local_id */
	struct cm_hnode by_remote;       /* cm->remote_ids, key (remote_id, remote_guid) */
	struct cm_hnode by_qpn;          /* cm->remote_qpns, key (remote_qpn, remote_guid) */
	struct cm_hnode by_sidr;         /* cm->sidr_reqs, key (remote_id, source GID) */
	struct cm_id *id;
	uint32_t dev_id;
	uint8_t state;                   /* enum cm_ib_state */
	bool passive;
	uint32_t local_id, remote_id;    /* comm IDs as their wire bytes read big-endian */
	uint64_t tid;
	uint64_t local_guid, remote_guid;/* host order */
	uint32_t local_qpn, remote_qpn;
	uint64_t service_id;
	struct cm_av av;
	uint8_t sidr_src[16];            /* SIDR passive: where the SIDR_REQ came from */
	uint32_t timeout_ms;             /* response timeout of this side's MADs */
	uint8_t max_cm_retries;
	uint32_t sq_psn, rq_psn;
	uint8_t initiator_depth, responder_resources, retry_count, rnr_retry_count;
	uint8_t path_mtu, qp_type, target_ack_delay, srq, flow_control;
	uint16_t pkey;
	uint8_t service_timeout;         /* of the MRA this side would send */
	uint8_t priv[UROCE_CM_PRIV_MAX]; /* private data kept for duplicate answers */
	uint8_t priv_len;
	/* The MAD being retransmitted (the kernel's cm_id_priv->msg). */
	bool msg_active;
	uint8_t msg_state;               /* the state it was sent in (msg->context[1]) */
	uint16_t msg_attr;
	uint8_t msg[UROCE_MAD_SIZE];
	uint32_t msg_timeout_ms;
	uint8_t retries_left;
	struct cm_timer send_timer;
	struct cm_timer tw_timer;
	struct cm_held *held;            /* a request waiting for its listener */
	struct cm_timer hold_timer;      /* ... until the grace period ends */
};

/* A rdma_cm port: the owners of (port space, port) in this namespace. */
struct cm_bind {
	struct cm_hnode node;            /* cm->binds, key ps << 16 | port */
	uint32_t ps;
	uint16_t port;
	struct cm_list owners;           /* cm_id.bind_node, newest first */
};

struct cm_mc {
	struct cm_list node;             /* cm_id.mcs */
	struct sockaddr_storage addr;
	uint64_t cookie;
	uint32_t join_flags;
	uint32_t events;                 /* events written for this join */
	uint32_t serial;                 /* names it in queued events */
};

struct cm_id {
	struct cm_hnode by_handle;       /* cm->ids */
	struct cm_list all;              /* cm->id_list */
	uint32_t handle;
	uint64_t owner;
	uid_t uid;
	uint32_t chan;
	uint8_t state;                   /* enum uroce_cm_state */
	uint32_t ps;                     /* enum rdma_port_space */
	uint8_t qp_type;                 /* enum ibv_qp_type */
	struct sockaddr_storage src, dst;
	/* The device, once bound or resolved. */
	bool has_dev;
	uint32_t dev_id;
	uint32_t bound_if;               /* bound_dev_if: the netdev of the bound/resolved source */
	uint8_t sgid[16], dgid[16];
	uint32_t sgid_index;
	uint8_t hop_limit;
	bool has_path;
	struct cm_path path;
	/* Options (rdma_set_option). */
	uint8_t tos, timeout;
	bool tos_set, timeout_set, reuseaddr, afonly, afonly_set;
	uint32_t seq_num;                /* this side's starting PSN */
	uint32_t qkey;
	uint32_t qp_num;
	uint8_t srq;
	/* Port. */
	struct cm_bind *bind;
	struct cm_list bind_node;
	/* Listener. */
	int backlog;                     /* CONNECT_REQUESTs that may wait unwritten */
	int backlog_used;
	/* The IB CM half. */
	struct cm_conn *conn;
	/* A CONNECT_REQUEST's new id: its listener, and whether a command named it yet
	 * (the library QUERYs each new id when it processes the request). */
	uint32_t listener;
	bool named;
	/* Multicast joins. */
	struct cm_list mcs;
	uint32_t events;                 /* events written for this id (events_reported) */
	uint32_t queued;                 /* events queued for it, not yet written */
};

/* One queued event. */
struct cm_ev {
	struct cm_ev *next;
	uint32_t id;                     /* the handle events count against */
	uint32_t mc;                     /* cm_mc.serial, 0 if none */
	uint32_t conn_req;               /* CONNECT_REQUEST: the new id's handle */
	struct uroce_cm_event ev;
};

struct cm_chan {
	struct cm_hnode node;            /* cm->chans, key number */
	uint32_t number;
	uid_t uid;
	bool open;
	struct cm_ev *head, **tail;
	uint32_t n;
	uint32_t lost;                   /* dropped since the last event written */
};

struct cm_devent {
	struct uroce_cm_dev d;
	uint8_t mtu;                     /* cm_iboe_mtu(netdev_mtu) */
};

struct uroce_cm {
	struct uroce_cm_config cfg;
	struct uroce_cm_ops ops;
	void *ctx;
	uint64_t now;
	struct cm_devent *devs;
	unsigned ndevs;
	/* rdma_cm */
	struct cm_htab ids, chans, binds;
	struct cm_list id_list;
	uint32_t next_handle, next_chan, next_mc;
	uint16_t last_port;              /* the ephemeral port last handed out */
	/* IB CM */
	struct cm_htab local_ids, remote_ids, remote_qpns, sidr_reqs;
	struct cm_list conns;
	struct cm_list held;             /* struct cm_held: requests before their listener */
	uint32_t comm_operand, comm_next;
	struct cm_heap timers;
	struct uroce_cm_stats stats;
};

/* ---- cma.c <-> ib_cm.c ----------------------------------------------------------------- */

const struct cm_devent *cm_dev(const struct uroce_cm *cm, uint32_t dev_id);
struct cm_id *cm_id_find(const struct uroce_cm *cm, uint32_t handle);

/* IB CM events for the rdma_cm layer (the kernel's cma_ib_handler and friends). */
enum cm_ib_event {
	CM_EV_REQ_ERROR,
	CM_EV_REP_ERROR,
	CM_EV_REP_RCVD,
	CM_EV_RTU_RCVD,
	CM_EV_USER_ESTABLISHED,
	CM_EV_DREQ_ERROR,
	CM_EV_DREQ_RCVD,
	CM_EV_DREP_RCVD,
	CM_EV_TIMEWAIT_EXIT,
	CM_EV_MRA_RCVD,
	CM_EV_REJ_RCVD,
	CM_EV_SIDR_REQ_ERROR,
	CM_EV_SIDR_REP_RCVD,
};
struct cm_ib_ev {
	enum cm_ib_event type;
	const struct uroce_cm_msg *msg;  /* the MAD that caused it, NULL for timers */
};
void cma_ib_event(struct uroce_cm *cm, struct cm_conn *c, const struct cm_ib_ev *ev);

/* Listener look-up for the IB CM: 1 if some id listens on service ID @sid on the
 * device (the kernel's ib_cm listen table). */
bool cma_ib_listening(const struct uroce_cm *cm, uint32_t dev_id, uint64_t sid);
/* A REQ / SIDR_REQ that passed the IB CM's checks, for rdma_cm: 0 (an id was created,
 * CONNECT_REQUEST queued), -ENOMEM (drop silently: the peer retries), or a failure
 * (enum uroce_cm_fail, > 0) the IB CM answers with. */
int cma_req(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_msg *m,
	    const struct uroce_cm_rx *rx);

/* ib_cm.c, for cma.c */
/* A listener appeared: match the held requests again (those it takes go on). */
void ib_held_rematch(struct uroce_cm *cm);
unsigned ib_held_count(const struct uroce_cm *cm);
struct cm_conn *ib_conn_new(struct uroce_cm *cm, uint32_t dev_id);
void ib_conn_release(struct uroce_cm *cm, struct cm_conn *c);  /* the id lets go */
void ib_conn_free(struct uroce_cm *cm, struct cm_conn *c);     /* now, silently */

struct ib_req_param {
	const struct cm_path *path;
	uint64_t service_id;
	uint32_t qpn, starting_psn;
	uint8_t qp_type;                 /* IBV_QPT_RC / UC */
	uint8_t responder_resources, initiator_depth, flow_control, retry_count;
	uint8_t rnr_retry_count, srq;
	uint8_t remote_cm_response_timeout, local_cm_response_timeout, max_cm_retries;
	const uint8_t *priv;
	uint8_t priv_len;
};
int ib_send_req(struct uroce_cm *cm, struct cm_conn *c, const struct ib_req_param *p);

struct ib_rep_param {
	uint32_t qpn, starting_psn;
	uint8_t responder_resources, initiator_depth, flow_control, rnr_retry_count, srq;
	const uint8_t *priv;
	uint8_t priv_len;
};
int ib_send_rep(struct uroce_cm *cm, struct cm_conn *c, const struct ib_rep_param *p);
int ib_send_rtu(struct uroce_cm *cm, struct cm_conn *c, const uint8_t *priv, uint8_t len);
int ib_send_rej(struct uroce_cm *cm, struct cm_conn *c, uint16_t reason, const uint8_t *ari,
		uint8_t ari_len, const uint8_t *priv, uint8_t len);
int ib_send_dreq(struct uroce_cm *cm, struct cm_conn *c, const uint8_t *priv, uint8_t len);
int ib_send_drep(struct uroce_cm *cm, struct cm_conn *c, const uint8_t *priv, uint8_t len);
/* rdma_cm hands a REQ / REP to its user: arm the delayed MRA (service timeout 24). */
int ib_send_mra_delayed(struct uroce_cm *cm, struct cm_conn *c, uint8_t service_timeout);
int ib_establish(struct uroce_cm *cm, struct cm_conn *c);     /* COMM_EST */

struct ib_sidr_req_param {
	const struct cm_path *path;
	uint64_t service_id;
	uint32_t timeout_ms;
	uint8_t max_cm_retries;
	const uint8_t *priv;
	uint8_t priv_len;
};
int ib_send_sidr_req(struct uroce_cm *cm, struct cm_conn *c, const struct ib_sidr_req_param *p);
int ib_send_sidr_rep(struct uroce_cm *cm, struct cm_conn *c, uint8_t status, uint32_t qpn,
		     uint32_t qkey, const uint8_t *priv, uint8_t len);
/* rdma_init_qp_attr for a connection (the kernel's ib_cm_init_qp_attr). */
int ib_init_qp_attr(const struct uroce_cm *cm, const struct cm_conn *c, struct ibv_qp_attr *a,
		    int *mask);

/* Message formatting (also used by the golden test). */
void ib_format_req(const struct uroce_cm *cm, const struct cm_conn *c,
		   const struct ib_req_param *p, struct uroce_cm_msg *m);
uint64_t ib_form_tid(const struct uroce_cm *cm, uint32_t local_id);

/* A line for ops.note (printf-style; nothing when there is no note callback). */
void cm_note(const struct uroce_cm *cm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Counting. */
static inline void cm_count_drop(struct uroce_cm *cm, enum uroce_cm_drop d)
{
	cm->stats.drop[d]++;
	cm->stats.drops++;
}
static inline unsigned cm_attr_slot(uint16_t attr)
{
	return attr >= UROCE_CM_ATTR_REQ && attr <= UROCE_CM_ATTR_APR ? attr - UROCE_CM_ATTR_REQ : 0;
}

#endif
