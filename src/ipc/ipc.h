/* ipc.h — the client side of the conversation with uroced, the per-host daemon.
 *
 * One uroced runs per host, i.e. per network namespace: it listens on the abstract
 * unix socket UROCE_IPC_ADDR, and abstract socket names are scoped to the network
 * namespace, so each namespace gets its own daemon without any file system state.
 *
 * The daemon owns what must be unique per host: the device table (one device per
 * netdev), each device's GID table, QPN allocation, the receive steering of UDP 4791
 * and counters.  The data path never passes through it.
 *
 * All functions return 0 or a negative errno.  A connection may be shared by threads:
 * calls are serialised internally.  When the daemon dies every call fails with
 * -ECONNRESET and uroce_ipc_fd() becomes readable (EOF), which is how libibverbs
 * raises IBV_EVENT_DEVICE_FATAL.
 */
#ifndef UROCE_IPC_H
#define UROCE_IPC_H

#include <stdint.h>
#include <stddef.h>

#define UROCE_IPC_ADDR "uroce/uroced"  /* abstract unix socket name (leading NUL on the wire) */
#define UROCE_DEV_NAME_MAX 64
#define UROCE_MAX_GIDS 32

/* GID types, numbered as enum ibv_gid_type of rdma-core. */
enum { UROCE_GID_TYPE_ROCE_V2 = 2 };

struct uroce_gid_info {
	uint8_t gid[16];   /* IPv4 as ::ffff:a.b.c.d; IPv6 as is */
	uint8_t type;      /* UROCE_GID_TYPE_ROCE_V2 */
	uint8_t valid;     /* an empty slot has valid = 0 */
};

/* A device as the daemon describes it to clients.  Plain data, fixed size. */
struct uroce_dev_info {
	char name[UROCE_DEV_NAME_MAX];   /* "uroce0" */
	char netdev[16];                 /* "lo", "veth0" (IFNAMSIZ) */
	uint32_t ifindex;
	uint32_t netdev_mtu;             /* the netdev's MTU; the port MTU derives from it */
	uint8_t mac[6];                  /* all zero for loopback */
	uint8_t port_up;                 /* netdev IFF_UP and IFF_RUNNING (lo: IFF_UP) */
	uint8_t loopback;                /* enum uroce_loopback: how its QPs reach QPs of this
					  * daemon's devices (`uroce link set DEV loopback`) */
	uint64_t node_guid;              /* EUI-64 from the MAC, as rxe does; derived otherwise.
					  * Network byte order (bytes in memory are the EUI-64),
					  * like ibv_device_attr.node_guid. */
	uint32_t num_gids;               /* slots used in gids[] (including invalid holes) */
	struct uroce_gid_info gids[UROCE_MAX_GIDS];
};

/* How a device's QPs reach a QP of another uroce process of the same daemon (same host,
 * same network namespace): through a shared-memory link (the default), or over UDP like
 * any other peer.  UROCE_LINK=shm|udp overrides it per process (docs/transport.md). */
enum uroce_loopback {
	UROCE_LOOPBACK_SHM = 0,
	UROCE_LOOPBACK_UDP = 1,
};

struct uroce_ipc;

enum {
	UROCE_IPC_AUTOSTART = 1 << 0,   /* start uroced if nobody listens (library default) */
};

/* Connect to this namespace's uroced, starting it first when asked and needed. */
int uroce_ipc_open(struct uroce_ipc **out, unsigned flags);
void uroce_ipc_close(struct uroce_ipc *ipc);
/* An fd that becomes readable (EOF) when the daemon goes away. */
int uroce_ipc_fd(const struct uroce_ipc *ipc);

/* The device table, as a malloc'ed array the caller frees. */
int uroce_ipc_devices(struct uroce_ipc *ipc, struct uroce_dev_info **devs, unsigned *n);

/* QPNs are 24 bits, unique per device; 0 and 1 are reserved (QP0/QP1).  They go back
 * to the pool when freed or when the client's connection closes (exit or crash). */
int uroce_ipc_qpn_alloc(struct uroce_ipc *ipc, const char *dev, uint32_t *qpn);
int uroce_ipc_qpn_free(struct uroce_ipc *ipc, const char *dev, uint32_t qpn);

