/* cm_proto.h — the connection manager's records between librdmacm.so.1 and uroced.
 *
 * uroce splits the RDMA connection manager as Linux does, with uroced in the kernel's
 * place:
 *
 *   librdmacm.so.1 (src/abi/rdmacm)          = rdma-core's librdmacm (cma.c): the API, ids
 *                                              as the application sees them, events and
 *                                              their acks, sync ids, QP state changes
 *                                              (ibv_modify_qp), rdma_getaddrinfo, ep helpers
 *   this protocol                            = the kernel's ucma ABI (rdma_user_cm.h):
 *                                              one command per ucma command, one event
 *                                              record per rdma_ucm_event_resp
 *   uroced (src/cm, src/daemon/cm_*.c)        = the kernel's rdma_cm (cma.c: ids, port
 *                                              spaces, listeners, address and route
 *                                              resolution on RoCE, the CMA header) and
 *                                              IB CM (cm.c: REQ/REP/RTU/REJ/MRA/DREQ/DREP/
 *                                              SIDR on QP1, timers, retransmission,
 *                                              timewait, stale connections), per host
 *
 * So each side can be written from its model: a command does what the ucma command of
 * the same name does in Linux 6.1, an event carries what the kernel's event carries.
 * QPs are the library's: the daemon never touches one, it only computes the attributes
 * (UROCE_CM_OP_INIT_QP_ATTR, as rdma_init_qp_attr()) and learns QP numbers from the
 * connect/accept parameters.
 *
 * ---- Connections -------------------------------------------------------------------
 *
 * Both are AF_UNIX SOCK_SEQPACKET connections to the daemon's usual address
 * (proto.h: "\0" UROCE_IPC_ADDR or $UROCE_IPC_NAME), started on demand as for verbs.
 *
 *   The command connection: one per process (the library opens it on first use,
 *   serialises calls with a mutex).  Strictly request/reply: the library sends one
 *   struct uroce_cm_cmd, the daemon answers with one struct uroce_cm_reply echoing op
 *   and seq.  No command blocks in the daemon: what takes time (address resolution,
 *   the remote side's answer) completes later as an event.  Every id belongs to the
 *   command connection that created it (CREATE_ID, or a CONNECT_REQUEST for a listener
 *   it owns): when that connection closes (exit, crash), the daemon destroys the ids as
 *   the kernel does when a process's rdma_cm file closes — REJ for a connection being
 *   set up, DREQ for an established one, SIDR_REP(reject) for a pending SIDR — so that
 *   the peers see REJECTED / DISCONNECTED instead of hanging.
 *
 *   An event connection: one per rdma_event_channel; its fd is the channel's fd
 *   (pollable, O_NONBLOCK as the application sets it).  The library sends exactly one
 *   record on it, a struct uroce_cm_cmd with op UROCE_CM_OP_CHANNEL_OPEN, and the
 *   daemon answers on it with a struct uroce_cm_reply carrying the channel number.
 *   From then on only the daemon writes, one struct uroce_cm_event per event, in the
 *   order the events happened; anything the library sends later is a protocol error
 *   (the daemon closes the connection).  Events for ids of a channel that is closed
 *   are dropped and counted.  A channel is not owned: any command connection of the
 *   same uid may name it (CREATE_ID, MIGRATE_ID, WAKE).  The one record that is not an
 *   event is WAKE's: event UROCE_CM_EVENT_WAKE, handle 0, which the library drops; it
 *   only makes the fd readable for records the library moved to that channel itself
 *   (an id's records read from its old channel after MIGRATE_ID).
 *
 * The daemon never blocks on a full event connection: it queues events per channel
 * (in order) and writes them as the socket drains.  If a channel's queue overflows
 * (UROCE_CM_EVQ_MAX events, an application that never reads), the daemon drops the
 * newest and counts them; the next event written carries the count in `lost`.
 *
 * ---- Ids and handles -----------------------------------------------------------------
 *
 * An id is named by its `handle`: daemon-assigned, non-zero, never reused while the
 * daemon runs, so a handle in an event always means one id.  Every event carries the
 * handle of the id it is for (a CONNECT_REQUEST: the listener's, and the new id's in
 * new_handle).  An event for an id the library has destroyed may still be in the
 * socket: the library does not know the handle any more and discards it.
 *
 * Events reported to the application and their acks are the library's business
 * (rdma_destroy_id waits for them as librdmacm does).  DESTROY_ID, MIGRATE_ID and
 * LEAVE_MCAST return how many events the daemon has written for the id (or the group)
 * on its channel so far (`events`), so that the library knows how many of them are
 * still in that channel's socket, unread (librdmacm's events_reported is the kernel's
 * count of the ones read).  An id's count is of every event record carrying its
 * handle (its MULTICAST_* ones included; a CONNECT_REQUEST counts for the listener).
 * The library discards a destroyed id's and a left group's unread records when it
 * reads them, as the kernel drops their queued events, and moves a migrated id's to
 * the new channel, as the kernel's ucma_migrate_id moves them.
 *
 * A CONNECT_REQUEST the library discards (its listener destroyed, or the new id
 * could not be set up) gets a DESTROY_ID of its new_handle from the library.  A
 * listener's DESTROY_ID also destroys its new ids that no command has named yet (the
 * library QUERYs each new id when it processes the CONNECT_REQUEST), as the kernel's
 * ucma_free_ctx destroys the new ids of the requests never reported; a later
 * DESTROY_ID of such a handle fails harmlessly.
 *
 * ---- Conventions ----------------------------------------------------------------------
 *
 * Integers in host byte order (both ends on one host); GIDs, sockaddrs and
 * ibv_sa_path_rec as in the verbs/rdma_cm API (network byte order where it says so).
 * status: 0 or -errno, with the errno librdmacm's caller would see for the same
 * failure of the kernel's ucma command (EINVAL for a call in the wrong state,
 * EADDRINUSE, EADDRNOTAVAIL, ENODEV, ENETUNREACH, ...).
 * Every record has a fixed size (the _Static_asserts); a record of another size, magic
 * or version is a protocol error and the daemon closes the connection.
 */
