/* main.c — uroced: the uroce control daemon of one network namespace.
 *
 *   uroced [-f] [-v] [-i MS] [--autostarted]
 *     -f   stay in the foreground, log to stderr (debugging)
 *     -v   verbose log (clients coming and going)
 *     -i   idle time of an autostarted daemon in ms (0: never exit when idle);
 *          default $UROCE_DAEMON_IDLE_MS, else UROCED_IDLE_MS_DEFAULT
 *     --autostarted   started on demand by uroce_ipc_open (the libraries, `uroce
 *          run`, `uroce link` ...): exit when idle, and losing the race for the
 *          socket name is not an error
 *
 * Lifetime: a daemon started on demand exits once it has had no client for the
 * idle time, so that a network namespace whose programs have all ended does not
 * stay alive because of its daemon (`ip netns del` frees it).  Nothing is lost:
 * links are in the state file, the departed clients' counters are written beside
 * it (counters.c) and read by the next daemon, and QPNs, receive sockets and
 * events belong to clients, of which there are none.  The exit is race-free for
 * a client that connects meanwhile: after the counters are written the daemon
 * accepts what is queued and, if a client came, serves it and stays; a client
 * that connects after that, before the socket is closed, has its connection
 * reset before HELLO is answered, and uroce_ipc_open then starts a successor
 * (the name is free by then).  A daemon started explicitly (`uroce daemon start`,
 * uroced without --autostarted) stays until stopped, and so does an autostarted
 * one whose links could not be saved.
 *
 * Without -f the daemon binds its socket first and only then detaches (double
 * fork + setsid); the process that was started exits once the socket listens.
 * Whoever started it (uroce_ipc_open's autostart, `uroce daemon start`) can
 * therefore connect as soon as that process has exited, with no polling.  Losing
 * the race for the socket name to another daemon is not an error when autostarted:
 * the other daemon serves.
 *
 * Event loop, one phase per epoll wake-up, in this order of the ready list:
 *   listening socket -> accept all pending clients
 *   rtnetlink        -> drain, then re-read all netdevs once if anything changed
 *   signalfd         -> SIGTERM/SIGINT/SIGHUP: stop
 *   a device's index-0 receive socket -> QP1 for the connection manager (at most 256
 *                       datagrams per wake-up)
 *   the CM's timerfd -> its retransmissions, timeouts and timewaits
 *   client sockets   -> at most 16 requests each per wake-up; a full event channel
 *                       that drained
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/uroced.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: uroced [-f] [-v] [-i MS] [--autostarted]\n"
		   "  -f  run in the foreground, log to stderr\n"
		   "  -v  verbose log\n"
		   "  -i, --idle-ms MS  with --autostarted: exit after MS ms without a client\n"
		   "      (0: never; default $UROCE_DAEMON_IDLE_MS, else %d)\n"
		   "  --autostarted  started on demand: exit when idle\n"
		   "One uroced serves one network namespace; programs start it on demand.\n",
		UROCED_IDLE_MS_DEFAULT);
}

/* An autostarted daemon inherits the signal mask and ignored signals of whatever
 * application started it: start from a clean slate. */
static void reset_signals(void)
{
	sigset_t none;

	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static uint64_t netns_inode(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) ? 0 : (uint64_t)st.st_ino;
}

/* Detach: the caller returns in the daemon; the original process exits 0 once
 * the daemon is running, 1 if it could not be created. */
static int detach(void)
{
	const char *log = getenv("UROCE_DAEMON_LOG");
	int status, fd;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid > 0) {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	}
	if (setsid() < 0)
		_exit(1);
	pid = fork();
	if (pid < 0)
		_exit(1);
	if (pid > 0)
		_exit(0);  /* the session leader goes: the daemon can never get a tty */
	if (chdir("/") < 0)
		return -errno;
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		int out = log && *log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;

		dup2(fd, 0);
		dup2(out >= 0 ? out : fd, 1);
		dup2(out >= 0 ? out : fd, 2);
		if (out >= 0)
			close(out);
		close(fd);
	}
	return 0;
}

static int watch(struct uroced *d, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ptr };

	return epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* An idle time in ms: a decimal number, 0 .. 24 h; -1 if it is not one. */
static int64_t parse_idle(const char *s)
{
	char *end;
	long long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < 0 || v > 24LL * 3600 * 1000)
		return -1;
	return v;
}