/* ---- Extensions (added by the daemon helper; the calls above are unchanged) ----
 *
 * Errors common to every call: -ECONNRESET once the daemon has gone away (sticky),
 * -ETIMEDOUT when the daemon does not answer within UROCE_IPC_TIMEOUT_MS (a stopped
 * daemon), -EPROTONOSUPPORT when the daemon speaks another protocol version, -EBADF
 * when called from a child forked after uroce_ipc_open() (the connection belongs to
 * the process that opened it).  uroce_ipc_fd() is only for poll(): reading from it
 * would steal a reply; call uroce_ipc_check() when it becomes readable.
 */
#define UROCE_IPC_TIMEOUT_MS 5000

/* 0 while the daemon is there, -ECONNRESET once it has gone (never blocks). */
int uroce_ipc_check(struct uroce_ipc *ipc);

/* Which client holds a QPN: 0 and its pid, or -ENOENT if the QPN is free,
 * -ENODEV if there is no such device. */
int uroce_ipc_qpn_owner(struct uroce_ipc *ipc, const char *dev, uint32_t qpn, int32_t *pid);

/* Add a device on a netdev (`uroce link add NAME netdev IF`), remove one.
 * -EEXIST: name taken or netdev already has a device; -ENODEV: no such netdev/device;
 * -EPERM: the caller's uid is neither root nor the daemon's.  The daemon saves the
 * device table so it survives a restart. */
int uroce_ipc_link_add(struct uroce_ipc *ipc, const char *name, const char *netdev);
int uroce_ipc_link_del(struct uroce_ipc *ipc, const char *name);

struct uroce_daemon_status {
	int32_t pid;
	uint32_t proto_version;
	uint64_t netns_inode;            /* which network namespace this daemon serves */
	uint64_t uptime_ms;
	uint32_t num_devices;
	uint32_t num_clients;            /* connections, including the asking one */
	uint32_t qpns_allocated;         /* over all devices */
	uint32_t lifetime;               /* enum uroce_daemon_lifetime */
	/* With UROCE_LIFE_IDLE_EXIT: the daemon exits idle_ms after its last client
	 * has gone (the asking connection is a client too, so the clock starts when
	 * it closes).  Links are saved, so the next client's daemon has them. */
	uint32_t idle_ms;
	uint32_t pad;
};

enum uroce_daemon_lifetime {
	UROCE_LIFE_STAYS = 0,            /* started explicitly (`uroce daemon start`,
					  * uroced without --autostarted): until stopped */
	UROCE_LIFE_IDLE_EXIT,            /* autostarted: exits when idle */
	UROCE_LIFE_NO_IDLE,              /* autostarted, idle exit off (idle time 0) */
	UROCE_LIFE_UNSAVED,              /* autostarted, but stays: the device table could
					  * not be saved, an exit would lose links */
};
int uroce_ipc_status(struct uroce_ipc *ipc, struct uroce_daemon_status *st);

/* One connected client (for `uroce daemon status`). */
struct uroce_client_info {
	int32_t pid;
	uint32_t uid;
	uint32_t qpns;                   /* QPNs it holds, over all devices */
	uint32_t pad;
	uint64_t requests;
};
int uroce_ipc_clients(struct uroce_ipc *ipc, struct uroce_client_info **clients, unsigned *n);

/* Per-device counters kept by the daemon (`uroce stat`).  Counters only grow;
 * qpns_in_use is a gauge.  Data-path counters per QP will come from shared memory
 * registered by the clients (docs/daemon.md), not from this record. */
struct uroce_dev_stats {
	char name[UROCE_DEV_NAME_MAX];
	uint64_t qpn_alloc;              /* successful allocations */
	uint64_t qpn_free;               /* explicit frees */
	uint64_t qpn_reclaimed;          /* returned because the owner's connection closed */
	uint64_t qpn_alloc_fail;         /* pool exhausted */
	uint64_t requests;               /* requests naming this device */
	uint64_t gid_changes;            /* GID table updates from the netdev */
	uint32_t qpns_in_use;
	uint32_t clients;                /* clients holding at least one QPN here */
	/* Receive steering (uroce_ipc_rx_socket). */
	uint64_t rx_default;             /* datagrams that reached the daemon's own socket:
					  * QP1, QPNs nobody owns, runts */
	uint64_t steer_updates;          /* steering programs attached */
	uint32_t rx_sockets;             /* group members handed to clients now */
	uint32_t rx_group;               /* sockets in the group, daemon's and tombstones incl. */
};
int uroce_ipc_dev_stats(struct uroce_ipc *ipc, struct uroce_dev_stats **stats, unsigned *n);

