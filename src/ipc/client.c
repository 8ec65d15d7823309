/* client.c — the client side of the uroced protocol (see proto.h, ipc.h).
 *
 * This file is linked into libibverbs.so.1, so it must behave like library code:
 * no global constructors, no exit(), no output, no signals left behind, and every
 * call bounded in time.  A dead daemon shows up as EOF on the SEQPACKET socket; a
 * hung daemon as a poll() timeout.  Neither can hang the application.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/proto.h"

#define AUTOSTART_WAIT_MS 2000  /* bound on waiting for an autostarted daemon */

extern char **environ;

#define EVENT_QUEUE 64

struct uroce_ipc {
	int fd;
	pid_t owner;             /* the process that opened the connection */
	int dead;                /* sticky: the daemon has gone */
	int subscribed;
	uint32_t seq;
	pthread_mutex_t lock;    /* one request in flight per connection; the queue */
	/* Events that arrived while a call waited for its reply. */
	struct uroce_ipc_event events[EVENT_QUEUE];
	unsigned ev_head, ev_count;
	uint32_t ev_lost;        /* dropped because the queue was full */
	/* The transport's per-QP counters blocks (uroce_ipc_qp_counters), one per device
	 * this connection serves (a verbs context serves one). */
	pthread_mutex_t cnt_lock;
	struct {
		char dev[UROCE_DEV_NAME_MAX];
		struct uroce_counters *c;
		int err;             /* sticky failure of create/register */
	} qpcnt[4];
};

/* Queue an event record (lock held). */
static void queue_event(struct uroce_ipc *ipc, const struct uroce_ipc_resp *resp)
{
	if (ipc->ev_count == EVENT_QUEUE) {
		ipc->ev_lost++;
		return;
	}
	ipc->events[(ipc->ev_head + ipc->ev_count) % EVENT_QUEUE] = resp->u.event;
	ipc->ev_count++;
}

