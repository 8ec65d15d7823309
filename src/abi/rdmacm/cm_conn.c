/*
 * cm_conn.c — the command connection to uroced, the id table, and what a fork does
 * to them.
 *
 * One command connection per process (cm_proto.h): librdmacm writes each ucma command
 * to the channel's fd of the kernel's rdma_cm device; uroce sends it as a struct
 * uroce_cm_cmd on this connection and waits, bounded, for the reply.  The connection
 * is opened on first use (autostarting the daemon as libibverbs does) and opened
 * again after the daemon went away; ids keep the connection that created them, so an
 * id of a daemon that died fails with ENODEV while new ids work with the new daemon.
 *
 * Fork: librdmacm is not fork-safe (the child shares the parent's rdma_cm file).
 * uroce makes the child start from nothing: a pthread_atfork child handler closes
 * the child's copy of the command connection (so the daemon still sees the parent's
 * exit, and the child can never read a reply meant for the parent), forgets the
 * devices and re-initialises the library's locks.  Ids and channels the child
 * inherited fail with EBADF; new ones work.  docs/rdmacm.md "fork".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "rdmacm_priv.h"

pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;  /* g_conn, refs */
static struct cm_conn *g_conn;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

void cm_debug(const char *fmt, ...)
{
	static int on = -1;
	va_list ap;

	if (on < 0) {
		const char *e = getenv("UROCE_CM_DEBUG");

		on = e && *e && strcmp(e, "0");
	}
	if (!on)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "uroce rdmacm[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int cm_timeout_ms(void)
{
	return UROCE_IPC_TIMEOUT_MS;
}

pid_t cm_peer_pid(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return 0;
	return cr.pid;
}

/* ---- fork --------------------------------------------------------------------- */

/* Runs in the child only, right after fork(): the other threads of the parent do
 * not exist here, so any lock one of them held stays held; re-initialise them.
 * Only async-signal-safe calls (close). */
static void child_after_fork(void)
{
	pthread_mutex_init(&conn_lock, NULL);
	pthread_mutex_init(&cm_lock, NULL);
	if (g_conn) {
		/* The struct stays (the inherited ids point to it); its owner is the
		 * parent, so every call on it fails with EBADF before touching it. */
		close(g_conn->fd);
		g_conn->fd = -1;
		g_conn = NULL;
	}
	cm_dev_forget_after_fork();
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, child_after_fork);
}

/* ---- the connection ------------------------------------------------------------- */

