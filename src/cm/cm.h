/* cm.h — uroce's connection manager, the daemon half (docs/cm.md).
 *
 * The kernel splits the RDMA connection manager in two: rdma_cm (cma.c: ids, port
 * spaces, listeners, address and route resolution, the CMA private-data header) on top
 * of the IB CM (cm.c: the REQ/REP/RTU/REJ/MRA/DREQ/DREP/SIDR protocol of IBA vol. 1
 * ch. 12 on QP1, its timers, timewait and the duplicate/stale tables).  uroced plays
 * both parts for every process of its network namespace; librdmacm.so.1 (src/abi/rdmacm)
 * talks to it with the records of src/ipc/cm_proto.h, as rdma-core's librdmacm talks
 * to the kernel through ucma.
 *
 * This module is that protocol core as pure C: no sockets, no clock, no threads.
 * Everything comes in through the calls below, each with the current time in ms:
 *   - commands (uroce_cm_command: one struct uroce_cm_cmd, one struct uroce_cm_reply),
 *   - received QP1 packets or MADs (uroce_cm_recv_packet / uroce_cm_recv),
 *   - the clock (uroce_cm_tick; uroce_cm_next_timer says when it is next needed),
 *   - the device table (uroce_cm_set_devices), channels opening and closing, a
 *     client's command connection closing (uroce_cm_client_gone);
 * and goes out through struct uroce_cm_ops (MADs to send, route look-ups, random
 * numbers) and the per-channel event queues (uroce_cm_ev_peek / _pop).  The daemon
 * (src/daemon/cm_*.c) supplies the sockets; the tests (tests/cm) supply a virtual
 * clock and a simulated network.
 *
 * Single-threaded, like the daemon.  Functions returning int give 0 or -errno.
 */
#ifndef UROCE_CM_CM_H
#define UROCE_CM_CM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>

#include "ipc/cm_proto.h"
#include "ipc/ipc.h"
#include "wire/mad.h"

/* rdma_cm id states, in the order of the kernel's enum rdma_cm_state (cma_priv.h).
 * uroce_cm_query.state carries them. */
enum uroce_cm_state {
	UROCE_CM_IDLE,
	UROCE_CM_ADDR_QUERY,
	UROCE_CM_ADDR_RESOLVED,
	UROCE_CM_ROUTE_QUERY,
	UROCE_CM_ROUTE_RESOLVED,
	UROCE_CM_CONNECT,
	UROCE_CM_DISCONNECT,
	UROCE_CM_ADDR_BOUND,
	UROCE_CM_LISTEN,
	UROCE_CM_DEVICE_REMOVAL,
	UROCE_CM_DESTROYING,
	UROCE_CM_NSTATES
};
const char *uroce_cm_state_name(unsigned state);

/* Why a QP1 datagram was dropped: uroce_cm_stats.drop[] is indexed by this.  Every
 * datagram the agent reads is either handled (a MAD counted in mad_rcvd[]) or counted
 * under exactly one of these. */
#define UROCE_CM_DROPS(X)                                                                  \
	X(PKT, "malformed RoCEv2 packet (uroce_pkt_validate)")                             \
	X(ICRC, "ICRC mismatch")                                                           \
	X(NOT_GSI, "not a UD SEND Only to QP1 (another opcode, DestQP or a runt)")        \
	X(PKEY, "BTH P_Key is not the default 0xFFFF")                                     \
	X(QKEY, "DETH Q_Key is not the GSI's 0x80010000")                                  \
	X(MAD_LEN, "payload is not exactly one 256-byte MAD")                              \
	X(MAD_VERSION, "BaseVersion is not 1 or the CM ClassVersion is not 2")            \
	X(MAD_CLASS, "management class is not CM (0x07)")                                  \
	X(MAD_METHOD, "method is not Send")                                                \
	X(MAD_ATTR, "attribute the CM does not serve (ClassPortInfo, LAP, APR, unknown)")  \
	X(MAD_BAD, "inconsistent message (a length field above 72)")                       \
	X(ADDR, "unusable address (destination not a GID of the device, bad source)")      \
	X(NO_MATCH, "no communication ID in a state that takes this message")              \
	X(DUPLICATE, "duplicate, or a late answer the connection no longer waits for")    \
	X(BUSY, "listener backlog full or its channel closed: left for the sender's retry") \
	X(NO_DEVICE, "arrived on a device the CM does not know")

