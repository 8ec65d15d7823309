/*
 * Private definitions shared by the files of the drop-in librdmacm.so.1.
 *
 * The library is rdma-core 44's librdmacm (cma.c, addrinfo.c) rewritten for uroce:
 * where librdmacm writes a ucma command to /dev/infiniband/rdma_cm, this one sends a
 * struct uroce_cm_cmd to uroced (ipc/cm_proto.h), and where librdmacm reads an event
 * from the kernel, this one reads a struct uroce_cm_event from the channel's own
 * connection to the daemon.  docs/rdmacm.md maps each call onto the protocol.
 *
 *   cm_conn.c     the command connection (one per process), the id table, fork
 *   cm_dev.c      devices: one shared ibv_context and default PD per uroce device;
 *                 rdma_get_devices / rdma_free_devices
 *   cm_event.c    event channels, rdma_get_cm_event / rdma_ack_cm_event, what the
 *                 library does to each event (librdmacm's conversions), DEVICE_REMOVAL
 *                 when the daemon goes away
 *   cm_id.c       ids: create/destroy, bind, resolve, listen, connect, accept, reject,
 *                 disconnect, establish, notify, options, migrate, sync completion
 *   cm_qp.c       rdma_create_qp[_ex] / rdma_destroy_qp, SRQs, rdma_init_qp_attr and
 *                 the QP state changes librdmacm makes; ECE
 *   cm_ep.c       rdma_create_ep / rdma_destroy_ep / rdma_get_request
 *   cm_mcast.c    rdma_join_multicast[_ex] / rdma_leave_multicast
 *   addrinfo.c    rdma_getaddrinfo / rdma_freeaddrinfo
 *   channel.c     rdma_event_str
 *
 * The library is compiled with -fvisibility=hidden; only functions marked UROCE_EXPORT
 * *and* listed in librdmacm.map are exported (a name must pass both gates, so a helper
 * that forgets `static` still cannot leak into the ABI).
 *
 * Error convention (the librdmacm one, not the internal 0/-errno one): int-returning
 * exported calls return 0 or -1 with errno set, pointer-returning calls return the
 * object or NULL with errno set.  Internal helpers (cm_*) return 0 or -errno; the
 * exported wrappers convert with cm_err().  rsocket calls fail with ENOSYS (another
 * issue).  No failing call writes through a caller's pointer.
 *
 * Locking: cm_lock (cm_conn.c) guards the id table, every id's and multicast group's
 * event counters and condition variables, each id's multicast list, and each
 * channel's backlog.  It is a leaf lock held for short sections only: nothing
 * talks to the daemon or to libibverbs while holding it.  A command connection has
 * its own mutex for one request in flight; the device list has its own (cm_dev.c).
 */
#ifndef UROCE_ABI_RDMACM_PRIV_H
#define UROCE_ABI_RDMACM_PRIV_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "ipc/cm_proto.h"