unsigned uroce_ipc_addr(struct sockaddr_un *sa)
{
	const char *name = getenv(UROCE_IPC_NAME_ENV);
	size_t len;

	if (!name || !*name)
		name = UROCE_IPC_ADDR;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* Abstract namespace: sun_path[0] = 0, the name follows without a terminator;
	 * the address length says where it ends. */
	len = strnlen(name, sizeof(sa->sun_path) - 1);
	memcpy(sa->sun_path + 1, name, len);
	return (unsigned)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int try_connect(int *out)
{
	struct sockaddr_un sa;
	unsigned len = uroce_ipc_addr(&sa);
	int fd, err;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, len) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/* ---- autostart ------------------------------------------------------------ */

static int executable(const char *path)
{
	struct stat st;

	return !access(path, X_OK) && !stat(path, &st) && S_ISREG(st.st_mode);
}

/* Where is uroced?  $UROCE_DAEMON, else ../bin/uroced next to the object this code
 * is linked into (build/lib/libibverbs.so.1 -> build/bin/uroced; build/bin/uroce ->
 * build/bin/../bin/uroced), else the PATH.  All of this runs before fork(), where
 * malloc and friends are still allowed. */
static int find_daemon(char *path, size_t size)
{
	const char *env = getenv("UROCE_DAEMON");
	Dl_info info;

	if (env && *env) {
		if (strlen(env) >= size)
			return -ENAMETOOLONG;
		strcpy(path, env);
		return executable(path) ? 0 : -ENOENT;
	}
	if (dladdr((void *)uroce_ipc_open, &info) && info.dli_fname && info.dli_fname[0] == '/') {
		const char *slash = strrchr(info.dli_fname, '/');
		int n = snprintf(path, size, "%.*s/../bin/uroced",
				 (int)(slash - info.dli_fname), info.dli_fname);

		if (n > 0 && (size_t)n < size && executable(path))
			return 0;
	}
	/* dladdr() reports the main program by argv[0], which may be relative. */
	{
		char self[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (n > 0) {
			char *slash;

			self[n] = 0;
			slash = strrchr(self, '/');
			if (slash) {
				*slash = 0;
				if ((size_t)snprintf(path, size, "%s/../bin/uroced", self) < size &&
				    executable(path))
					return 0;
			}
		}
	}
	env = getenv("PATH");
	if (env) {
		const char *p = env;

		while (*p) {
			const char *end = strchrnul(p, ':');
			int n = snprintf(path, size, "%.*s/uroced", (int)(end - p), p);

			if (end > p && n > 0 && (size_t)n < size && executable(path))
				return 0;
			p = *end ? end + 1 : end;
		}
	}
	return -ENOENT;
}

/* Run uroced.  uroced (without -f) binds and listens first, then detaches itself
 * with a double fork + setsid, and its first process exits only after the socket
 * is listening.  So once our child has exited, connect() finds the daemon; if our
 * child lost the race for the name to another autostarting process, it exits 0
 * quietly and the winner is already bound.  Returns the child's pid or -errno.
 *
 * posix_spawn rather than fork: glibc spawns with CLONE_VM|CLONE_VFORK, so the
 * application's memory is not copied and, more important for library code, its
 * pthread_atfork handlers (MPI, UCX, ...) do not run. */
static pid_t spawn_daemon(const char *path)
{
	const char *log = getenv("UROCE_DAEMON_LOG");
	char *const argv[] = { (char *)path, (char *)"--autostarted", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	pid_t pid;
	int err;

	if (posix_spawn_file_actions_init(&fa))
		return -ENOMEM;
	if (posix_spawnattr_init(&attr)) {
		posix_spawn_file_actions_destroy(&fa);
		return -ENOMEM;
	}
	/* stdio on /dev/null (or the log); the application's other descriptors
	 * (sockets, files) must not live on in the daemon. */
	err = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDWR, 0);
	if (!err && log && *log)
		err = posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	else if (!err)
		err = posix_spawn_file_actions_adddup2(&fa, 0, 1);
	if (!err)
		err = posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (!err)
		err = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	/* The application's signal mask and handlers are not the daemon's (uroced
	 * resets dispositions too; this covers the window before it runs). */
	sigemptyset(&none);
	sigfillset(&all);
	if (!err)
		err = posix_spawnattr_setsigmask(&attr, &none);
	if (!err)
		err = posix_spawnattr_setsigdefault(&attr, &all);
	if (!err)
		err = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (!err)
		err = posix_spawn(&pid, path, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return err ? -err : pid;
}

/* Wait (bounded) for the spawned starter process to exit; it exits as soon as the
 * daemon listens.  A pidfd lets us poll() with a timeout instead of sleeping.
 * Returns the exit status, or -1 if unknown (still running, or reaped by the
 * application's own SIGCHLD handling). */
static int reap(pid_t pid, int timeout_ms)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int status;
	pid_t r;

	if (pfd >= 0) {
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
			;
		close(pfd);
	}
	/* WNOHANG: if the application reaps its children itself, or the starter
	 * is somehow still running, do not block. */
	while ((r = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR)
		;
	return r == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int connect_autostart(int *fd)
{
	char path[PATH_MAX];
	int64_t deadline;
	pid_t pid;
	int err;

	err = find_daemon(path, sizeof(path));
	if (err)
		return err == -ENOENT ? -ECONNREFUSED : err;
	pid = spawn_daemon(path);
	if (pid < 0)
		return (int)pid;
	deadline = now_ms() + AUTOSTART_WAIT_MS;
	if (reap(pid, AUTOSTART_WAIT_MS) > 0) {
		/* uroced failed (127: exec failed, 1: could not listen), unless a
		 * concurrent starter succeeded: one attempt, no waiting. */
		err = try_connect(fd);
		return err == -ENOENT ? -ECONNREFUSED : err;
	}
	/* Normally the first attempt succeeds.  Retry for the window where another
	 * autostarter has bound but not yet listened (ECONNREFUSED). */
	for (;;) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };

		err = try_connect(fd);
		if (!err || (err != -ECONNREFUSED && err != -ENOENT) || now_ms() >= deadline)
			return err;
		nanosleep(&ts, NULL);
	}
}

/* ---- requests -------------------------------------------------------------- */

static int fail_dead(struct uroce_ipc *ipc)
{
	ipc->dead = 1;
	return -ECONNRESET;
}

/* Send req and wait for its reply; caller holds ipc->lock.  The first @nfds descriptors
 * passed with a successful reply go to fds[] (the others -1); any other is closed. */
static int call_locked(struct uroce_ipc *ipc, struct uroce_ipc_req *req, struct uroce_ipc_resp *resp,
		       int send_fd, int *fds, unsigned nfds)
{
	int64_t deadline = now_ms() + UROCE_IPC_TIMEOUT_MS;
	ssize_t n;

	for (unsigned i = 0; i < nfds; i++)
		fds[i] = -1;
	if (ipc->owner != getpid())
		return -EBADF;
	if (ipc->dead)
		return -ECONNRESET;
	req->magic = UROCE_IPC_MAGIC;
	req->version = UROCE_IPC_VERSION;
	req->seq = ++ipc->seq;
	n = uroce_ipc_send_rec(ipc->fd, req, sizeof(*req), send_fd, 0);
	if (n < 0) {
		if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
			return fail_dead(ipc);
		return -errno;
	}
	for (;;) {
		struct pollfd p = { .fd = ipc->fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		int r, got[2];

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		n = uroce_ipc_recv_recn(ipc->fd, resp, sizeof(*resp), got, 2,
					MSG_TRUNC | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return errno == ECONNRESET ? fail_dead(ipc) : -errno;
		/* Only the reply we wait for may bring a descriptor, and only on success. */
		if (n == 0 || (size_t)n != sizeof(*resp) || resp->magic != UROCE_IPC_MAGIC ||
		    resp->version != UROCE_IPC_VERSION || resp->seq != req->seq ||
		    resp->op != req->op || resp->status) {
			for (unsigned i = 0; i < 2; i++) {
				if (got[i] >= 0)
					close(got[i]);
				got[i] = -1;
			}
		}
		if (n == 0)
			return fail_dead(ipc);
		if ((size_t)n != sizeof(*resp) || resp->magic != UROCE_IPC_MAGIC)
			return -EPROTO;
		if (resp->version != UROCE_IPC_VERSION)
			return -EPROTONOSUPPORT;
		if (resp->op == UROCE_OP_EVENT && resp->seq == 0) {
			queue_event(ipc, resp);
			continue;
		}
		if (resp->seq != req->seq || resp->op != req->op)
			continue;  /* late reply to an earlier, timed-out request */
		ipc->ev_lost += resp->ev_lost;
		for (unsigned i = 0; i < 2; i++) {
			if (i < nfds)
				fds[i] = got[i];
			else if (got[i] >= 0)
				close(got[i]);
		}
		return resp->status;
	}
}

static int call_fd(struct uroce_ipc *ipc, struct uroce_ipc_req *req, struct uroce_ipc_resp *resp,
		   int send_fd, int *fd)
{
	int err;

	if (!ipc)
		return -EINVAL;
	pthread_mutex_lock(&ipc->lock);
	err = call_locked(ipc, req, resp, send_fd, fd, fd ? 1 : 0);
	pthread_mutex_unlock(&ipc->lock);
	return err;
}

static int call_fds(struct uroce_ipc *ipc, struct uroce_ipc_req *req, struct uroce_ipc_resp *resp,
		    int send_fd, int *fds, unsigned nfds)
{
	int err;

	if (!ipc)
		return -EINVAL;
	pthread_mutex_lock(&ipc->lock);
	err = call_locked(ipc, req, resp, send_fd, fds, nfds);
	pthread_mutex_unlock(&ipc->lock);
	return err;
}

static int call(struct uroce_ipc *ipc, struct uroce_ipc_req *req, struct uroce_ipc_resp *resp)
{
	return call_fd(ipc, req, resp, -1, NULL);
}

static int set_name(char *dst, size_t size, const char *src)
{
	if (!src)
		return 0;
	if (strnlen(src, size) >= size)
		return -ENAMETOOLONG;
	strcpy(dst, src);
	return 0;
}

static int init_req(struct uroce_ipc_req *req, uint16_t op, const char *dev, const char *netdev,
		    uint32_t arg)
{
	memset(req, 0, sizeof(*req));
	req->op = op;
	req->arg = arg;
	if (set_name(req->dev, sizeof(req->dev), dev) ||
	    set_name(req->netdev, sizeof(req->netdev), netdev))
		return -ENAMETOOLONG;
	return 0;
}

/* ---- public API ------------------------------------------------------------ */

/* One attempt: connect (autostarting if asked) and say HELLO. */
static int open_once(struct uroce_ipc **out, unsigned flags)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	struct uroce_ipc *ipc;
	int fd = -1, err;

	err = try_connect(&fd);
	if ((err == -ECONNREFUSED || err == -ENOENT) && (flags & UROCE_IPC_AUTOSTART))
		err = connect_autostart(&fd);
	if (err)
		return err;
	ipc = calloc(1, sizeof(*ipc));
	if (!ipc) {
		close(fd);
		return -ENOMEM;
	}
	ipc->fd = fd;
	ipc->owner = getpid();
	pthread_mutex_init(&ipc->lock, NULL);
	pthread_mutex_init(&ipc->cnt_lock, NULL);
	/* HELLO checks the version before the caller relies on anything. */
	init_req(&req, UROCE_OP_HELLO, NULL, NULL, 0);
	err = call(ipc, &req, &resp);
	if (err) {
		uroce_ipc_close(ipc);
		return err;
	}
	*out = ipc;
	return 0;
}

int uroce_ipc_open(struct uroce_ipc **out, unsigned flags)
{
	int64_t deadline = now_ms() + AUTOSTART_WAIT_MS;
	long backoff_ns = 1000 * 1000;
	int err;

	if (!out)
		return -EINVAL;
	*out = NULL;
	/* A daemon that is dying (killed) may still accept on its listening socket
	 * while its other sockets already close: the connection is then reset before
	 * HELLO is answered.  Its name is released a moment later, so try again
	 * (autostarting a successor if asked), with a short backoff, bounded. */
	for (;;) {
		struct timespec ts = { 0, backoff_ns };

		err = open_once(out, flags);
		if (err != -ECONNRESET || now_ms() >= deadline)
			return err;
		nanosleep(&ts, NULL);
		if (backoff_ns < 64 * 1000 * 1000)
			backoff_ns *= 2;
	}
}

int uroce_ipc_connect(int *fd, unsigned flags)
{
	int err;

	if (!fd)
		return -EINVAL;
	*fd = -1;
	err = try_connect(fd);
	if ((err == -ECONNREFUSED || err == -ENOENT) && (flags & UROCE_IPC_AUTOSTART))
		err = connect_autostart(fd);
	if (err == -ENOENT)
		err = -ECONNREFUSED;  /* nobody has the name: no daemon, as for refused */
	return err;
}

int uroce_ipc_transact(int fd, const void *req, size_t req_len, void *rep, size_t rep_len,
		       int timeout_ms, int (*match)(const void *rep, void *arg), void *arg)
{
	int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	ssize_t n;

	if (fd < 0 || !req || !rep || !match)
		return -EINVAL;
	n = uroce_ipc_send_rec(fd, req, req_len, -1, 0);
	if (n < 0)
		return errno == EPIPE || errno == ENOTCONN ? -ECONNRESET : -errno;
	if ((size_t)n != req_len)
		return -EPROTO;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		/* MSG_TRUNC: a longer record reports its real length instead of passing
		 * for a short one; any descriptor that came with it is closed. */
		n = uroce_ipc_recv_rec(fd, rep, rep_len, NULL, MSG_TRUNC | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if ((size_t)n != rep_len)
			return -EPROTO;
		if (match(rep, arg))
			return 0;
	}
}

void uroce_ipc_close(struct uroce_ipc *ipc)
{
	if (!ipc)
		return;
	close(ipc->fd);
	for (unsigned i = 0; i < sizeof(ipc->qpcnt) / sizeof(ipc->qpcnt[0]); i++)
		uroce_counters_destroy(ipc->qpcnt[i].c);
	pthread_mutex_destroy(&ipc->lock);
	pthread_mutex_destroy(&ipc->cnt_lock);
	free(ipc);
}

int uroce_ipc_fd(const struct uroce_ipc *ipc)
{
	return ipc ? ipc->fd : -EINVAL;
}

int uroce_ipc_check(struct uroce_ipc *ipc)
{
	struct pollfd p;
	char c;
	int r;

	if (!ipc)
		return -EINVAL;
	pthread_mutex_lock(&ipc->lock);
	if (!ipc->dead) {
		/* Between calls only events can be queued (subscribed connections), so
		 * readable means an event, EOF or an error; MSG_PEEK leaves a record
		 * where it is, and a peek of 0 bytes is EOF. */
		p.fd = ipc->fd;
		p.events = POLLIN;
		r = poll(&p, 1, 0);
		if (r > 0 && (p.revents & (POLLHUP | POLLERR)))
			ipc->dead = 1;
		else if (r > 0 && recv(ipc->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
			ipc->dead = 1;
	}
	r = ipc->dead ? -ECONNRESET : 0;
	pthread_mutex_unlock(&ipc->lock);
	return r;
}

/* Read a list element by element; restart if the table generation changes under
 * us.  get(i) copies element i of the reply into the array. */
static int read_list(struct uroce_ipc *ipc, uint16_t op, size_t elem, void **out, unsigned *n)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		struct uroce_ipc_req req;
		struct uroce_ipc_resp resp;
		uint64_t gen = 0;
		unsigned count = 0, i;
		char *arr = NULL;
		int err = 0;

		for (i = 0; i == 0 || i < count; i++) {
			init_req(&req, op, NULL, NULL, i);
			err = call(ipc, &req, &resp);
			if (err == -ENOENT && i == 0) {  /* empty list */
				err = 0;
				count = 0;
				break;
			}
			if (err)
				break;
			if (i == 0) {
				gen = resp.generation;
				count = resp.count;
				if (count > 65536) {
					err = -EPROTO;
					break;
				}
				arr = calloc(count ? count : 1, elem);
				if (!arr) {
					err = -ENOMEM;
					break;
				}
			} else if (resp.generation != gen || resp.count != count) {
				err = -EAGAIN;
				break;
			}
			memcpy(arr + (size_t)i * elem, &resp.u, elem);
		}
		if (err == -EAGAIN || err == -ESTALE || (err == -ENOENT && i > 0)) {
			free(arr);
			continue;  /* the table changed under us: read it again */
		}
		if (err) {
			free(arr);
			return err;
		}
		if (!arr)
			arr = calloc(1, elem);
		if (!arr)
			return -ENOMEM;
		*out = arr;
		*n = count;
		return 0;
	}
	return -EAGAIN;
}

int uroce_ipc_devices(struct uroce_ipc *ipc, struct uroce_dev_info **devs, unsigned *n)
{
	if (!devs || !n)
		return -EINVAL;
	return read_list(ipc, UROCE_OP_DEV_GET, sizeof(**devs), (void **)devs, n);
}

int uroce_ipc_clients(struct uroce_ipc *ipc, struct uroce_client_info **clients, unsigned *n)
{
	if (!clients || !n)
		return -EINVAL;
	return read_list(ipc, UROCE_OP_CLIENT_GET, sizeof(**clients), (void **)clients, n);
}

int uroce_ipc_dev_stats(struct uroce_ipc *ipc, struct uroce_dev_stats **stats, unsigned *n)
{
	if (!stats || !n)
		return -EINVAL;
	return read_list(ipc, UROCE_OP_STATS_GET, sizeof(**stats), (void **)stats, n);
}

int uroce_ipc_qpn_alloc(struct uroce_ipc *ipc, const char *dev, uint32_t *qpn)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev || !qpn)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_QPN_ALLOC, dev, NULL, 0);
	if (!err)
		err = call(ipc, &req, &resp);
	if (!err)
		*qpn = resp.u.qpn;
	return err;
}