enum uroce_cm_drop {
#define X(n, d) UROCE_CM_DROP_##n,
	UROCE_CM_DROPS(X)
#undef X
	UROCE_CM_NDROPS
};
_Static_assert(UROCE_CM_NDROPS <= 16, "uroce_cm_stats.drop[] has 16 entries");
const char *uroce_cm_drop_name(unsigned drop);
const char *uroce_cm_drop_desc(unsigned drop);

/* ---- The CM's failures: one table (cm_fail.c) -------------------------------------
 *
 * Every way a connection attempt or a connection can fail, what goes on the wire for
 * it and what the applications see, as Linux 6.1 does it (the exceptions are marked
 * and listed in docs/soft-roce-differences.md).  The code raises a failure by name
 * (uroce_cm_fail_info(UROCE_CM_FAIL_NO_LISTENER)), so the REJ reason, the SIDR status,
 * the local event and its status come from here and nowhere else.  The peer columns
 * say what a peer running this code (or Linux) reports when the message arrives; the
 * tests check every row from both sides.
 *
 *   X(name, wire, REJ reason / SIDR status, local event, local status,
 *     peer event, peer status, description)
 *
 * wire: what this side sends (UROCE_CM_WIRE_*).  Events are enum rdma_cm_event_type
 * values (rdma/rdma_cma.h), 0 = none (RDMA_CM_EVENT_ADDR_RESOLVED is 0 but is never a
 * failure event).  A status of ST_REASON means "the REJ reason / SIDR status itself".
 */
enum uroce_cm_wire {
	UROCE_CM_WIRE_NONE,     /* nothing: the peer retries or times out */
	UROCE_CM_WIRE_REJ,      /* REJ with the reason */
	UROCE_CM_WIRE_SIDR_REP, /* SIDR_REP with the status */
	UROCE_CM_WIRE_DREQ,
	UROCE_CM_WIRE_DREP,
};
#define UROCE_CM_ST_REASON 0x7fffffff
#define UROCE_CM_EV_NONE (-1)