#define UROCE_EXPORT __attribute__((visibility("default")))

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* User private data per CM message (IBA 12.6, rdma_cm's 36-byte CMA header taken off
 * REQ and SIDR_REQ), what rdma_connect/accept/reject accept (the kernel's EINVAL). */
enum {
	CM_PRIV_REQ = 56,          /* 92 - 36 */
	CM_PRIV_REP = 196,
	CM_PRIV_REJ = 148,
	CM_PRIV_SIDR_REQ = 180,    /* 216 - 36 */
	CM_PRIV_SIDR_REP = 136,
};

/* ---- the command connection (cm_conn.c) ---- */
struct cm_conn {
	int fd;
	pid_t owner;               /* the process that opened it (fork: the child's is new) */
	pid_t daemon;              /* the daemon's pid (SO_PEERCRED): which daemon it is */
	uint32_t seq;
	bool dead;                 /* sticky: the daemon closed or reset the connection */
	int refs;                  /* ids that belong to it, + 1 while it is the current one */
	pthread_mutex_t lock;      /* one request in flight */
};

/* The process's command connection, opened (daemon autostarted) on first use and
 * again after the daemon went away.  0 or -errno (-ENODEV when no daemon). */
int cm_conn_get(struct cm_conn **out);
void cm_conn_put(struct cm_conn *c);
void cm_conn_hold(struct cm_conn *c);
/* The pid of a connection's peer (SO_PEERCRED), 0 if unknown. */
pid_t cm_peer_pid(int fd);
/* One command: fills magic/version/seq, waits (bounded) for its reply.  Returns the
 * reply's status (0 or -errno), -ENODEV once the daemon has gone, -ETIMEDOUT,
 * -EBADF from a process forked after the connection was opened. */
int cm_call(struct cm_conn *c, uint16_t op, uint32_t handle, struct uroce_cm_cmd *cmd,
	    struct uroce_cm_reply *rep);
/* Timeout of every wait for a reply (ipc.h's bound). */
int cm_timeout_ms(void);

extern pthread_mutex_t cm_lock;
/* Debug output (UROCE_CM_DEBUG=1): one line per discarded record and similar. */
void cm_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Set errno from a -errno and return -1 (0 stays 0). */
static inline int cm_err(int ret)
{
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

/* ---- devices (cm_dev.c) ---- */
struct cm_dev {
	struct cm_dev *next;
	struct ibv_device *ibdev;
	char name[UROCE_CM_DEV_MAX];
	struct ibv_context *verbs;
	struct ibv_pd *pd;          /* the default PD, while ids use the device */
	int refcnt;                 /* ids (and rdma_get_devices lists) that use it */
	int max_qp_wr;
	uint8_t max_init_depth;     /* u8 of max_qp_init_rd_atom, as librdmacm */
	uint8_t max_resp_res;       /* u8 of max_qp_rd_atom */
};

/* librdmacm's ucma_init(): at least one RDMA device, else -ENODEV. */
int cm_init(void);
/* The device named `name` (a uroce device), opened, with its PD; a reference. */
int cm_dev_get(const char *name, struct cm_dev **out);
void cm_dev_put(struct cm_dev *dev);
/* fork child: forget the parent's devices (their contexts are the parent's). */
void cm_dev_forget_after_fork(void);

/* ---- channels (cm_event.c) ---- */
struct cm_rec {
	struct cm_rec *next;
	struct uroce_cm_event ev;
	bool counted;              /* already routed (a redirected or synthesised record) */
};

struct uroce_cm_channel {
	struct rdma_event_channel pub;  /* first: the pointer the application holds */
	uint32_t number;           /* the daemon's channel number (CHANNEL_OPEN) */
	pid_t owner;               /* process that created it */
	pid_t daemon;              /* peer pid of the event connection */
	bool sync;                 /* a sync id's private channel */
	/* Under cm_lock: */
	struct cm_rec *backlog, *backlog_tail;  /* records to hand out before the socket */
	bool dead;                 /* EOF seen: DEVICE_REMOVAL queued for its ids */
	uint32_t wakes;            /* WAKE records asked for and not yet read */
	bool closed;               /* destroyed: no reader touches the fd again */
	bool closed_nonblock;      /* ... and the fd was O_NONBLOCK then */
	int readers;               /* threads between taking the fd and leaving recv() */
	struct uroce_cm_channel *tomb_next;  /* destroyed channels, kept until exit */
};

static inline struct uroce_cm_channel *cm_chan(struct rdma_event_channel *ch)
{
	return container_of(ch, struct uroce_cm_channel, pub);
}

/* Open an event connection: 0 and the channel, or -errno (-ENODEV: no device or no
 * daemon that speaks the connection manager's protocol). */
int cm_channel_open(bool sync, struct uroce_cm_channel **out);
/* Close a channel the library opened itself (a sync id's private one) and free it.
 * Readers inside recv() are woken and waited for first (see rdma_destroy_event_channel
 * for the application's channels, which are kept as tombstones instead). */
void cm_channel_close(struct uroce_cm_channel *ch);
/* Queue a record on a channel's backlog (cm_lock held). */
void cm_backlog_push(struct uroce_cm_channel *ch, struct cm_rec *r);
/* Read one record from a channel's socket, never blocking: 1 and *out (malloc'ed),
 * 0 when nothing is there, -errno, -ECONNRESET on EOF (then the channel is dead
 * and DEVICE_REMOVAL records are queued for its ids), -ESHUTDOWN once the channel
 * has been destroyed. */
int cm_channel_read_nb(struct uroce_cm_channel *ch, struct cm_rec **out);
/* Give a record read from `ch`'s socket to whoever must see it: 1 if it stays on
 * `ch` (the caller processes it), 0 if it was moved to the backlog of *moved_to (an
 * id migrated while the record was in flight; cm_lock held).  The caller then
 * cm_channel_wake()s that channel, without cm_lock. */
int cm_route_locked(struct uroce_cm_channel *ch, struct cm_rec *r,
		    struct uroce_cm_channel **moved_to);
/* Ask the daemon for a WAKE record on ch (its fd turns readable for the records
 * moved to its backlog).  Best effort. */
void cm_channel_wake(struct uroce_cm_channel *ch);

/* ---- ids ---- */
struct cm_id;

struct cm_mc {
	struct cm_mc *next;
	struct cm_id *id;
	void *context;
	uint64_t cookie;           /* the join's cookie (cm_proto.h): unique per process */
	uint16_t join_flags;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	union ibv_gid mgid;
	uint16_t mlid;
	uint32_t reported, completed;   /* under cm_lock */
	pthread_cond_t cond;
};

struct cm_id {
	struct rdma_cm_id id;       /* first: the pointer the application holds */
	uint32_t handle;            /* the daemon's; 0 before CREATE_ID */
	struct cm_conn *conn;       /* the command connection that owns it */
	struct cm_dev *dev;         /* once the daemon has put the id on a device */
	pid_t owner;
	bool sync;                  /* NULL channel: private channel, calls block */
	bool connect_error;         /* CONNECT_ERROR delivered: swallow REJECTED/DISCONNECTED */
	uint8_t initiator_depth, responder_resources;
	struct ibv_ece local_ece, remote_ece;
	struct ibv_qp_init_attr *qp_init_attr;   /* passive rdma_create_ep: for get_request */
	void *connect;              /* rai->ai_connect: prepended to rdma_connect's data */
	size_t connect_len;
	/* Under cm_lock: */
	struct cm_id *hnext;        /* id table chain */
	bool in_table;
	uint32_t reported;          /* events handed out for this id (kernel: events_reported) */
	uint32_t completed;         /* ... acked or swallowed (librdmacm: events_completed) */
	uint32_t chan_reads;        /* records read for it from its channel's socket */
	struct uroce_cm_channel *stale_ch;   /* its channel before the last migration ... */
	uint32_t stale_left;        /* ... and how many of its records are still there */
	bool removal;               /* DEVICE_REMOVAL queued */
	struct cm_mc *mc_list;
	pthread_cond_t cond;
};

static inline struct cm_id *cm_id(struct rdma_cm_id *id)
{
	return container_of(id, struct cm_id, id);
}

/* Allocate an id (no daemon call); the channel is the caller's (sync: a new private
 * one is opened).  -errno. */
int cm_id_alloc(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps,
		enum ibv_qp_type qp_type, struct cm_id **out);
/* Free an id and what the library holds for it (after DESTROY_ID and the wait). */
void cm_id_free(struct cm_id *cid);
/* rdma_create_id with an explicit QP type (rdma_create_ep uses the addrinfo's). */
int cm_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		 enum rdma_port_space ps, enum ibv_qp_type qp_type);
/* A command on an id's connection: -EBADF from another process, -ENODEV when the
 * daemon has gone. */
int cm_id_call(struct cm_id *cid, uint16_t op, struct uroce_cm_cmd *cmd, struct uroce_cm_reply *rep);
/* QUERY the daemon and fill id->route, port_num, verbs/pd (librdmacm's query_route). */
int cm_id_query(struct cm_id *cid);
/* librdmacm's ucma_complete(): for a sync id, ack the previous event, wait for the
 * next one on the private channel, map its status to an errno. */
int cm_complete(struct cm_id *cid);
/* rdma_migrate_id, internal form: 0 / -errno. */
int cm_migrate(struct cm_id *cid, struct rdma_event_channel *channel);
/* One event completed (acked or swallowed): counts it, wakes destroy/migrate. */
void cm_complete_event(struct cm_id *cid, struct cm_mc *mc);

/* id table (cm_lock held) */
void cm_table_insert_locked(struct cm_id *cid);
void cm_table_remove_locked(struct cm_id *cid);
struct cm_id *cm_table_find_locked(pid_t daemon, uint32_t handle);
/* Call fn on every id of the table (cm_lock held). */
void cm_table_each_locked(void (*fn)(struct cm_id *, void *), void *arg);

/* QPs (cm_qp.c) */
int cm_qp_modify_err(struct rdma_cm_id *id);
int cm_qp_rtr(struct cm_id *cid, uint8_t resp_res);
int cm_qp_rts(struct cm_id *cid, uint8_t init_depth);
int cm_init_qp_attr(struct cm_id *cid, struct ibv_qp_attr *attr, int *mask);
/* Active side after CONNECT_RESPONSE: QP to RTR/RTS (if any), then ACCEPT (RTU). */
int cm_conn_resp(struct cm_id *cid);

/* multicast (cm_mcast.c): the group of an event record, cm_lock held. */
struct cm_mc *cm_mc_find_locked(struct cm_id *cid, uint64_t cookie);
/* After MULTICAST_JOIN: attach the id's QP (unless send-only). 0 / -errno. */
int cm_mc_joined(struct cm_mc *mc, const struct ibv_ah_attr *ah);
/* Free every group of an id (destroy), cm_lock not held. */
void cm_mc_free_all(struct cm_id *cid);

/* addrinfo.c */
socklen_t cm_addrlen(const struct sockaddr *addr);

#endif