/* Ask the daemon to exit (`uroce daemon stop`); -EPERM as for link_add. */
int uroce_ipc_shutdown(struct uroce_ipc *ipc);
/* Keep an autostarted daemon running when idle, as if `uroce daemon start` had
 * started it (no-op for one that stays already); -EPERM as for link_add. */
int uroce_ipc_persist(struct uroce_ipc *ipc);

/* Receive steering (docs/daemon.md).  Returns in *fd this connection's member of
 * dev's SO_REUSEPORT group on UDP 4791: an AF_INET6 datagram socket bound to
 * [::]:4791 with IPV6_V6ONLY off (IPv4 arrives as ::ffff:a.b.c.d) and
 * SO_BINDTODEVICE to the device's netdev.  The caller owns the descriptor
 * (O_CLOEXEC; blocking mode, shared with the daemon's copy: use MSG_DONTWAIT rather
 * than changing O_NONBLOCK).  Every QPN this connection allocates on dev (before
 * or after the call) is steered to it by destination QPN; QP1, unknown QPNs and
 * runts go to the daemon.  When the connection closes the socket stays in the
 * group as a tombstone, so the caller must close its copy by then.
 * Errors: -EEXIST (this connection has one for dev already), -ENODEV, -ENOSPC
 * (group full), -EADDRINUSE (something outside uroce holds UDP 4791 on that netdev),
 * other -errno from the daemon's socket()/bind(). */
int uroce_ipc_rx_socket(struct uroce_ipc *ipc, const char *dev, int *fd);

/* ---- Other protocols on the daemon's socket ----
 *
 * The connection manager (ipc/cm_proto.h) speaks its own records over connections
 * to the same address.  These two calls are the generic pieces it shares with the
 * calls above: the socket, the autostart, and a bounded request/reply.
 */

/* A new connection to this namespace's uroced, starting the daemon first when
 * UROCE_IPC_AUTOSTART is given and nobody listens (as uroce_ipc_open does).  *fd
 * is an AF_UNIX SOCK_SEQPACKET socket, O_CLOEXEC, blocking; the caller owns it and
 * speaks whatever protocol it needs on it.  0, or -ECONNREFUSED (no daemon, none
 * could be started), -errno. */
int uroce_ipc_connect(int *fd, unsigned flags);

/* One request/reply on such a connection: send req (req_len bytes, one record) and
 * wait at most timeout_ms for a record of exactly rep_len bytes that match(rep, arg)
 * accepts; records match refuses (late replies to an earlier request that timed
 * out) are read and skipped.  Never waits longer than timeout_ms in total, EINTR
 * included.  0 once a reply is accepted; -ETIMEDOUT; -ECONNRESET when the peer has
 * closed (EOF) or reset the connection; -EPROTO for a record of another size;
 * -errno of send/recv/poll otherwise. */
int uroce_ipc_transact(int fd, const void *req, size_t req_len, void *rep, size_t rep_len,
		       int timeout_ms, int (*match)(const void *rep, void *arg), void *arg);
/* ---- Same-host shared-memory links (ipc/shm_proto.h, docs/transport.md) ---- */

/* `uroce link set DEV loopback shm|udp`: the device's same-host link, saved with the device
 * table.  -ENODEV, -EINVAL, -EPERM as for link_add. */
int uroce_ipc_link_set(struct uroce_ipc *ipc, const char *dev, uint32_t loopback);

/* A link as uroced describes it to one of its ends. */
struct uroce_shm_link_info {
	uint64_t id;                     /* unique while the daemon runs */
	uint64_t size;                   /* bytes of the memfd */
	uint32_t side;                   /* this end's side (0 or 1; the ring it sends on) */
	uint32_t self;                   /* 1: both ends are this connection */
	int32_t peer_pid;
	uint32_t peer_uid;
	uint32_t qpn_block;              /* SHM_LINK: the destination QPN / UROCE_IPC_QPN_BLOCK,
					  * a block the peer owns for as long as it lives */
	uint32_t ring_bytes;
};
#define UROCE_IPC_QPN_BLOCK 64           /* QPNs are handed out in blocks of this many */

/* This connection takes part in shared-memory links on @dev; @efd is its wake eventfd
 * (uroced keeps a copy: peers and the daemon write to it).  -ENODEV, -EEXIST (attached
 * already), -EOPNOTSUPP (an older daemon). */