#define UROCE_CM_FAILURES(X)                                                                  \
	/* passive side, a REQ arrives */                                                      \
	X(NO_LISTENER, REJ, UROCE_CM_REJ_INVALID_SERVICE_ID, NONE, 0, REJECTED, REASON,          \
	  "no listener for the service ID on the device the REQ arrived on")                    \
	X(STALE_CONN, REJ, UROCE_CM_REJ_STALE_CONN, NONE, 0, REJECTED, REASON,                   \
	  "REQ/REP names a (QPN, CA GUID) of a live connection (IBA 12.9.8.3.1)")              \
	X(INVALID_GID, REJ, UROCE_CM_REJ_INVALID_GID, NONE, 0, REJECTED, REASON,                 \
	  "no path back: GID families differ or no route to REQ:primary local GID")            \
	X(INVALID_MTU, REJ, UROCE_CM_REJ_INVALID_MTU, NONE, 0, REJECTED, REASON,                 \
	  "REQ path MTU invalid or above the netdev's (spec; Linux accepts it)")                \
	X(BAD_CMA_HDR, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,            \
	  "CMA private-data header version not 0 or IP version not 4/6")                       \
	X(NO_ADDR_MATCH, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,          \
	  "listeners on the port, none for the REQ's address family / address")                \
	X(QP_TYPE, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,                \
	  "REQ transport type differs from the listener's QP type")                            \
	X(NETDEV, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,                 \
	  "CMA addresses unusable or not routed through the device's netdev")                  \
	X(BACKLOG, NONE, 0, NONE, 0, NONE, 0,                                                   \
	  "listener backlog full (or its channel gone): REQ dropped, the active retries")       \
	X(CONSUMER_REJECT, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,        \
	  "rdma_reject() (reason 0 means 28; 35 for rdma_reject_ece)")                         \
	X(ACCEPT_FAILED, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,          \
	  "rdma_accept() failed after the REQ (bad private data length, wrong state)")         \
	/* timers */                                                                           \
	X(REQ_TIMEOUT, NONE, 0, UNREACHABLE, -ETIMEDOUT, NONE, 0,                                \
	  "no REP after 1 + Max CM Retries REQs (15 x 6144 ms from Linux)")                    \
	X(REP_TIMEOUT, NONE, 0, UNREACHABLE, -ETIMEDOUT, NONE, 0,                                \
	  "no RTU after 1 + Max CM Retries REPs")                                              \
	X(DREQ_TIMEOUT, NONE, 0, DISCONNECTED, -ETIMEDOUT, NONE, 0,                              \
	  "no DREP after 1 + Max CM Retries DREQs: timewait")                                  \
	X(SIDR_TIMEOUT, NONE, 0, UNREACHABLE, -ETIMEDOUT, NONE, 0,                               \
	  "no SIDR_REP after 1 + 15 SIDR_REQs of 4096 ms")                                     \
	/* destroying an id (rdma_destroy_id, or the process died) */                          \
	X(DESTROY_REQ_SENT, REJ, UROCE_CM_REJ_TIMEOUT, NONE, 0, REJECTED, REASON,                \
	  "destroyed while waiting for the REP: REJ Timeout, ARI = own CA GUID")               \
	X(DESTROY_CONNECTING, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,     \
	  "destroyed between REQ and RTU (REQ/REP received or REP sent)")                      \
	X(DESTROY_ESTABLISHED, DREQ, 0, NONE, 0, DISCONNECTED, 0,                               \
	  "destroyed while connected: one DREQ, then timewait")                                \
	X(DESTROY_DREQ_RCVD, DREP, 0, NONE, 0, DISCONNECTED, 0,                                 \
	  "destroyed after a DREQ arrived: the DREP the application did not send")             \
	X(DESTROY_SIDR_RCVD, SIDR_REP, UROCE_CM_SIDR_REJECT, NONE, 0, UNREACHABLE, REASON,       \
	  "UD: destroyed before answering a SIDR_REQ: SIDR_REP reject")                        \
	/* SIDR */                                                                             \
	X(SIDR_NO_LISTENER, SIDR_REP, UROCE_CM_SIDR_UNSUPPORTED, NONE, 0, UNREACHABLE, REASON,   \
	  "SIDR_REQ for a service ID nobody listens on")                                       \
	X(SIDR_REJECT, SIDR_REP, UROCE_CM_SIDR_REJECT, NONE, 0, UNREACHABLE, REASON,             \
	  "rdma_reject() on a UD id, or an rdma_cm-level refusal of the SIDR_REQ")             \
	X(SIDR_QKEY, NONE, 0, ADDR_ERROR, -EINVAL, NONE, 0,                                      \
	  "SIDR_REP Q_Key differs from the one the id already uses")                           \
	/* the active side's application */                                                    \
	X(CONNECT_ERROR, REJ, UROCE_CM_REJ_CONSUMER_DEFINED, NONE, 0, REJECTED, REASON,          \
	  "the library could not move its QP after the REP (it reports CONNECT_ERROR): the "   \
	  "REJ leaves when it destroys or rejects the id")

enum uroce_cm_fail {
#define X(n, w, r, le, ls, pe, ps, d) UROCE_CM_FAIL_##n,
	UROCE_CM_FAILURES(X)
#undef X
	UROCE_CM_NFAILS
};

struct uroce_cm_failure {
	const char *name;
	uint8_t wire;            /* enum uroce_cm_wire */
	uint16_t reason;         /* REJ reason or SIDR_REP status (0 for none) */
	int32_t local_event;     /* enum rdma_cm_event_type, UROCE_CM_EV_NONE */
	int32_t local_status;
	int32_t peer_event;
	int32_t peer_status;     /* UROCE_CM_ST_REASON: the reason / status */
	const char *desc;
};
const struct uroce_cm_failure *uroce_cm_fail_info(enum uroce_cm_fail f);

/* ---- What the core needs from its host --------------------------------------------- */