#ifndef UROCE_IPC_CM_PROTO_H
#define UROCE_IPC_CM_PROTO_H

#include <stdint.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>

#define UROCE_CM_MAGIC 0x55434d41u      /* "UCMA" */
#define UROCE_CM_VERSION 1
#define UROCE_CM_PRIV_MAX 224u          /* largest private data field of a CM message (RTU) */
#define UROCE_CM_OPTVAL_MAX 72u         /* rdma_set_option values uroce accepts: the
					 * largest is RDMA_OPTION_IB_PATH's one struct
					 * ibv_path_data (72 bytes; the library sends the
					 * entry the kernel would pick) */
#define UROCE_CM_EVQ_MAX 4096u          /* events queued per channel before dropping */
#define UROCE_CM_DEV_MAX 64u            /* = UROCE_DEV_NAME_MAX */
#define UROCE_CM_EVENT_WAKE 0xFFFFu     /* WAKE's record: not an rdma_cm_event_type */

enum uroce_cm_op {
	UROCE_CM_OP_CHANNEL_OPEN = 1,   /* event connection only -> channel */
	UROCE_CM_OP_CREATE_ID,          /* ps, qp_type, channel -> handle */
	UROCE_CM_OP_DESTROY_ID,         /* handle -> events */
	UROCE_CM_OP_BIND,               /* handle, addr.src (rdma_bind_addr) */
	UROCE_CM_OP_RESOLVE_ADDR,       /* handle, addr.src (family AF_UNSPEC: none),
					 * addr.dst, timeout_ms -> ADDR_RESOLVED / ADDR_ERROR */
	UROCE_CM_OP_RESOLVE_ROUTE,      /* handle, timeout_ms -> ROUTE_RESOLVED / ROUTE_ERROR */
	UROCE_CM_OP_QUERY,              /* handle -> query (addresses, device, path) */
	UROCE_CM_OP_LISTEN,             /* handle, backlog */
	UROCE_CM_OP_CONNECT,            /* handle, conn: REQ (RC/UC) or SIDR_REQ (UD) */
	UROCE_CM_OP_ACCEPT,             /* handle, conn: passive REP / SIDR_REP(success);
					 * active after CONNECT_RESPONSE: RTU (rdma_establish,
					 * and librdmacm's own completion of a connect) */
	UROCE_CM_OP_REJECT,             /* handle, conn.private_data, reject.reason (0: the
					 * default 28, CONSUMER_DEFINED; 35 for rdma_reject_ece):
					 * REJ, or SIDR_REP(reject) on UD */
	UROCE_CM_OP_DISCONNECT,         /* handle: DREQ, or DREP if a DREQ was received */
	UROCE_CM_OP_INIT_QP_ATTR,       /* handle, qp_state -> qp_attr (rdma_init_qp_attr) */
	UROCE_CM_OP_NOTIFY,             /* handle, notify.event (IBV_EVENT_COMM_EST) */
	UROCE_CM_OP_SET_OPTION,         /* handle, option */
	UROCE_CM_OP_MIGRATE_ID,         /* handle, channel -> events (on the old channel) */
	UROCE_CM_OP_JOIN_MCAST,         /* handle, mcast -> MULTICAST_JOIN / _ERROR */
	UROCE_CM_OP_LEAVE_MCAST,        /* handle, mcast.group -> events for that group */
	UROCE_CM_OP_STATS,              /* -> stats (for `uroce stat`; no handle) */
	UROCE_CM_OP_EVENT,              /* daemon -> library, on an event connection only */
	UROCE_CM_OP_WAKE,               /* wake.channel: one UROCE_CM_EVENT_WAKE record on
					 * that channel (no handle) */
	UROCE_CM_OP_MAX
};