int uroce_ipc_qpn_free(struct uroce_ipc *ipc, const char *dev, uint32_t qpn)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_QPN_FREE, dev, NULL, qpn);
	return err ? err : call(ipc, &req, &resp);
}

int uroce_ipc_qpn_owner(struct uroce_ipc *ipc, const char *dev, uint32_t qpn, int32_t *pid)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_QPN_OWNER, dev, NULL, qpn);
	if (!err)
		err = call(ipc, &req, &resp);
	if (!err && pid)
		*pid = resp.u.owner_pid;
	return err;
}

int uroce_ipc_link_add(struct uroce_ipc *ipc, const char *name, const char *netdev)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!name || !*name || !netdev || !*netdev)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_LINK_ADD, name, netdev, 0);
	return err ? err : call(ipc, &req, &resp);
}

int uroce_ipc_link_del(struct uroce_ipc *ipc, const char *name)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!name || !*name)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_LINK_DEL, name, NULL, 0);
	return err ? err : call(ipc, &req, &resp);
}

int uroce_ipc_status(struct uroce_ipc *ipc, struct uroce_daemon_status *st)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!st)
		return -EINVAL;
	init_req(&req, UROCE_OP_STATUS, NULL, NULL, 0);
	err = call(ipc, &req, &resp);
	if (!err)
		*st = resp.u.status;
	return err;
}