/* A MAD to send on QP1: a RoCEv2 UD SEND Only from sgid to QP1 at dgid. */
struct uroce_cm_tx {
	uint32_t dev_id;
	uint8_t sgid[16], dgid[16];      /* IPv4 as ::ffff:a.b.c.d */
	uint8_t traffic_class;
	uint8_t hop_limit;               /* 0: the route's default */
	int64_t uid;                     /* the uid owning the connection it belongs to, or -1
					  * (a REJ or DREP for no id): who may capture it */
	uint8_t mad[UROCE_MAD_SIZE];
};

/* A route look-up's answer (the kernel's fib/ip6 route for rdma_resolve_ip). */
struct uroce_cm_route {
	struct sockaddr_storage src;     /* the preferred source address (port ignored) */
	uint32_t ifindex;                /* egress netdev; for a local destination the
					  * netdev that owns the address (lo for 127/8, ::1) */
	uint8_t hop_limit;               /* the route's hop limit / TTL */
};

enum uroce_cm_rand {
	UROCE_CM_RAND_PSN,               /* an id's starting PSN (24 bits used) */
	UROCE_CM_RAND_PORT,              /* the start of the ephemeral port search */
	UROCE_CM_RAND_COMM_ID,           /* the comm ID operand (once, at create) */
};

struct uroce_cm_ops {
	void (*send_mad)(void *ctx, const struct uroce_cm_tx *tx);
	/* Route to dst, from src (NULL or a wildcard: any) and out of oif (0: any).
	 * 0, or -ENETUNREACH / -EHOSTUNREACH / -EINVAL as the kernel's look-up fails. */
	int (*route)(void *ctx, const struct sockaddr *dst, const struct sockaddr *src,
		     uint32_t oif, struct uroce_cm_route *out);
	/* The netdev a local address belongs to: 0 and *ifindex, or -EADDRNOTAVAIL. */
	int (*local_addr)(void *ctx, const struct sockaddr *addr, uint32_t *ifindex);
	uint32_t (*random)(void *ctx, enum uroce_cm_rand what);
	/* Optional: events became available on channel ch (the host writes them). */
	void (*ev_ready)(void *ctx, uint32_t ch);
	/* Optional: one line about a refused request (for the daemon's verbose log). */
	void (*note)(void *ctx, const char *line);
};

struct uroce_cm_config {
	uint16_t port_low, port_high;    /* net.ipv4.ip_local_port_range (32768 60999) */
	int bindv6only;                  /* net.ipv6.bindv6only (0) */
	int max_backlog;                 /* net.rdma_ucm.max_backlog (1024) */
	uint32_t hi_tid;                 /* TID high half, the MAD agent number (2) */
	uint8_t ack_delay;               /* local CA ACK delay, as ibv_query_device (15) */
	uint32_t evq_max;                /* events queued per channel (UROCE_CM_EVQ_MAX) */
	/* A REQ / SIDR_REQ that matches no listener waits this long for one before it
	 * is refused (REJ 8 / SIDR_REP status 1); 0 refuses at once, as Linux does. */
	uint32_t listen_grace_ms;
	/* Tests: fix the comm ID allocator (else random operand, index from 0). */
	int fixed_comm_id;
	uint32_t comm_id_operand, comm_id_next;
};
#define UROCE_CM_LISTEN_GRACE_MS 300
void uroce_cm_config_default(struct uroce_cm_config *cfg);

/* A device as the CM sees it. */
struct uroce_cm_dev {
	uint32_t id;                     /* the daemon's device id (never reused) */
	int loopback;                    /* its netdev is a loopback device (lo) */
	struct uroce_dev_info info;
};

/* Who sends a command: the command connection (owner of the ids it creates), its uid,
 * and whether it may bind ports below 1024 (CAP_NET_BIND_SERVICE). */
struct uroce_cm_caller {
	uint64_t owner;
	uid_t uid;
	int net_bind_service;
};

struct uroce_cm;

int uroce_cm_create(const struct uroce_cm_config *cfg, const struct uroce_cm_ops *ops,
		    void *ctx, struct uroce_cm **out);
/* Free everything without sending anything (the daemon is exiting). */
void uroce_cm_destroy(struct uroce_cm *cm);

/* Replace the device table.  A device that disappears takes its ids to
 * DEVICE_REMOVAL (with that event) and its connections with it, silently. */
int uroce_cm_set_devices(struct uroce_cm *cm, uint64_t now, const struct uroce_cm_dev *devs,
			 unsigned n);

