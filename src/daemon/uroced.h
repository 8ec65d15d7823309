/* uroced.h — internals of the uroce daemon, one per network namespace.
 *
 * One file per concern:
 *   main.c      arguments, detaching, signals, the event loop
 *   server.c    the IPC listener and clients, request dispatch (proto.h)
 *   devtable.c  devices: netdev attributes and the GID table
 *   qpn.c       the QPN pool of a device
 *   state.c     the saved device table (survives a daemon restart)
 *   rtnl.c      rtnetlink watch: addresses and links change under us
 *
 * Single-threaded: everything runs from the epoll loop in main.c, so nothing here
 * locks.  Internal functions return 0 or -errno.
 */
#ifndef UROCED_H
#define UROCED_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ipc/ipc.h"
#include "ipc/proto.h"

#define UROCE_MAX_DEVICES 64
#define UROCE_QPN_BITS 24                    /* IBA 9.2: the BTH DestQP field is 24 bits */
#define UROCE_QPN_COUNT (1u << UROCE_QPN_BITS)

/* ---- qpn.c ---------------------------------------------------------------- */

/* A device's QPN space: a bitmap over 2^24 QPNs (2 MiB, touched lazily) and a
 * rotating cursor, so a freed QPN is reused only after the cursor has gone round
 * the whole space.  Immediate reuse would let a stale packet for an old QP (a
 * retransmission from a peer that has not noticed yet) hit the new QP with the
 * same number.  QPN 0 and 1 are QP0/QP1 (IBA 3.5.3 / 9.7.1) and never handed out. */
struct qpn_pool {
	uint64_t *bits;
	uint32_t cursor;     /* next QPN to try */
	uint32_t used;       /* allocated, excluding the reserved 0 and 1 */
};

int uroce_qpn_pool_init(struct qpn_pool *p, uint32_t start);
void uroce_qpn_pool_uninit(struct qpn_pool *p);
/* 0 and *qpn, or -ENOSPC when all 2^24 - 2 are taken. */
int uroce_qpn_alloc(struct qpn_pool *p, uint32_t *qpn);
/* 0, or -EINVAL for a reserved/out-of-range QPN, -ENOENT if not allocated. */
int uroce_qpn_free(struct qpn_pool *p, uint32_t qpn);
int uroce_qpn_test(const struct qpn_pool *p, uint32_t qpn);

/* ---- devtable.c ----------------------------------------------------------- */

struct uroce_dev {
	uint32_t id;                     /* never reused while the daemon runs */
	struct uroce_dev_info info;      /* what clients see: name, netdev, GIDs, ... */
	struct qpn_pool qpns;
	struct uroce_dev_stats stats;
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

struct uroce_client {
	int fd;
	pid_t pid;                       /* SO_PEERCRED at connect */
	uid_t uid;
	uint64_t requests;
	struct { uint32_t dev_id, qpn; } *qpns;   /* QPNs this connection holds */
	size_t nqpns, capqpns;
};

struct uroced {
	struct uroce_devtable devs;
	struct uroce_client **clients;
	size_t nclients, capclients;
	uint64_t generation;             /* bumped when the device table changes */
	uint64_t client_generation;      /* bumped when the client list changes */
	int listen_fd, epoll_fd, rtnl_fd;
	uid_t uid;                       /* the daemon's own uid */
	int64_t start_ms;
	int stop;                        /* set by SHUTDOWN or a signal */
	char state_path[4096];           /* "" if there is nowhere to save */
};

/* Bind and listen on the abstract name: 0, -EADDRINUSE if a daemon already has
 * it, other -errno. */
int uroced_listen(struct uroced *d);
/* Readiness on the listening socket: accept every pending client. */
void uroced_accept(struct uroced *d);
/* Readiness on a client socket (c is the epoll cookie). */
void uroced_client_event(struct uroced *d, struct uroce_client *c, uint32_t events);
void uroced_close_all(struct uroced *d);
/* Save the device table (if there is a state path); logs a failure. */
void uroced_save(struct uroced *d);
int64_t uroced_now_ms(void);

/* ---- logging -------------------------------------------------------------- */

extern int uroced_verbose;
void uroced_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