/* rdma_conn_param / rdma_ud_param as they cross: what the library's caller passed (the
 * library has already applied librdmacm's defaults and checks: RDMA_MAX_RESP_RES and
 * RDMA_MAX_INIT_DEPTH resolved against the device, retry/rnr clamped to 7, the QP's
 * number and type filled in when the id has a QP). */
struct uroce_cm_conn {
	uint8_t private_data[UROCE_CM_PRIV_MAX];
	uint8_t private_data_len;       /* the user's bytes (the daemon adds the CMA header) */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t qp_type;                /* enum ibv_qp_type of the QP: IBV_QPT_RC / UC / UD
					 * (the daemon takes the REQ's transport from the id,
					 * as the kernel does; in CONNECT_REQUEST and
					 * CONNECT_RESPONSE it reports the REQ's) */
	uint32_t qp_num;
	uint32_t qkey;                  /* UD accept: the Q_Key to advertise (0: the id's) */
};

struct uroce_cm_cmd {
	uint32_t magic;
	uint16_t version;
	uint16_t op;                    /* enum uroce_cm_op */
	uint32_t seq;
	uint32_t handle;                /* the id; 0 for CHANNEL_OPEN, CREATE_ID, STATS */
	union {
		struct {                        /* CREATE_ID */
			uint32_t ps;            /* enum rdma_port_space */
			uint32_t qp_type;       /* enum ibv_qp_type (RC for TCP/IB, UD for UDP/IPOIB) */
			uint32_t channel;       /* from CHANNEL_OPEN */
		} create;
		struct {                        /* BIND, RESOLVE_ADDR */
			struct sockaddr_storage src;
			struct sockaddr_storage dst;
			uint32_t timeout_ms;
		} addr;
		struct {                        /* RESOLVE_ROUTE */
			uint32_t timeout_ms;
		} route;
		struct {                        /* LISTEN */
			int32_t backlog;
		} listen;
		struct uroce_cm_conn conn;      /* CONNECT, ACCEPT, REJECT (private data only) */
		struct {                        /* REJECT */
			struct uroce_cm_conn conn;
			uint16_t reason;
		} reject;
		struct {                        /* INIT_QP_ATTR */
			uint32_t qp_state;      /* enum ibv_qp_state: INIT, RTR, RTS */
		} init_qp;
		struct {                        /* NOTIFY */
			uint32_t event;         /* enum ibv_event_type */
		} notify;
		struct {                        /* SET_OPTION */
			int32_t level, optname; /* RDMA_OPTION_ID / RDMA_OPTION_IB */
			uint32_t optlen;
			uint8_t optval[UROCE_CM_OPTVAL_MAX];
		} option;
		struct {                        /* MIGRATE_ID */
			uint32_t channel;
		} migrate;
		struct {                        /* WAKE */
			uint32_t channel;
		} wake;
		struct {                        /* JOIN_MCAST, LEAVE_MCAST */
			struct sockaddr_storage group;
			uint64_t cookie;        /* the join's context: MULTICAST_JOIN's private_data */
			uint32_t join_flags;    /* enum rdma_cm_join_mc_flags */
		} mcast;
		uint8_t raw[512];
	} u;
};

/* What QUERY returns: the id as the kernel's RDMA_USER_CM_CMD_QUERY (ADDR, ROUTE and
 * PATH) would describe it, enough for the library to fill rdma_cm_id.route and open
 * id->verbs. */