int uroce_ipc_shutdown(struct uroce_ipc *ipc)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;

	init_req(&req, UROCE_OP_SHUTDOWN, NULL, NULL, 0);
	return call(ipc, &req, &resp);
}

int uroce_ipc_persist(struct uroce_ipc *ipc)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;

	init_req(&req, UROCE_OP_PERSIST, NULL, NULL, 0);
	return call(ipc, &req, &resp);
}

int uroce_ipc_rx_socket(struct uroce_ipc *ipc, const char *dev, int *fd)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev || !fd)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_RX_SOCKET, dev, NULL, 0);
	if (!err)
		err = call_fd(ipc, &req, &resp, -1, fd);
	if (!err && *fd < 0)
		err = -EPROTO;  /* success without a descriptor */
	return err;
}

int uroce_ipc_cap_register(struct uroce_ipc *ipc, const char *dev, int memfd)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev || memfd < 0)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_CAP_REGISTER, dev, NULL, 0);
	return err ? err : call_fd(ipc, &req, &resp, memfd, NULL);
}

int uroce_ipc_cap_start(struct uroce_ipc *ipc, const char *dev, uint32_t *session)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_CAP_START, dev, NULL, 0);
	if (!err)
		err = call(ipc, &req, &resp);
	if (!err && session)
		*session = resp.u.cap.session;
	return err;
}

