/* uroced.h — internals of the uroce daemon, one per network namespace.
 *
 * One file per concern:
 *   main.c      arguments, detaching, signals, the event loop
 *   server.c    the IPC listener and clients, request dispatch (proto.h), QPNs
 *               held per client, events to subscribers
 *   devtable.c  devices: netdev attributes and the GID table
 *   qpn.c       the pool of QPN blocks of a device
 *   rxgroup.c   receive steering: the device's SO_REUSEPORT group on UDP 4791
 *   counters.c  clients' shared-memory counters blocks, read for `uroce stat`
 *   state.c     the saved device table (survives a daemon restart)
 *   rtnl.c      rtnetlink watch: addresses and links change under us
 *   log.c       the log
 *   cm_agent.c  the connection manager (src/cm) on QP1: sockets, timerfd, routes
 *   cm_ipc.c    the connection manager's commands, channels and events (cm_proto.h)
 *
 * Single-threaded: everything runs from the epoll loop in main.c, so nothing here
 * locks.  Internal functions return 0 or -errno.
 */
#ifndef UROCED_H
#define UROCED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ipc/ipc.h"
#include "ipc/proto.h"

#define UROCE_MAX_DEVICES 64
#define UROCE_QPN_BITS 24                    /* IBA 9.2: the BTH DestQP field is 24 bits */
#define UROCE_QPN_COUNT (1u << UROCE_QPN_BITS)

/* ---- qpn.c ---------------------------------------------------------------- */

/* A pool of ids with a rotating cursor: a bitmap over `size` ids (touched lazily)
 * where ids below `first` are reserved.  A freed id is reused only after the cursor
 * has gone round the whole space.
 *
 * QPNs are handed out in blocks of UROCE_QPN_BLOCK: a device's pool holds blocks
 * (block 0, with QPN 0 = QP0 and 1 = QP1, is reserved), each client owns whole
 * blocks and allocates QPNs inside them with a cursor of its own.  One block is one
 * receive-steering rule (rxgroup.c), so the steering program stays small however
 * many QPs there are.  Immediate reuse of a QPN would let a stale packet for an old
 * QP (a retransmission from a peer that has not noticed yet) hit a new QP with the
 * same number: the per-client cursor prevents it within a client, and a released
 * block goes to the back of the device's rotation. */
struct qpn_pool {
	uint64_t *bits;
	uint32_t size;       /* ids 0 .. size-1, a power of two, multiple of 64 */
	uint32_t first;      /* ids below are reserved */
	uint32_t cursor;     /* next id to try */
	uint32_t used;       /* allocated, excluding the reserved ones */
};

#define UROCE_QPN_BLOCK 64u
#define UROCE_QPN_BLOCKS (UROCE_QPN_COUNT / UROCE_QPN_BLOCK)

int uroce_id_pool_init(struct qpn_pool *p, uint32_t size, uint32_t first, uint32_t start);
/* The plain QPN pool: size 2^24, QPN 0 and 1 reserved. */
int uroce_qpn_pool_init(struct qpn_pool *p, uint32_t start);
void uroce_qpn_pool_uninit(struct qpn_pool *p);
/* 0 and *qpn, or -ENOSPC when the pool is exhausted. */
int uroce_qpn_alloc(struct qpn_pool *p, uint32_t *qpn);
/* 0, or -EINVAL for a reserved/out-of-range id, -ENOENT if not allocated. */
int uroce_qpn_free(struct qpn_pool *p, uint32_t qpn);
int uroce_qpn_test(const struct qpn_pool *p, uint32_t qpn);

/* ---- devtable.c ----------------------------------------------------------- */

#define UROCE_RX_MAX 256                     /* sockets in a device's reuseport group */

struct uroce_client;