int uroce_ipc_shm_attach(struct uroce_ipc *ipc, const char *dev, int efd);
/* The link to the owner of QPN @dqpn of the device holding GID @dgid, created if needed
 * (@ring_bytes: the ring size a new link gets; 0 = the default).  0 and *info, *memfd and
 * *peer_efd (both owned by the caller); -ENOENT (no such GID among this daemon's devices,
 * or no owner of the QPN), -ENOTCONN (this connection or the owner takes no part in shm
 * links). */
int uroce_ipc_shm_link(struct uroce_ipc *ipc, const char *dev, const uint8_t dgid[16], uint32_t dqpn,
		       uint32_t ring_bytes, struct uroce_shm_link_info *info, int *memfd, int *peer_efd);
/* The next link a peer opened to this connection (uroced wrote UROCE_SHM_WAKE_LINKS to its
 * eventfd): 0 and the same outputs, -ENOENT when none is waiting. */
int uroce_ipc_shm_accept(struct uroce_ipc *ipc, const char *dev, struct uroce_shm_link_info *info,
			 int *memfd, int *peer_efd);

/* ---- Capturing (ipc/cap_proto.h, docs/daemon.md "Capturing") ---- */
struct uroce_cap_info {
	uint32_t session;                /* CAP_START / CAP_NEXT: the capture's number */
	int32_t pid;                     /* CAP_NEXT: the ring's process */
	uint32_t uid;
	uint32_t pad;
	uint64_t serial;                 /* the ring's connection, unique while uroced runs */
};
/* The data path: register a context's capture ring (memfd) for @dev. */
int uroce_ipc_cap_register(struct uroce_ipc *ipc, const char *dev, int memfd);
/* `uroce capture`: this connection captures on @dev (-EBUSY: another capture does);
 * then, repeatedly, the next ring it may read: 0, *memfd (the caller's) and *info, or
 * -ENOENT when every ring it may read has been handed over.  The capture ends when the
 * connection closes. */
int uroce_ipc_cap_start(struct uroce_ipc *ipc, const char *dev, uint32_t *session);
int uroce_ipc_cap_next(struct uroce_ipc *ipc, const char *dev, struct uroce_cap_info *info,
		       int *memfd);

/* ---- Port and GID events ----
 *
 * A connection that subscribes receives a record whenever a device's port goes up
 * or down, its GID table or MTU changes, or it is deleted, with the device's new
 * attributes.  (This is where IBV_EVENT_PORT_ACTIVE, PORT_ERR and GID_CHANGE come
 * from.)  On a subscribed connection uroce_ipc_fd() becomes readable for an event
 * as well as for EOF: call uroce_ipc_event() until -EAGAIN; -ECONNRESET means the
 * daemon is gone.  Unsubscribed connections never see events.
 */
enum uroce_ipc_event_type {
	UROCE_EV_PORT_ACTIVE = 1,        /* port_up 0 -> 1 */
	UROCE_EV_PORT_ERR,               /* port_up 1 -> 0 */
	UROCE_EV_GID_CHANGE,             /* an entry of the GID table changed */
	UROCE_EV_MTU_CHANGE,             /* netdev_mtu changed */
	UROCE_EV_DEVICE_REMOVED,         /* `uroce link del`: info holds only the name */
};

struct uroce_ipc_event {
	uint32_t type;                   /* enum uroce_ipc_event_type */
	uint32_t lost;                   /* events dropped (a full socket buffer or
					  * client queue) since the last report; when
					  * non-zero, re-read the devices */
	struct uroce_dev_info info;      /* the device after the change */
};

/* 0, or -ECONNRESET etc. as for every call. */
int uroce_ipc_subscribe(struct uroce_ipc *ipc);
/* Never blocks: 0 and the oldest pending event, -EAGAIN if there is none,
 * -ECONNRESET once the daemon has gone. */
int uroce_ipc_event(struct uroce_ipc *ipc, struct uroce_ipc_event *ev);

/* ---- Data-path counters in shared memory (docs/daemon.md) ----
 *
 * The data path counts in the application and must not talk to the daemon to do
 * it.  A context publishes its counters in a sealed memfd that it registers with
 * the daemon; the daemon maps it read-only and reads it only when asked (`uroce
 * stat show`, `uroce stat show qp`).  The block is self-describing (counter names
 * are in it), so the transport can add counters without a daemon change.
 *
 * Writers: store each counter with a relaxed atomic store or increment
 * (__atomic_*_n(..., __ATOMIC_RELAXED)); aligned 64-bit stores are never torn.
 * Set a slot's qpn last when a QP starts using it and 0 when it stops.
 */
#define UROCE_CNT_MAX 48                 /* counters per context and per QP */
#define UROCE_CNT_NAME_MAX 32