int uroce_ipc_cap_next(struct uroce_ipc *ipc, const char *dev, struct uroce_cap_info *info,
		       int *memfd)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev || !info || !memfd)
		return -EINVAL;
	*memfd = -1;
	err = init_req(&req, UROCE_OP_CAP_NEXT, dev, NULL, 0);
	if (!err)
		err = call_fd(ipc, &req, &resp, -1, memfd);
	if (!err && *memfd < 0)
		err = -EPROTO;  /* success without a descriptor */
	if (!err)
		*info = resp.u.cap;
	return err;
}

int uroce_ipc_link_set(struct uroce_ipc *ipc, const char *dev, uint32_t loopback)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_LINK_SET, dev, NULL, loopback);
	return err ? err : call(ipc, &req, &resp);
}

int uroce_ipc_shm_attach(struct uroce_ipc *ipc, const char *dev, int efd)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev || efd < 0)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_SHM_ATTACH, dev, NULL, 0);
	return err ? err : call_fd(ipc, &req, &resp, efd, NULL);
}

/* The reply of SHM_LINK / SHM_ACCEPT: both descriptors or an error (none kept). */
static int shm_reply(int err, const struct uroce_ipc_resp *resp, int fds[2],
		     struct uroce_shm_link_info *info, int *memfd, int *peer_efd)
{
	if (!err && (fds[0] < 0 || fds[1] < 0))
		err = -EPROTO;   /* success without both descriptors */
	if (err) {
		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return err;
	}
	*info = resp->u.shm;
	*memfd = fds[0];
	*peer_efd = fds[1];
	return 0;
}