struct uroce_dev {
	uint32_t id;                     /* never reused while the daemon runs */
	struct uroce_dev_info info;      /* what clients see: name, netdev, GIDs, ... */
	struct qpn_pool blocks;          /* QPN blocks (qpn.c) */
	uint32_t qpns_used;              /* QPNs allocated in all blocks */
	struct uroce_dev_stats stats;
	/* Receive steering (rxgroup.c): rx_fd[i] is the socket at index i of the
	 * SO_REUSEPORT group, in bind order.  Index 0 is the daemon's own (QP1,
	 * unknown QPNs, runts); rx_owner[i] is the client using socket i, NULL for a
	 * tombstone kept so that no index ever moves. */
	int rx_fd[UROCE_RX_MAX];
	struct uroce_client *rx_owner[UROCE_RX_MAX];
	unsigned rx_n;                   /* 0: no group yet (created on first use) */
	char rx_tag;                     /* epoll cookie of rx_fd[0] */
	uint32_t pending_events;         /* 1 << UROCE_EV_*, set by refresh, sent by
					  * uroced_flush_events() */
};

struct uroce_devtable {
	struct uroce_dev *dev[UROCE_MAX_DEVICES];
	unsigned n;
	uint32_t next_id;
	uint64_t netns_inode;            /* for a stable lo node GUID */
};

/* Find by device name; NULL if absent. */
struct uroce_dev *uroce_dev_find(struct uroce_devtable *t, const char *name);
struct uroce_dev *uroce_dev_find_id(struct uroce_devtable *t, uint32_t id);
/* Add a device on netdev.  -EEXIST (name or netdev taken), -EINVAL (bad name),
 * -ENOSPC (table full), -ENOMEM.  The netdev need not exist yet: the port is then
 * down with no GIDs until it appears (as after a restart before udev renamed it). */
int uroce_dev_add(struct uroce_devtable *t, const char *name, const char *netdev,
		  struct uroce_dev **out);
int uroce_dev_del(struct uroce_devtable *t, const char *name);
/* Re-read every device's netdev: ifindex, MTU, MAC, flags, addresses -> GIDs.
 * Returns 1 if anything visible to clients changed, 0 if not, -errno on failure. */
int uroce_dev_refresh_all(struct uroce_devtable *t);
void uroce_dev_free_all(struct uroce_devtable *t);
/* GID table update from the current address list, keeping surviving GIDs at their
 * index (exported for the unit test). */
int uroce_gid_merge(struct uroce_dev_info *info, const uint8_t (*gids)[16], unsigned n);

/* ---- state.c -------------------------------------------------------------- */

/* The file holding this namespace's device table; -errno if no directory fits. */
int uroce_state_path(char *buf, size_t size, uint64_t netns_inode);
/* Load: 0 and devices added, -ENOENT if there is no saved table (then the caller
 * adds the default uroce0 on lo). */
int uroce_state_load(struct uroce_devtable *t, const char *path);
int uroce_state_save(const struct uroce_devtable *t, const char *path);

/* ---- rtnl.c --------------------------------------------------------------- */

/* A NETLINK_ROUTE socket subscribed to link and address changes; the fd is
 * non-blocking.  uroce_rtnl_drain() reads everything queued and returns 1 if a
 * relevant event came (the caller then refreshes), 0 otherwise. */
int uroce_rtnl_open(void);
int uroce_rtnl_drain(int fd);

/* ---- server.c / main.c ----------------------------------------------------- */

/* A QPN block owned by a client: QPN (block * UROCE_QPN_BLOCK + bit) is allocated
 * iff bit is set in used. */
struct uroce_block {
	uint32_t block;
	uint64_t used;
};

/* A client's counters block, mapped read-only; map NULL if none.  The layout is
 * the one validated at registration. */
struct uroce_cnt_map {
	const uint8_t *map;
	size_t size;
	uint32_t n_ctx, n_qp, n_slots;
};

/* What a client holds on one device. */
struct uroce_client_dev {
	uint32_t dev_id;
	unsigned rx_index;               /* its socket in the device's group; 0 = none */
	struct uroce_block *blocks;
	size_t nblocks, capblocks;
	size_t cursor;                   /* next slot to try: block index * 64 + bit */
	uint32_t qpns;
	/* Registered counters blocks (counters.c), by role (proto.h UROCE_CNT_BLOCKS). */
	struct uroce_cnt_map cnt[UROCE_CNT_BLOCKS];
	/* Its capture ring (capture.c); NULL if it registered none. */
	struct uroced_cap_ring *cap;
};

/* One record of a counters listing: which client, device, block and slot
 * (UINT32_MAX for the block's context record). */
struct uroce_cnt_pos {
	uint64_t serial;
	uint32_t dev_id;
	uint32_t block;
	uint32_t slot;
};