struct uroce_counters;                   /* one block: a sealed memfd, mapped */

/* Create a block with the given counter names (each < UROCE_CNT_NAME_MAX) for the
 * context and for each of n_slots QP slots.  0, or -EINVAL (no names / name too
 * long), -E2BIG (more than UROCE_CNT_MAX names or too many slots), -errno. */
int uroce_counters_create(const char *const *ctx_names, unsigned n_ctx,
			  const char *const *qp_names, unsigned n_qp, unsigned n_slots,
			  struct uroce_counters **out);
void uroce_counters_destroy(struct uroce_counters *c);
/* The context's counters (n_ctx of them) and slot i's (n_qp); NULL if i is out of
 * range.  Valid until destroy. */
uint64_t *uroce_counters_ctx(struct uroce_counters *c);
uint64_t *uroce_counters_qp(struct uroce_counters *c, unsigned slot);
/* Mark slot i as used by QP qpn of type qp_type (enum ibv_qp_type), or free (qpn 0).
 * The slot's counters are zeroed when it is taken. */
void uroce_counters_slot(struct uroce_counters *c, unsigned slot, uint32_t qpn, uint32_t qp_type);
/* The memfd (owned by the block; for registration). */
int uroce_counters_fd(const struct uroce_counters *c);
/* Slot bookkeeping for writers with many QPs (thread-safe among themselves):
 * take a free slot for qpn (as uroce_counters_slot: counters zeroed) and return its
 * index, which the writer keeps, or -ENOSPC when every slot is used, -EINVAL for qpn 0.
 * Free a slot with uroce_counters_slot(c, slot, 0, 0). */
int uroce_counters_slot_take(struct uroce_counters *c, uint32_t qpn, uint32_t qp_type);

/* Register the block with the daemon for dev as the context's block (block 0 of
 * proto.h; a second registration replaces the first).  It is dropped when the
 * connection closes.  -ENODEV, -EINVAL (block rejected), -errno. */
int uroce_ipc_counters_register(struct uroce_ipc *ipc, const char *dev, struct uroce_counters *c);

/* The transport's per-QP block of this connection for dev (block 1 of proto.h):
 * created with these names and n_slots and registered at the first call, returned
 * as it is by later calls (the arguments are then not looked at; pass the same).
 * The connection owns it: it stays valid until uroce_ipc_close().  Thread-safe.
 * 0 and *out; -ENOSPC (no room for another device on this connection), errors of
 * uroce_counters_create and uroce_ipc_counters_register (a failed registration is
 * not retried: later calls return -ENOTCONN at once, so a data path without the
 * daemon does not ask again for every QP). */
int uroce_ipc_qp_counters(struct uroce_ipc *ipc, const char *dev,
			  const char *const *ctx_names, unsigned n_ctx,
			  const char *const *qp_names, unsigned n_qp, unsigned n_slots,
			  struct uroce_counters **out);

/* One context's or one QP's counters as the daemon read them. */
struct uroce_cnt_record {
	char dev[UROCE_DEV_NAME_MAX];
	int32_t pid;                     /* the registering client */
	uint32_t qpn;                    /* 0: the context part of a block */
	uint32_t qp_type;
	uint32_t n;                      /* entries used in c[] */
	uint32_t block;                  /* 0: the context's block, 1: the transport's */
	uint32_t pad;
	struct {
		char name[UROCE_CNT_NAME_MAX];
		uint64_t value;
	} c[UROCE_CNT_MAX];
};
/* All registered blocks: per block its context record, then a record per used QP
 * slot; a connection's blocks of one device are adjacent, block 0 first.  Then, per
 * device and block, a record with pid 0 and qpn 0: the context counters of the
 * clients that have gone (summed by name when their connection closed).  A
 * malloc'ed array the caller frees. */
int uroce_ipc_counters(struct uroce_ipc *ipc, struct uroce_cnt_record **recs, unsigned *n);
/* One device's totals of one block role (0: the contexts', 1: the transport's): the
 * context part of every registered block of that role on dev plus the departed clients'
 * totals, summed name by name in the daemon (what `uroce stat show` prints as the
 * device's `total` line, in one request; ibv_query_port's violation counters come from
 * it).  rec->pid and rec->qpn are 0.  -ENODEV, -EINVAL (no such block role). */
int uroce_ipc_counters_total(struct uroce_ipc *ipc, const char *dev, uint32_t block,
			     struct uroce_cnt_record *rec);

#endif