static int conn_open(struct cm_conn **out)
{
	struct cm_conn *c;
	int fd, err;

	err = uroce_ipc_connect(&fd, UROCE_IPC_AUTOSTART);
	if (err == -ECONNREFUSED)
		return -ENODEV;       /* no daemon: no device, as librdmacm without one */
	if (err)
		return err;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->owner = getpid();
	c->daemon = cm_peer_pid(fd);
	c->refs = 1;              /* g_conn's */
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

static void conn_free(struct cm_conn *c)
{
	if (c->fd >= 0 && c->owner == getpid())
		close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int cm_conn_get(struct cm_conn **out)
{
	struct cm_conn *c, *old = NULL;
	int err = 0;

	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&conn_lock);
	c = g_conn;
	if (c && __atomic_load_n(&c->dead, __ATOMIC_ACQUIRE)) {
		/* The daemon went away: the next id gets a new connection (a new daemon);
		 * the old one lives on for its ids, which fail with ENODEV. */
		g_conn = NULL;
		if (--c->refs == 0)
			old = c;
		c = NULL;
	}
	if (!c) {
		err = conn_open(&c);
		if (!err)
			g_conn = c;
	}
	if (!err) {
		c->refs++;
		*out = c;
	}
	pthread_mutex_unlock(&conn_lock);
	if (old)
		conn_free(old);
	return err;
}

void cm_conn_put(struct cm_conn *c)
{
	bool last;

	if (!c)
		return;
	pthread_mutex_lock(&conn_lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&conn_lock);
	if (last)
		conn_free(c);
}

void cm_conn_hold(struct cm_conn *c)
{
	pthread_mutex_lock(&conn_lock);
	c->refs++;
	pthread_mutex_unlock(&conn_lock);
}

struct match_arg {
	uint32_t seq;
	uint16_t op;
};

/* A reply is ours when it echoes our seq and op; anything else is a late reply to a
 * request that timed out (or not a reply at all) and is skipped. */
static int reply_matches(const void *rec, void *arg)
{
	const struct uroce_cm_reply *rep = rec;
	const struct match_arg *m = arg;

	return rep->magic == UROCE_CM_MAGIC && rep->seq == m->seq && rep->op == m->op;
}

int cm_call(struct cm_conn *c, uint16_t op, uint32_t handle, struct uroce_cm_cmd *cmd,
	    struct uroce_cm_reply *rep)
{
	struct match_arg m;
	int ret;

	if (!c)
		return -ENODEV;
	if (c->owner != getpid())
		return -EBADF;       /* inherited across fork: the parent's connection */
	pthread_mutex_lock(&c->lock);
	if (c->dead) {
		pthread_mutex_unlock(&c->lock);
		return -ENODEV;
	}
	cmd->magic = UROCE_CM_MAGIC;
	cmd->version = UROCE_CM_VERSION;
	cmd->op = op;
	cmd->handle = handle;
	cmd->seq = ++c->seq;
	m.seq = cmd->seq;
	m.op = op;
	memset(rep, 0, sizeof(*rep));
	ret = uroce_ipc_transact(c->fd, cmd, sizeof(*cmd), rep, sizeof(*rep), cm_timeout_ms(),
				 reply_matches, &m);
	if (!ret && rep->version != UROCE_CM_VERSION)
		ret = -EPROTONOSUPPORT;
	else if (!ret)
		ret = rep->status;
	if (ret == -ECONNRESET || ret == -EPROTO || ret == -EPROTONOSUPPORT || ret == -EPIPE) {
		/* The daemon is gone, or does not speak this protocol (one without the
		 * connection manager drops the connection at the first record). */
		cm_debug("command connection lost (op %u: %s)", op, strerror(-ret));
		__atomic_store_n(&c->dead, true, __ATOMIC_RELEASE);
		ret = -ENODEV;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/* ---- the id table ---------------------------------------------------------------
 *
 * Events name ids by the daemon's handle.  Handles are unique while a daemon runs;
 * the daemon's pid tells two daemons apart (one that died and its successor), so a
 * handle of the old daemon never matches an id of the new one. */

#define TABLE_SIZE 1024u
static struct cm_id *table[TABLE_SIZE];

static unsigned bucket(uint32_t handle)
{
	return (handle * 2654435761u) >> 22;   /* 10 bits */
}

void cm_table_insert_locked(struct cm_id *cid)
{
	unsigned b = bucket(cid->handle);

	cid->hnext = table[b];
	table[b] = cid;
	cid->in_table = true;
}

void cm_table_remove_locked(struct cm_id *cid)
{
	struct cm_id **p;

	if (!cid->in_table)
		return;
	for (p = &table[bucket(cid->handle)]; *p; p = &(*p)->hnext) {
		if (*p == cid) {
			*p = cid->hnext;
			break;
		}
	}
	cid->in_table = false;
}

struct cm_id *cm_table_find_locked(pid_t daemon, uint32_t handle)
{
	for (struct cm_id *c = table[bucket(handle)]; c; c = c->hnext)
		if (c->handle == handle && c->conn->daemon == daemon)
			return c;
	return NULL;
}

void cm_table_each_locked(void (*fn)(struct cm_id *, void *), void *arg)
{
	for (unsigned i = 0; i < TABLE_SIZE; i++) {
		struct cm_id *c = table[i], *next;

		for (; c; c = next) {
			next = c->hnext;
			fn(c, arg);
		}
	}
}