struct uroce_client {
	uint64_t serial;                 /* unique while the daemon runs */
	int fd;
	pid_t pid;                       /* SO_PEERCRED at connect */
	uid_t uid;
	uint64_t requests;
	struct uroce_client_dev *devs;
	size_t ndevs;
	uint32_t qpns;                   /* over all devices */
	int subscribed;                  /* sends it events */
	int sndbuf;                      /* SO_SNDBUF: events may use half */
	uint32_t ev_lost;                /* events it missed (full socket buffer) */
	/* The counters listing this client is walking (taken at index 0). */
	struct uroce_cnt_pos *cnt_walk;
	size_t cnt_walk_n;
	/* The connection manager (cm_ipc.c): what this connection is to it. */
	uint8_t cm_kind;                 /* enum uroced_cm_kind */
	bool cm_out;                     /* EPOLLOUT asked: its event socket was full */
	int cm_net_bind;                 /* CAP_NET_BIND_SERVICE, read at its first command */
	uint32_t cm_chan;                /* UROCED_CM_EVENT: the channel */
	/* Same-host shared-memory links (shm.c): the wake eventfd it attached (-1: it takes
	 * no part), on which device, and the links peers opened to it that it has not
	 * taken yet (SHM_ACCEPT), by id. */
	int shm_efd;
	uint32_t shm_dev_id;
	uint64_t *shm_pending;
	size_t shm_npending, shm_cappending;
	/* The capture this connection runs (capture.c): its number (0: none) and device. */
	uint32_t cap_session;
	uint32_t cap_dev_id;
};

enum uroced_cm_kind {
	UROCED_CM_NONE,                  /* a verbs (proto.h) connection, or nothing yet */
	UROCED_CM_COMMAND,               /* owns the CM ids it creates */
	UROCED_CM_EVENT,                 /* one event channel */
};

struct uroced {
	struct uroce_devtable devs;
	struct uroce_client **clients;
	size_t nclients, capclients;
	uint64_t generation;             /* bumped when the device table changes */
	uint64_t client_generation;      /* bumped when the client list changes */
	uint64_t next_serial;
	int listen_fd, epoll_fd, rtnl_fd;
	uid_t uid;                       /* the daemon's own uid */
	int64_t start_ms;
	int stop;                        /* set by SHUTDOWN or a signal */
	char state_path[4096];           /* "" if there is nowhere to save */
	char counters_path[4096];        /* counters kept over an idle exit; "" if none */
	/* Lifetime (main.c).  An autostarted daemon exits idle_ms after its last
	 * client went: a daemon per namespace must not keep a namespace alive after
	 * its programs have ended.  Links are in the state file, the departed
	 * clients' counters go to counters_path; nothing else outlives the clients. */
	int autostarted;                 /* exits when idle (cleared by PERSIST) */
	int unsaved;                     /* the device table differs from the saved one:
					  * an exit would lose links, so stay */
	int had_client;                  /* a client has connected since the start */
	int64_t idle_ms;                 /* 0: never exit when idle */
	int64_t idle_since_ms;           /* when the client count last fell to 0 */
	struct uroced_cm *cm;            /* the connection manager; NULL if it failed */
	/* Same-host shared-memory links (shm.c). */
	struct uroced_shm_link **shm_links;
	size_t shm_n, shm_cap;
	uint64_t shm_next_id;
	uint64_t shm_created;            /* links made since the start */
};

/* The default idle time of an autostarted daemon; $UROCE_DAEMON_IDLE_MS or
 * --idle-ms override it. */
#define UROCED_IDLE_MS_DEFAULT 10000
/* A daemon that nobody has connected to yet waits at least this long (the bound on
 * an autostarting client's wait, ipc/client.c), so a tiny idle time cannot make it
 * exit before its starter connects. */
#define UROCED_FIRST_CLIENT_MS 2000

/* The enum uroce_daemon_lifetime value the daemon reports. */
uint32_t uroced_lifetime(const struct uroced *d);

/* Bind and listen on the abstract name: 0, -EADDRINUSE if a daemon already has
 * it, other -errno. */