/* Channels (event connections). */
int uroce_cm_channel_open(struct uroce_cm *cm, uid_t uid, uint32_t *ch);
/* Its queued events are dropped (counted in ev_lost); later events for its ids too. */
void uroce_cm_channel_close(struct uroce_cm *cm, uint32_t ch);

/* One command; rep is filled (magic, version, op, seq, status, union). */
void uroce_cm_command(struct uroce_cm *cm, uint64_t now, const struct uroce_cm_caller *who,
		      const struct uroce_cm_cmd *cmd, struct uroce_cm_reply *rep);

/* The command connection closed: destroy its ids as the kernel does when a process's
 * rdma_cm file closes (REJ / DREQ / DREP / SIDR_REP as each state needs). */
void uroce_cm_client_gone(struct uroce_cm *cm, uint64_t now, uint64_t owner);

/* A received MAD (the QP1 packet checks already passed). */
struct uroce_cm_rx {
	uint32_t dev_id;
	uint8_t sgid[16];                /* the packet's source address as a GID */
	uint8_t dgid[16];                /* its destination address */
	const uint8_t *mad;
	size_t len;
};
void uroce_cm_recv(struct uroce_cm *cm, uint64_t now, const struct uroce_cm_rx *rx);

/* A received UDP payload on a device's QP1 socket, with its IP source and destination
 * (IPv4 as ::ffff:) and UDP source port: the RoCEv2 checks (uroce_pkt_validate with
 * the ICRC, solving for a Linux sender's IPv4 Identification), then UD SEND Only,
 * DestQP 1, P_Key 0xFFFF, Q_Key 0x80010000, exactly 256 bytes, then uroce_cm_recv. */
void uroce_cm_recv_packet(struct uroce_cm *cm, uint64_t now, uint32_t dev_id,
			  const uint8_t *pkt, size_t len, const uint8_t src[16],
			  const uint8_t dst[16], uint16_t sport);

/* The uid owning the connection a received QP1 packet (the UDP payload, as given to
 * uroce_cm_recv_packet, from @src) belongs to, or -1 (no connection, not a CM MAD):
 * who may see it in `uroce capture`.  Asked before the packet is processed (a REJ or
 * DREP may end its connection) and, for a REQ, after (processing creates it). */
int64_t uroce_cm_packet_uid(const struct uroce_cm *cm, const uint8_t *pkt, size_t len,
			    const uint8_t src[16]);

/* The UDP payload for tx: BTH (UD SEND Only, P_Key 0xFFFF, DestQP 1, AckReq, @psn)
 * + DETH (Q_Key 0x80010000, SrcQP 1) + the MAD + ICRC for UDP source port @sport and
 * IPv4 Identification 0 with DF (as netio sends).  Returns the length
 * (UROCE_CM_QP1_PKT_LEN) or -ENOSPC. */
#define UROCE_CM_QP1_PKT_LEN (12u + 8u + UROCE_MAD_SIZE + 4u)
int uroce_cm_build_packet(const struct uroce_cm_tx *tx, uint16_t sport, uint32_t psn,
			  uint8_t *out, size_t cap);

/* Timers: run what is due at @now; the earliest pending deadline (ms), or -1. */
void uroce_cm_tick(struct uroce_cm *cm, uint64_t now);
int64_t uroce_cm_next_timer(const struct uroce_cm *cm);

/* The oldest event queued for channel ch (with `lost` filled in), or NULL; pop it
 * once it has been written to the channel's connection. */
const struct uroce_cm_event *uroce_cm_ev_peek(struct uroce_cm *cm, uint32_t ch);
void uroce_cm_ev_pop(struct uroce_cm *cm, uint32_t ch);
/* Channels with events queued: fills up to n channel numbers, returns how many. */
unsigned uroce_cm_ev_channels(const struct uroce_cm *cm, uint32_t *chs, unsigned n);

/* 1 while any id, connection (timewait included) or timer exists: the daemon must
 * not exit for idleness then. */
int uroce_cm_busy(const struct uroce_cm *cm);
void uroce_cm_get_stats(const struct uroce_cm *cm, struct uroce_cm_stats *out);

#endif