struct uroce_cm_query {
	struct sockaddr_storage src;    /* the bound/resolved local address (port included) */
	struct sockaddr_storage dst;
	char dev[UROCE_CM_DEV_MAX];     /* the uroce device, "" before the id has one */
	uint64_t node_guid;             /* network byte order, as ibv_device_attr.node_guid */
	uint8_t port_num;               /* 1, 0 before the id has a device */
	uint8_t num_paths;              /* 0 or 1 */
	uint16_t pkey;                  /* 0xffff */
	uint32_t sgid_index;            /* of the id's source GID on the device */
	union ibv_gid sgid, dgid;
	struct ibv_sa_path_rec path;    /* valid when num_paths = 1 (after ROUTE_RESOLVED,
					 * and on the passive side from the REQ) */
	uint32_t state;                 /* the daemon's id state (enum uroce_cm_state,
					 * src/cm): for `uroce` diagnostics and tests */
	uint32_t qp_num;                /* this id's QP number as CONNECT / ACCEPT gave it
					 * (conn.qp_num), 0 if none yet */
};

struct uroce_cm_stats {
	/* One counter per CM message kind (IBA 12.6 attribute ID - 0x10: REQ .. APR),
	 * sent and received on QP1 by this daemon, all devices. */
	uint64_t mad_sent[11], mad_rcvd[11];
	uint64_t retransmits;           /* MADs sent again by the retry timer */
	uint64_t timeouts;              /* a MAD whose retries ran out */
	uint64_t rej_sent[64], rej_rcvd[64];  /* by reason code (0..63) */
	uint64_t drops;                 /* QP1 datagrams dropped (sum of drop[]) */
	uint64_t drop[16];              /* by reason (enum uroce_cm_drop in src/cm) */
	uint64_t ev_lost;               /* events dropped (full queue, closed channel) */
	uint32_t ids, listeners, connections, timewait;  /* gauges */
	/* REQs and SIDR_REQs that found no listener and waited the listen grace period
	 * for one (docs/cm.md): all of them, those a listener then took, and how many
	 * wait now (a gauge). */
	uint64_t held, held_matched;
	uint32_t held_now, resv;
};

struct uroce_cm_reply {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	uint32_t seq;
	int32_t status;                 /* 0 or -errno */
	union {
		uint32_t handle;        /* CREATE_ID */
		uint32_t channel;       /* CHANNEL_OPEN */
		uint32_t events;        /* DESTROY_ID, MIGRATE_ID, LEAVE_MCAST */
		struct {                /* INIT_QP_ATTR */
			struct ibv_qp_attr attr;
			int32_t mask;   /* enum ibv_qp_attr_mask */
		} qp;
		struct uroce_cm_query query;
		struct uroce_cm_stats stats;
		uint8_t raw[2048];
	} u;
};

/* One event, as rdma_cm_event (and the kernel's rdma_ucm_event_resp) carries it. */
struct uroce_cm_event {
	uint32_t magic;
	uint16_t version;
	uint16_t op;                    /* UROCE_CM_OP_EVENT */
	uint32_t event;                 /* enum rdma_cm_event_type, or UROCE_CM_EVENT_WAKE */
	int32_t status;                 /* as the kernel reports it: 0, -errno (-ETIMEDOUT
					 * for UNREACHABLE after retries, ...), a REJ reason
					 * (REJECTED, positive) or a SIDR status */
	uint32_t handle;                /* the id; CONNECT_REQUEST: the listener */
	uint32_t new_handle;            /* CONNECT_REQUEST: the new id, in the CONNECT state,
					 * owned by the listener's command connection and on
					 * the listener's channel (the library QUERYs it) */
	uint32_t lost;                  /* events of this channel dropped before this one */
	uint32_t pad;
	union {
		struct uroce_cm_conn conn;      /* CONNECT_REQUEST (RC/UC), CONNECT_RESPONSE,
						 * ESTABLISHED, REJECTED, DISCONNECTED ... */
		struct {                        /* UD: CONNECT_REQUEST (SIDR_REQ), ESTABLISHED
						 * (SIDR_REP), MULTICAST_JOIN */
			uint8_t private_data[UROCE_CM_PRIV_MAX];
			uint8_t private_data_len;
			uint8_t pad[3];
			uint32_t qp_num;
			uint32_t qkey;
			struct ibv_ah_attr ah_attr;
			uint64_t mc_cookie;     /* MULTICAST_JOIN / _ERROR: the join's cookie */
		} ud;
	} param;
};

_Static_assert(sizeof(struct uroce_cm_cmd) <= 1024, "command record");
_Static_assert(UROCE_CM_OPTVAL_MAX >= sizeof(struct ibv_path_data), "IB_PATH fits");
_Static_assert(sizeof(struct uroce_cm_reply) <= 2080, "reply record");
_Static_assert(sizeof(struct uroce_cm_query) <= 2048, "query fits the reply");
_Static_assert(sizeof(struct uroce_cm_stats) <= 2048, "stats fit the reply");

#endif