int uroced_listen(struct uroced *d);
/* Readiness on the listening socket: accept every pending client. */
void uroced_accept(struct uroced *d);
/* Readiness on a client socket (c is the epoll cookie). */
void uroced_client_event(struct uroced *d, struct uroce_client *c, uint32_t events);
void uroced_close_all(struct uroced *d);
/* Send each device's pending events to the subscribed clients and clear them. */
void uroced_flush_events(struct uroced *d);
/* Save the device table (if there is a state path); logs a failure. */
void uroced_save(struct uroced *d);
int64_t uroced_now_ms(void);

/* ---- counters.c ----------------------------------------------------------- */

/* Validate and map a counters block memfd into m (replacing what m held only on
 * success); fd is consumed.  0, -EINVAL (not sealed, bad header or size), -errno. */
int uroced_cnt_register(struct uroce_cnt_map *m, int fd);
void uroced_cnt_unmap(struct uroce_cnt_map *m);
/* A client's block is going away (its connection closed): add its context part to
 * the device's totals of departed clients, name by name.  Never fails (a device whose
 * totals cannot be allocated just lacks them). */
void uroced_cnt_retire(struct uroced *d, uint32_t dev_id, uint32_t block,
		       const struct uroce_cnt_map *m);
/* The device's totals of block role @block: every client's context part of that role
 * plus the departed clients', summed by name (names beyond a record's room are left
 * out).  -EINVAL for a block role that does not exist. */
int uroced_cnt_total(struct uroced *d, const struct uroce_dev *dev, uint32_t block,
		     struct uroce_cnt_record *r);
/* Over an idle exit: write the departed clients' totals and each device's daemon
 * counters to path (text, temporary file renamed), and add what a file holds to
 * the devices of the same name at the next start (which deletes the file, so it
 * is counted once).  0 or -errno. */
int uroced_cnt_save(struct uroced *d, const char *path);
int uroced_cnt_load(struct uroced *d, const char *path);
/* Listing: at index 0 snapshot the positions into c->cnt_walk; then fill record
 * index.  -ENOENT past the end (resp->count says how many). */
int uroced_cnt_get(struct uroced *d, struct uroce_client *c, uint32_t index,
		   struct uroce_ipc_resp *resp);

/* ---- rxgroup.c ------------------------------------------------------------ */

/* This client's receive socket on dev: creates the group (and the daemon's index-0
 * socket) on first use, hands out a drained tombstone or binds a new member.
 * Returns the socket (the daemon keeps this descriptor; the caller sends a copy),
 * -EEXIST if the client has one already, -ENOSPC if the group is full, -errno from
 * socket()/bind(). */
int uroced_rx_get(struct uroced *d, struct uroce_dev *dev, struct uroce_client *c,
		  struct uroce_client_dev *cd);
/* The group and the daemon's index-0 member, created if they do not exist yet (the
 * connection manager needs QP1 on every device).  0 or -errno. */
int uroced_rx_ensure(struct uroced *d, struct uroce_dev *dev);
/* The client is gone (or dropped the device): its socket becomes a tombstone. */
void uroced_rx_release(struct uroced *d, struct uroce_dev *dev, unsigned index);
/* Rebuild the steering program from the owners' blocks and attach it. */
int uroced_steer_update(struct uroced *d, struct uroce_dev *dev);
/* Readiness on a device's index-0 socket: read and count what the default gets. */
void uroced_rx_default(struct uroced *d, struct uroce_dev *dev);
/* epoll cookie -> device, or NULL. */
struct uroce_dev *uroced_rx_dev(struct uroced *d, void *tag);

/* ---- cm_agent.c / cm_ipc.c ------------------------------------------------- */

struct uroced_cm;
/* Start the connection manager (after the epoll set exists); 0 or -errno (the daemon
 * then runs without it: CM commands fail). */
int uroced_cm_init(struct uroced *d);
void uroced_cm_fini(struct uroced *d);
/* The device table may have changed: give it to the CM, make sure every device has
 * its receive group (QP1). */
