/*
 * rsocket_priv.h — uroce's rsockets (<rdma/rsocket.h>): sockets over RDMA, wire-compatible
 * with rdma-core v44's rsocket.c (rs_proto.h has the formats, docs/rsocket.md the
 * protocol and the differences).
 *
 *   rsocket.c    the socket table, configuration, rsocket/rbind/rlisten/raccept/rconnect,
 *                names, options, rfcntl, rshutdown/rclose; the connect state machine
 *   rs_stream.c  SOCK_STREAM over RC: buffers and QP, connection data, completions,
 *                credits, rsend/rrecv families, iomap (riomap/riounmap/riowrite)
 *   rs_poll.c    rpoll, rselect
 *   rs_svc.c     the service thread: accepts, asynchronous connects, CM events of
 *                connected sockets, keepalives, the UDP side of datagram sockets
 *   rs_dgram.c   SOCK_DGRAM over UD
 *
 * A stream rsocket's number is its synchronous rdma_cm id's channel fd, a datagram's is
 * its UDP socket: real open fds, so librspreload (which keeps its own /dev/null fd per
 * socket and hands us our number) can never confuse one with another fd.
 *
 * Locks of a stream rsocket (in this order when nested):
 *   slock         one sender at a time (rsend/rwrite/riowrite families, rshutdown)
 *   rlock         one receiver at a time
 *   map_lock      the iomap lists
 *   cq_lock       the CQ and every counter completions change (credits, send space,
 *                 the target SGL, the received-message ring), the state
 *   cq_wait_lock  the one thread that sleeps on the completion channel
 * conn_lock serialises the connect state machine (app threads and the service thread).
 */
#ifndef UROCE_ABI_RDMACM_RSOCKET_PRIV_H
#define UROCE_ABI_RDMACM_RSOCKET_PRIV_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "rs_proto.h"

/* rdma-core's constants (rsocket.c). */
#define RS_OLAP_START_SIZE 2048   /* the first chunk of a send; doubles up to ... */
#define RS_MAX_TRANSFER 65536     /* ... the largest RDMA WRITE of one message */
#define RS_SNDLOWAT 2048          /* send space needed before a send is posted */
#define RS_QP_MIN_SIZE 16
#define RS_QP_MAX_SIZE 0xFFFE
#define RS_QP_CTRL_SIZE 4         /* control messages in flight (power of 2) */
#define RS_CONN_RETRIES 6         /* resolve timeouts 1000 << n ms */
#define RS_CLOSE_WAIT_MS 10000    /* uroce: bound on rshutdown/rclose waiting for the peer */

/*
 * Stream states.  Connected sockets carry two more bits (rd/wr still open).
 *
 *   INIT --rbind--> BOUND --rlisten--> LISTENING
 *   INIT/BOUND --rconnect--> RESOLVING_ADDR -> RESOLVING_ROUTE -> CONNECTING --> CONNECTED
 *        (each step -> CONNECT_ERROR on failure; the service thread drives the
 *         asynchronous ones)
 *   (accepted: created CONNECTED by the service thread)
 *   CONNECTED --CTRL DISCONNECT sent/received, SHUTDOWN when not writable--> DISCONNECTED
 *   CONNECTED --peer vanished (DISCONNECTED event without DISCONNECT), malformed message,
 *               credit overrun, transport error--> ERROR (a reset: QP to ERR, DREQ)
 */
enum rs_state {
	RS_INIT,
	RS_BOUND,
	RS_LISTENING,
	RS_RESOLVING_ADDR,
	RS_RESOLVING_ROUTE,
	RS_CONNECTING,
	RS_CONNECTED,
	RS_CONNECT_ERROR,
	RS_DISCONNECTED,
	RS_ERROR,
	RS_DGRAM,                 /* a datagram socket (rs_dgram.c) */
};

static inline bool rs_opening(int state)
{
	return state == RS_RESOLVING_ADDR || state == RS_RESOLVING_ROUTE ||
	       state == RS_CONNECTING;
}

/* The reasons a connected socket was reset, each counted (rs_stats). */
enum rs_reset {
	RS_RESET_NONE,
	RS_RESET_PEER_GONE,       /* DISCONNECTED (DREQ) with no DISCONNECT/SHUTDOWN before */
	RS_RESET_BAD_OPCODE,      /* reserved or local-only message type */
	RS_RESET_BAD_CTRL,        /* CTRL with an unknown code */
	RS_RESET_BAD_LEN,         /* message whose written length does not fit its type */
	RS_RESET_DATA_OVERRUN,    /* more data than the buffers we advertised */
	RS_RESET_CREDIT_OVERRUN,  /* more messages than the credits we gave */
	RS_RESET_BAD_IOMAP,       /* iomap index beyond our iomap */
	RS_RESET_NOT_WRITE_IMM,   /* a completion that is not an RDMA WRITE with immediate */
	RS_RESET_RECV_ERROR,      /* a receive failed (not a flush we caused) */
	RS_RESET_SEND_ERROR,      /* a send failed: the transport gave up */
	RS_RESET_COUNT,
};