static void load_devices(struct uroced *d)
{
	int err = uroce_state_path(d->state_path, sizeof(d->state_path), d->devs.netns_inode);
	size_t n;

	if (err) {
		uroced_log("no state directory (%s): links will not persist\n", strerror(-err));
		d->state_path[0] = 0;
	} else {
		/* The counters file sits beside the links: NAME.links -> NAME.counters. */
		n = strlen(d->state_path);
		if (n > 6 && !strcmp(d->state_path + n - 6, ".links") &&
		    n - 6 + sizeof(".counters") <= sizeof(d->counters_path)) {
			memcpy(d->counters_path, d->state_path, n - 6);
			strcpy(d->counters_path + n - 6, ".counters");
		}
		err = uroce_state_load(&d->devs, d->state_path);
	}
	if (err) {
		/* Never configured: one device on loopback, so a single-host program
		 * works out of the box. */
		err = uroce_dev_add(&d->devs, "uroce0", "lo", NULL);
		if (err)
			uroced_log("cannot add uroce0: %s\n", strerror(-err));
	}
}

/* epoll_wait's timeout: -1 while the daemon is to stay (clients connected, or it
 * never exits when idle), else the ms until its idle time is up (0: now). */
static int idle_timeout(struct uroced *d)
{
	int64_t wait = d->idle_ms, left;

	if (uroced_lifetime(d) != UROCE_LIFE_IDLE_EXIT || d->nclients)
		return -1;
	/* The connection manager's ids that outlive their clients (a DREQ still being
	 * retried, timewait) keep the daemon as a client would; the idle time counts
	 * from when the last of them is gone (its timer wakes the loop). */
	if (uroced_cm_busy(d)) {
		d->idle_since_ms = uroced_now_ms();
		return -1;
	}
	if (!d->had_client && wait < UROCED_FIRST_CLIENT_MS)
		wait = UROCED_FIRST_CLIENT_MS;
	left = d->idle_since_ms + wait - uroced_now_ms();
	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* Tests only: $UROCE_DAEMON_EXIT_PAUSE = "accept:MS" or "close:MS" holds the idle
 * exit for MS ms before the last accept or before the socket closes, so that a
 * test can put a client into either window. */
static void test_pause(const char *where)
{
	const char *env = getenv("UROCE_DAEMON_EXIT_PAUSE");
	size_t n = strlen(where);
	struct timespec ts;
	int64_t ms;

	if (!env || strncmp(env, where, n) || env[n] != ':' || (ms = parse_idle(env + n + 1)) <= 0)
		return;
	uroced_log("exit paused %lld ms before %s (UROCE_DAEMON_EXIT_PAUSE)\n", (long long)ms, where);
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The idle time is up.  1: exit (the caller then closes the listening socket
 * first); 0: a client came after all, serve it.  See the top of this file for
 * why a client that connects meanwhile is never lost. */
static int idle_exit(struct uroced *d)
{
	int err = 0;

	if (d->counters_path[0] && (err = uroced_cnt_save(d, d->counters_path)))
		uroced_log("cannot save counters to %s: %s (departed clients' totals are lost)\n",
			   d->counters_path, strerror(-err));
	test_pause("accept");
	uroced_accept(d);
	if (d->nclients) {
		uroced_log("a client came during the idle exit: staying\n");
		/* Staying: the next daemon must not count the file again. */
		if (d->counters_path[0] && !err && unlink(d->counters_path) < 0)
			uroced_log("cannot remove %s: %s\n", d->counters_path, strerror(errno));
		return 0;
	}
	uroced_log("no client for %lld ms: exiting%s%s\n", (long long)d->idle_ms,
		   d->counters_path[0] && !err ? ", counters saved to " : "",
		   d->counters_path[0] && !err ? d->counters_path : "");
	test_pause("close");
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "autostarted", no_argument, NULL, 'A' },
		{ "idle-ms", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct uroced d;
	int foreground = 0, autostarted = 0, sfd, err, opt;
	const char *idle_env = getenv("UROCE_DAEMON_IDLE_MS");
	int64_t idle_ms = UROCED_IDLE_MS_DEFAULT;
	sigset_t sigs;
	char sig_tag, listen_tag, rtnl_tag;

	if (idle_env && *idle_env) {
		idle_ms = parse_idle(idle_env);
		if (idle_ms < 0) {
			fprintf(stderr, "uroced: UROCE_DAEMON_IDLE_MS=%s is not a time in ms "
					"(0 .. 86400000): using %d\n", idle_env, UROCED_IDLE_MS_DEFAULT);
			idle_ms = UROCED_IDLE_MS_DEFAULT;
		}
	}
	while ((opt = getopt_long(argc, argv, "fvhi:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': foreground = 1; break;
		case 'v': uroced_verbose = 1; break;
		case 'A': autostarted = 1; break;
		case 'i':
			idle_ms = parse_idle(optarg);
			if (idle_ms < 0) {
				fprintf(stderr, "uroced: --idle-ms %s: not a time in ms (0 .. 86400000)\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	reset_signals();
	memset(&d, 0, sizeof(d));
	d.listen_fd = d.epoll_fd = d.rtnl_fd = -1;
	d.uid = geteuid();
	d.start_ms = d.idle_since_ms = uroced_now_ms();
	d.autostarted = autostarted;
	d.idle_ms = idle_ms;
	d.devs.netns_inode = netns_inode();

	err = uroced_listen(&d);
	if (err == -EADDRINUSE) {
		if (autostarted)
			return 0;  /* lost the autostart race: the winner serves */
		fprintf(stderr, "uroced: a daemon already runs in this network namespace\n");
		return 1;
	}
	if (err) {
		fprintf(stderr, "uroced: cannot listen: %s\n", strerror(-err));
		return 1;
	}
	/* Subscribe before the first read of the netdevs, so no change falls in
	 * between. */
	d.rtnl_fd = uroce_rtnl_open();
	if (d.rtnl_fd < 0)
		fprintf(stderr, "uroced: no rtnetlink (%s): GIDs will not follow address changes\n",
			strerror(-d.rtnl_fd));
	load_devices(&d);
	uroce_dev_refresh_all(&d.devs);
	/* What the previous daemon kept over its idle exit (after the devices, which
	 * it names).  It wrote the file before it released the socket name, so the
	 * file is complete once our bind() has succeeded. */
	if (d.counters_path[0] && (err = uroced_cnt_load(&d, d.counters_path)) && err != -ENOENT)
		uroced_log("%s: %s\n", d.counters_path, strerror(-err));
	for (unsigned i = 0; i < d.devs.n; i++)
		d.devs.dev[i]->pending_events = 0;  /* nobody to tell yet */

	if (!foreground && detach() < 0)
		return 1;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	d.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || d.epoll_fd < 0 || watch(&d, d.listen_fd, &listen_tag) ||
	    watch(&d, sfd, &sig_tag) || (d.rtnl_fd >= 0 && watch(&d, d.rtnl_fd, &rtnl_tag))) {
		uroced_log("setup: %s\n", strerror(errno));
		return 1;
	}
	err = uroced_cm_init(&d);
	if (err)
		uroced_log("no connection manager (%s): rdma_cm calls will fail\n", strerror(-err));
	uroced_log("serving network namespace %llu, %u device(s)%s%s%s\n",
		   (unsigned long long)d.devs.netns_inode, d.devs.n,
		   d.state_path[0] ? ", state " : "", d.state_path,
		   uroced_lifetime(&d) == UROCE_LIFE_IDLE_EXIT ? ", exits when idle" : "");

	while (!d.stop) {
		struct epoll_event ev[32];
		int timeout = idle_timeout(&d);
		int n = timeout == 0 ? 0 : epoll_wait(d.epoll_fd, ev, 32, timeout);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			uroced_log("epoll_wait: %s\n", strerror(errno));
			break;
		}
		if (n == 0 && idle_timeout(&d) == 0) {
			if (idle_exit(&d))
				break;
			continue;
		}
		for (int i = 0; i < n && !d.stop; i++) {
			void *p = ev[i].data.ptr;

			if (p == &listen_tag) {
				uroced_accept(&d);
			} else if (p == &rtnl_tag) {
				if (uroce_rtnl_drain(d.rtnl_fd) && uroce_dev_refresh_all(&d.devs) > 0)
					d.generation++;  /* (also done before device queries) */
				uroced_flush_events(&d);
				uroced_cm_sync_devices(&d);
			} else if (p == &sig_tag) {
				d.stop = 1;
			} else if (uroced_cm_is_timer(&d, p)) {
				uroced_cm_timer(&d);
			} else if (uroced_rx_dev(&d, p)) {
				uroced_rx_default(&d, uroced_rx_dev(&d, p));
			} else {
				uroced_client_event(&d, p, ev[i].events);
				/* A client may have been freed: later events in this batch
				 * could name it.  Stop the batch; epoll reports the rest
				 * again (level-triggered). */
				break;
			}
		}
	}
	/* Stop listening first: from now on clients fail to connect (and may
	 * autostart a successor) instead of waiting on a dying daemon. */
	close(d.listen_fd);
	uroced_close_all(&d);
	uroced_cm_fini(&d);
	uroced_cap_fini();
	uroce_dev_free_all(&d.devs);
	if (d.rtnl_fd >= 0)
		close(d.rtnl_fd);
	close(sfd);
	close(d.epoll_fd);
	uroced_log("stopped\n");
	return 0;
}