void uroced_cm_sync_devices(struct uroced *d);
/* A device's index-0 socket is readable: QP1 datagrams for the CM. */
void uroced_cm_rx(struct uroced *d, struct uroce_dev *dev);
bool uroced_cm_is_timer(const struct uroced *d, const void *tag);
void uroced_cm_timer(struct uroced *d);
/* After the CM did anything: write its events, re-arm its timer. */
void uroced_cm_after(struct uroced *d);
void uroced_cm_flush_events(struct uroced *d);
/* A record of cm_proto.h on connection c: 0, or -1 = protocol error (close it). */
struct uroce_cm_cmd;
int uroced_cm_record(struct uroced *d, struct uroce_client *c, const struct uroce_cm_cmd *cmd);
/* c's connection is closing: its ids are destroyed, its channel closed. */
void uroced_cm_client_gone(struct uroced *d, struct uroce_client *c);
/* EPOLLOUT on an event connection. */
void uroced_cm_writable(struct uroced *d, struct uroce_client *c);
/* 1 while the CM holds any id, connection or timer: an idle daemon must not exit then
 * (main.c's idle exit asks this). */
int uroced_cm_busy(const struct uroced *d);

/* ---- shm.c: same-host shared-memory links (ipc/shm_proto.h) ----------------- */

struct uroce_shm_hdr;
/* One link between two client connections (the same one twice for a self link). */
struct uroced_shm_link {
	uint64_t id;
	struct uroce_client *side[2];    /* NULL once that side's connection closed */
	int memfd;                       /* sealed against resizing */
	struct uroce_shm_hdr *hdr;       /* its header page, mapped read-write */
	uint32_t ring_bytes;
};

/* The client holding qpn on dev, or NULL (server.c). */
struct uroce_client *uroced_qpn_owner(struct uroced *d, const struct uroce_dev *dev, uint32_t qpn);
/* SHM_ATTACH: c takes part in links on dev, its wake eventfd is *fd (consumed on success:
 * *fd = -1).  -EEXIST, -EINVAL (not a non-blocking eventfd). */
int uroced_shm_attach(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev, int *fd);
/* SHM_LINK: the link from c to the owner of @dqpn on the device holding @dgid, created if
 * needed; resp->u.shm and out[0] (memfd), out[1] (the peer's eventfd), descriptors the
 * daemon keeps.  -ENOENT, -ENOTCONN (ipc.h). */
int uroced_shm_link(struct uroced *d, struct uroce_client *c, const uint8_t dgid[16], uint32_t dqpn,
		    uint32_t ring_bytes, struct uroce_ipc_resp *resp, int out[2]);
/* SHM_ACCEPT: the oldest link waiting for c; -ENOENT. */
int uroced_shm_accept(struct uroced *d, struct uroce_client *c, struct uroce_ipc_resp *resp, int out[2]);
/* c's connection is closing: its side of every link is marked gone and the peer told. */
void uroced_shm_client_gone(struct uroced *d, struct uroce_client *c);
void uroced_shm_fini(struct uroced *d);

/* ---- capture.c: `uroce capture` (ipc/cap_proto.h, docs/daemon.md "Capturing") ---- */
/* CAP_REGISTER: cd's ring, taking @fd (closed on error). */
int uroced_cap_register(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev,
			struct uroce_client_dev *cd, int fd);
int uroced_cap_start(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev,
		     struct uroce_ipc_resp *resp);
int uroced_cap_next(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev,
		    struct uroce_ipc_resp *resp, int *fd);
/* cd goes away: its ring says so and is let go of. */
void uroced_cap_release(struct uroce_client_dev *cd);
/* The same when c (the ring's producer) goes away, but a ring a running capture switched
 * on and has not asked for yet is kept until that capture has had it (or ends). */
void uroced_cap_release_gone(struct uroced *d, struct uroce_client *c, struct uroce_client_dev *cd);
/* c's connection closed: the capture it ran stops writing everywhere. */
void uroced_cap_client_gone(struct uroced *d, struct uroce_client *c);
/* One of the daemon's own QP1 packets on device @dev_id (@rec: its record, len set;
 * @pkt: the UDP payload) for the capture of that device, if one runs that may see it:
 * root's, or one of @uid (the owner of its connection; -1: none). */
struct uroce_cap_rec;
void uroced_cap_qp1(struct uroced *d, uint32_t dev_id, int64_t uid, const struct uroce_cap_rec *rec,
		    const uint8_t *pkt);
/* The daemon exits: its own rings go. */
void uroced_cap_fini(void);

/* ---- logging -------------------------------------------------------------- */

extern int uroced_verbose;
void uroced_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