int uroce_ipc_shm_link(struct uroce_ipc *ipc, const char *dev, const uint8_t dgid[16], uint32_t dqpn,
		       uint32_t ring_bytes, struct uroce_shm_link_info *info, int *memfd, int *peer_efd)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int fds[2] = { -1, -1 }, err;

	if (!dev || !dgid || !info || !memfd || !peer_efd)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_SHM_LINK, dev, NULL, dqpn);
	if (err)
		return err;
	memcpy(req.x.shm.dgid, dgid, 16);
	req.x.shm.ring_bytes = ring_bytes;
	err = call_fds(ipc, &req, &resp, -1, fds, 2);
	return shm_reply(err, &resp, fds, info, memfd, peer_efd);
}

int uroce_ipc_shm_accept(struct uroce_ipc *ipc, const char *dev, struct uroce_shm_link_info *info,
			 int *memfd, int *peer_efd)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int fds[2] = { -1, -1 }, err;

	if (!dev || !info || !memfd || !peer_efd)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_SHM_ACCEPT, dev, NULL, 0);
	if (err)
		return err;
	err = call_fds(ipc, &req, &resp, -1, fds, 2);
	return shm_reply(err, &resp, fds, info, memfd, peer_efd);
}

static int cnt_register(struct uroce_ipc *ipc, const char *dev, struct uroce_counters *c,
			uint32_t block)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!dev || !c)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_CNT_REGISTER, dev, NULL, block);
	return err ? err : call_fd(ipc, &req, &resp, uroce_counters_fd(c), NULL);
}

int uroce_ipc_counters_register(struct uroce_ipc *ipc, const char *dev, struct uroce_counters *c)
{
	return cnt_register(ipc, dev, c, 0);
}

