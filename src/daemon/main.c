/* main.c — uroced: the uroce control daemon of one network namespace.
 *
 *   uroced [-f] [-v]
 *     -f   stay in the foreground, log to stderr (debugging)
 *     -v   verbose log (clients coming and going)
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
#include <signal.h>
#include <stdarg.h>
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

int uroced_verbose;

void uroced_log(const char *fmt, ...)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(stderr, "%s uroced[%d]: ", when, (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: uroced [-f] [-v]\n"
		   "  -f  run in the foreground, log to stderr\n"
		   "  -v  verbose log\n"
		   "One uroced serves one network namespace; programs start it on demand.\n");
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

static void load_devices(struct uroced *d)
{
	int err = uroce_state_path(d->state_path, sizeof(d->state_path), d->devs.netns_inode);

	if (err) {
		uroced_log("no state directory (%s): links will not persist\n", strerror(-err));
		d->state_path[0] = 0;
	} else {
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "autostarted", no_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct uroced d;
	int foreground = 0, autostarted = 0, sfd, err, opt;
	sigset_t sigs;
	char sig_tag, listen_tag, rtnl_tag;

	while ((opt = getopt_long(argc, argv, "fvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'f': foreground = 1; break;
		case 'v': uroced_verbose = 1; break;
		case 'A': autostarted = 1; break;
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
	d.start_ms = uroced_now_ms();
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
	uroced_log("serving network namespace %llu, %u device(s)%s%s\n",
		   (unsigned long long)d.devs.netns_inode, d.devs.n,
		   d.state_path[0] ? ", state " : "", d.state_path);

	while (!d.stop) {
		struct epoll_event ev[32];
		int n = epoll_wait(d.epoll_fd, ev, 32, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			uroced_log("epoll_wait: %s\n", strerror(errno));
			break;
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
	uroce_dev_free_all(&d.devs);
	if (d.rtnl_fd >= 0)
		close(d.rtnl_fd);
	close(sfd);
	close(d.epoll_fd);
	uroced_log("stopped\n");
	return 0;
}