extern _Atomic unsigned long rs_reset_count[RS_RESET_COUNT];
const char *rs_reset_name(enum rs_reset r);
/* A line on stderr, "WHO: ...", when $UROCE_RS_DEBUG is set (and not 0). */
void rs_debugf(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct rs_iomap_mr {
	struct rs_iomap_mr *next;
	uint64_t offset;
	struct ibv_mr *mr;
	int refcnt;
	int index;                /* -1: local only (not sent to the peer) */
	bool queued;              /* not yet sent */
};

struct rs_rmsg {
	uint32_t len;             /* bytes of a DATA message still unread */
};

struct ds_qp;
struct ds_dest;

struct rsock {
	int type;                 /* SOCK_STREAM or SOCK_DGRAM */
	int index;                /* the socket number */
	int index_fd;             /* an accepted socket's own number (raccept), or -1 */
	int state;                /* enum rs_state (under cq_lock once connected) */
	bool rd_open, wr_open;    /* CONNECTED: not shut down for reading / writing */
	int err;                  /* pending error (SO_ERROR, next call) */
	bool reset_reported;      /* the pending error of a reset has been returned */
	enum rs_reset reset;      /* why it was reset (RS_ERROR) */
	bool need_reset;          /* tell the peer (QP to ERR, DREQ) once locks are dropped */
	bool peer_closing;        /* DISCONNECT or SHUTDOWN seen: a DISCONNECTED is orderly */
	bool shutting;            /* we moved the QP to ERR: flushes are ours */
	int fd_flags;             /* rfcntl F_GETFL/F_SETFL */
	int domain;

	pthread_mutex_t slock, rlock, cq_lock, cq_wait_lock, map_lock, conn_lock;

	/* options (rsetsockopt) */
	uint64_t so_opts, tcp_opts, ipv6_opts;   /* bit per option that is on */
	unsigned keepalive_time;  /* seconds */
	bool keepalive;
	void *route;              /* RDMA_ROUTE: ibv_path_data[] for rconnect */
	size_t route_len;

	/* sizes */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	uint16_t target_iomap_size;

	/* ---- stream ---- */
	struct rdma_cm_id *cm_id;
	int retries;
	int evfd;                 /* eventfd readable once an asynchronous connect ended, -1 */
	int accept_q[2];          /* LISTENING: new sockets (pointers) from the service thread */
	bool in_svc;              /* registered with the service thread */

	unsigned ctrl_seqno, ctrl_max_seqno;
	uint16_t sseq_no, sseq_comp, rseq_no, rseq_comp;
	uint16_t recv_seq;        /* messages received that count against credits */
	uint16_t credit_limit;    /* the last credit limit we gave */
	uint64_t adv_bytes, rcvd_bytes;   /* receive buffer advertised / written by the peer */

	int remote_sge;
	struct rs_sge_h remote_sgl, remote_iomap;
	bool peer_be;             /* the peer set RS_CONN_FLAG_NET */

	struct ibv_mr *target_mr;
	uint8_t *target_buf;      /* RS_SGL_SIZE rs_sge, then target_iomap_size rs_iomap */
	int target_sge;
	struct rs_sge_h tsge[RS_SGL_SIZE];   /* our copy of the target SGL entries ... */
	bool tsge_valid[RS_SGL_SIZE];        /* ... valid since the SGL message that wrote it */
	struct rs_sge_h *tiomap;  /* copy of target_iomap entries (valid once announced) */
	uint64_t *tiomap_off;
	bool *tiomap_valid;

	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t rbuf_bytes_avail, rbuf_free_offset, rbuf_offset;
	struct rs_rmsg *rmsg;     /* rq_size + 1 entries */
	int rmsg_head, rmsg_tail;

	uint8_t *sbuf;            /* sbuf_size, then RS_QP_CTRL_SIZE control slots */
	struct ibv_mr *smr;
	uint32_t sbuf_bytes_avail;
	uint32_t sbuf_pos;        /* next byte of sbuf to fill */
	int sqe_avail;

	struct ibv_comp_channel *cq_ch;
	struct ibv_cq *cq;
	atomic_int cq_armed;
	unsigned unack_cqe;

	struct rs_iomap_mr *iomap_list;       /* sent or local */
	struct rs_iomap_mr *iomap_queue;      /* waiting to be sent */
	struct rs_iomap_mr *remote_iomappings;   /* remote_iomap.length slots */
	bool iomap_pending;

	/* service thread */
	int svc_kind;             /* what its registered fd is (rs_svc.c) */
	struct rsock *listener;   /* an accept under way: whose queue it joins */
	uint64_t ka_next_ms;      /* next keepalive */

	/* ---- datagram ---- */
	int udp_sock;
	int epfd;
	struct ds_qp *qp_list;
	void *dest_map;           /* tsearch tree of struct ds_dest */
	struct ds_dest *conn_dest;
	int rqe_avail;
	uint8_t *dsbuf;           /* sq_size send slots of RS_SNDLOWAT */
	int *dsfree;              /* free send slots */
	int dsfree_n;
	struct ds_rmsg *dmsg;
	bool in_udp_svc;
};

/* ---- rsocket.c ---- */
struct rsock *rs_lookup(int fd);
int rs_table_set(int fd, struct rsock *rs);
void rs_table_clear(int fd);
struct rsock *rs_alloc(const struct rsock *inherit, int type);
void rs_free(struct rsock *rs);
void rs_configure(void);
extern unsigned rs_polling_time_us;
extern int rs_wake_up_interval_ms;
/* The connect state machine; 0, or -1 with errno (EINPROGRESS while under way). */
int rs_do_connect(struct rsock *rs);
int rs_set_nonblock_fd(int fd, bool on);
uint64_t rs_now_us(void);

/* ---- rs_stream.c ---- */
int rs_create_ep(struct rsock *rs);
void rs_format_conn(struct rsock *rs, uint8_t out[RS_CONN_DATA_LEN]);
int rs_save_conn(struct rsock *rs, const void *data, size_t len);
/* Process the CQ until test(rs) holds: 0, -1/EWOULDBLOCK (nonblock), -1/errno. */
int rs_process_cq(struct rsock *rs, bool nonblock, bool (*test)(struct rsock *rs));
int rs_get_comp(struct rsock *rs, bool nonblock, bool (*test)(struct rsock *rs));
/* Consume one completion event after the channel fd showed readable (rpoll). */
void rs_take_cq_event(struct rsock *rs);
bool rs_can_send(struct rsock *rs);
bool rs_conn_can_send(struct rsock *rs);
bool rs_have_rdata(struct rsock *rs);
bool rs_conn_have_rdata(struct rsock *rs);
bool rs_is_cq_armed(struct rsock *rs);
bool rs_poll_all(struct rsock *rs);
bool rs_all_sends_done(struct rsock *rs);
/* A connected socket enters RS_ERROR (cq_lock held); the peer is told later. */
void rs_reset_locked(struct rsock *rs, enum rs_reset why, int err);
/* After cq_lock is dropped: QP to ERR and a DREQ if a reset asked for it. */
void rs_reset_finish(struct rsock *rs);
/* The CM said DISCONNECTED (service thread). */
void rs_cm_disconnected(struct rsock *rs);
/* rshutdown's message and waits. */
int rs_shutdown_stream(struct rsock *rs, int how, int wait_ms);
void rs_send_keepalive(struct rsock *rs);
void rs_free_stream(struct rsock *rs);
ssize_t rs_recv_stream(struct rsock *rs, void *buf, size_t len, int flags);
ssize_t rs_send_stream(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags);
short rs_poll_revents(struct rsock *rs, short events);

/* ---- rs_svc.c ---- */
enum rs_svc_cmd {
	RS_SVC_ADD_LISTEN,        /* a listener: accept its requests */
	RS_SVC_ADD_CM,            /* a connecting or connected socket: its CM events */
	RS_SVC_REM,               /* forget the socket (it is being closed) */
	RS_SVC_KEEPALIVE,         /* (re)arm or stop the keepalive timer */
	RS_SVC_ADD_UDP,           /* a datagram socket's UDP side */
};
int rs_svc_call(enum rs_svc_cmd cmd, struct rsock *rs);
void rs_svc_after_fork(void);

/* ---- rs_dgram.c ---- */
/* Why a datagram was dropped, each counted (UROCE_RS_DEBUG=1 prints them). */
enum ds_drop {
	DS_DROP_UD_SHORT,         /* a UD receive shorter than GRH + the smallest ds_header */
	DS_DROP_UD_BAD_HDR,       /* a ds_header of an unknown version or length */
	DS_DROP_UD_NO_ROOM,       /* the receive ring was full */
	DS_DROP_UD_ERROR,         /* a receive completed in error */
	DS_DROP_UDP_SHORT,        /* a UDP datagram shorter than a ds_udp_header */
	DS_DROP_UDP_BAD_HDR,      /* wrong tag, version, length or op */
	DS_DROP_UDP_TOO_BIG,      /* more than one receive slot holds */
	DS_DROP_UDP_NO_DEST,      /* no QP or route towards its sender */
	DS_DROP_UDP_NO_SLOT,      /* no send slot to deliver it through our QP */
	DS_DROP_COUNT,
};
extern _Atomic unsigned long ds_drop_count[DS_DROP_COUNT];
const char *ds_drop_name(enum ds_drop d);
int ds_init(struct rsock *rs, int domain);
int ds_init_ep(struct rsock *rs);
int ds_connect(struct rsock *rs, const struct sockaddr *addr, socklen_t len);
ssize_t ds_recvfrom(struct rsock *rs, void *buf, size_t len, int flags,
		    struct sockaddr *src, socklen_t *srclen);
ssize_t ds_sendto(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags,
		  const struct sockaddr *dst, socklen_t dstlen);
void ds_free(struct rsock *rs);
void ds_shutdown(struct rsock *rs);
short ds_poll_revents(struct rsock *rs, short events, bool nonblock, bool arm);
int ds_wait_fd(struct rsock *rs);
void ds_take_cq_event(struct rsock *rs);
void ds_udp_svc_process(struct rsock *rs);

#endif