int uroce_ipc_qp_counters(struct uroce_ipc *ipc, const char *dev,
			  const char *const *ctx_names, unsigned n_ctx,
			  const char *const *qp_names, unsigned n_qp, unsigned n_slots,
			  struct uroce_counters **out)
{
	unsigned i, n = sizeof(ipc->qpcnt) / sizeof(ipc->qpcnt[0]);
	int err = -ENOSPC;

	if (!ipc || !dev || !out || strlen(dev) >= UROCE_DEV_NAME_MAX)
		return -EINVAL;
	pthread_mutex_lock(&ipc->cnt_lock);
	for (i = 0; i < n; i++) {
		if (!ipc->qpcnt[i].dev[0] || !strcmp(ipc->qpcnt[i].dev, dev))
			break;
	}
	if (i == n)
		goto out;
	if (ipc->qpcnt[i].dev[0]) {
		err = ipc->qpcnt[i].err;
		*out = ipc->qpcnt[i].c;
		goto out;
	}
	strcpy(ipc->qpcnt[i].dev, dev);
	err = uroce_counters_create(ctx_names, n_ctx, qp_names, n_qp, n_slots, &ipc->qpcnt[i].c);
	if (!err) {
		err = cnt_register(ipc, dev, ipc->qpcnt[i].c, 1);
		if (err) {
			uroce_counters_destroy(ipc->qpcnt[i].c);
			ipc->qpcnt[i].c = NULL;
		}
	}
	/* Remembered either way: a data path without the daemon must not ask per QP. */
	ipc->qpcnt[i].err = err ? -ENOTCONN : 0;
	*out = ipc->qpcnt[i].c;
out:
	pthread_mutex_unlock(&ipc->cnt_lock);
	return err;
}

int uroce_ipc_counters(struct uroce_ipc *ipc, struct uroce_cnt_record **recs, unsigned *n)
{
	if (!recs || !n)
		return -EINVAL;
	return read_list(ipc, UROCE_OP_CNT_GET, sizeof(**recs), (void **)recs, n);
}

int uroce_ipc_counters_total(struct uroce_ipc *ipc, const char *dev, uint32_t block,
			     struct uroce_cnt_record *rec)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	if (!rec)
		return -EINVAL;
	err = init_req(&req, UROCE_OP_CNT_TOTAL, dev, NULL, block);
	if (err)
		return err;
	err = call(ipc, &req, &resp);
	if (!err) {
		*rec = resp.u.cnt;
		if (rec->n > UROCE_CNT_MAX)
			rec->n = UROCE_CNT_MAX;
	}
	return err;
}

int uroce_ipc_subscribe(struct uroce_ipc *ipc)
{
	struct uroce_ipc_req req;
	struct uroce_ipc_resp resp;
	int err;

	init_req(&req, UROCE_OP_SUBSCRIBE, NULL, NULL, 0);
	err = call(ipc, &req, &resp);
	if (!err)
		ipc->subscribed = 1;
	return err;
}

int uroce_ipc_event(struct uroce_ipc *ipc, struct uroce_ipc_event *ev)
{
	int err = -EAGAIN;

	if (!ipc || !ev)
		return -EINVAL;
	pthread_mutex_lock(&ipc->lock);
	if (ipc->owner != getpid()) {
		err = -EBADF;
		goto out;
	}
	while (!ipc->ev_count && !ipc->dead) {
		struct uroce_ipc_resp resp;
		ssize_t n = recv(ipc->fd, &resp, sizeof(resp), MSG_DONTWAIT | MSG_TRUNC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			ipc->dead = 1;
			break;
		}
		/* Between calls only events arrive; anything else is a stale reply. */
		if ((size_t)n == sizeof(resp) && resp.magic == UROCE_IPC_MAGIC &&
		    resp.op == UROCE_OP_EVENT && resp.seq == 0)
			queue_event(ipc, &resp);
	}
	if (ipc->ev_count) {
		*ev = ipc->events[ipc->ev_head];
		ev->lost += ipc->ev_lost;
		ipc->ev_lost = 0;
		ipc->ev_head = (ipc->ev_head + 1) % EVENT_QUEUE;
		ipc->ev_count--;
		err = 0;
	} else if (ipc->dead) {
		err = -ECONNRESET;
	}
out:
	pthread_mutex_unlock(&ipc->lock);
	return err;
}
