/* cmd_daemon.c — `uroce daemon start|stop|status`: the uroced of this network
 * namespace.
 *
 *   start   start uroced unless one runs (the same autostart the libraries do),
 *           and make it stay: one that programs started on demand exits when it
 *           has been idle (no client) for a while, one started here does not
 *   stop    ask uroced to exit and wait until it has gone
 *   status  pid, devices, clients and allocated QPNs, and when it will exit;
 *           exit 1 if not running
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ipc/ipc.h"

static int matches(const char *arg, const char *keyword)
{
	size_t n = strlen(arg);

	return n && n <= strlen(keyword) && !strncmp(arg, keyword, n);
}

static int daemon_help(FILE *f)
{
	fprintf(f, "Usage: uroce daemon start\n"
		   "       uroce daemon stop\n"
		   "       uroce daemon status\n"
		   "       uroce daemon help\n"
		   "One uroced serves one network namespace; programs start it on demand,\n"
		   "and such a daemon exits after it has had no client for a while\n"
		   "($UROCE_DAEMON_IDLE_MS, default 10000).  'start' makes it stay.\n");
	return f == stdout ? 0 : 1;
}

static int daemon_start(void)
{
	struct uroce_daemon_status st;
	struct uroce_ipc *ipc;
	int err, kept, running;

	running = !uroce_ipc_open(&ipc, 0);
	if (!running) {
		err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
		if (err) {
			fprintf(stderr, "error: cannot start uroced: %s\n", strerror(-err));
			return 1;
		}
	}
	/* Started here (or found running, perhaps autostarted): it stays until
	 * `uroce daemon stop`.  Another user's daemon is theirs to keep or not. */
	kept = uroce_ipc_persist(ipc);
	if (kept && kept != -EPERM) {
		uroce_ipc_close(ipc);
		fprintf(stderr, "error: %s\n", strerror(-kept));
		return 1;
	}
	err = uroce_ipc_status(ipc, &st);
	uroce_ipc_close(ipc);
	if (err) {
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	printf("uroced %s, pid %d%s\n", running ? "already running" : "started", (int)st.pid,
	       kept && st.lifetime == UROCE_LIFE_IDLE_EXIT ?
	       " (another user's, started on demand: it exits when idle)" : "");
	return 0;
}

/* When the daemon will exit, as one line.  clients counts the asking uroce. */
static void print_lifetime(const struct uroce_daemon_status *st)
{
	unsigned others = st->num_clients ? st->num_clients - 1 : 0;

	switch (st->lifetime) {
	case UROCE_LIFE_STAYS:
		printf("exit never: started by 'uroce daemon start', stays until 'uroce daemon stop'\n");
		break;
	case UROCE_LIFE_NO_IDLE:
		printf("exit never: started on demand, idle exit off (idle time 0)\n");
		break;
	case UROCE_LIFE_UNSAVED:
		printf("exit never: started on demand, but its links could not be saved\n");
		break;
	case UROCE_LIFE_IDLE_EXIT:
		if (others)
			printf("exit idle %u.%03us after its last client leaves (%u other client%s now)\n",
			       st->idle_ms / 1000, st->idle_ms % 1000, others, others == 1 ? "" : "s");
		else
			printf("exit idle %u.%03us after this command, unless a client connects\n",
			       st->idle_ms / 1000, st->idle_ms % 1000);
		break;
	default:
		printf("exit unknown (lifetime %u)\n", st->lifetime);
		break;
	}
}

static int daemon_stop(void)
{
	struct uroce_ipc *ipc;
	struct pollfd p;
	int err = uroce_ipc_open(&ipc, 0);

	if (err == -ECONNREFUSED || err == -ENOENT) {
		fprintf(stderr, "uroced is not running\n");
		return 0;
	}
	if (err) {
		fprintf(stderr, "error: cannot reach uroced: %s\n", strerror(-err));
		return 1;
	}
	err = uroce_ipc_shutdown(ipc);
	if (err) {
		uroce_ipc_close(ipc);
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	/* The daemon stops listening first, then drops its clients: our EOF means
	 * the name is free and a new daemon can start.  Bounded wait. */
	p.fd = uroce_ipc_fd(ipc);
	p.events = POLLIN;
	while ((err = poll(&p, 1, UROCE_IPC_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	uroce_ipc_close(ipc);
	if (err == 0) {
		fprintf(stderr, "error: uroced did not stop within %d ms\n", UROCE_IPC_TIMEOUT_MS);
		return 1;
	}
	return 0;
}

static int daemon_status(void)
{
	struct uroce_daemon_status st;
	struct uroce_client_info *cl = NULL;
	struct uroce_dev_stats *ds = NULL;
	struct uroce_ipc *ipc;
	unsigned ncl = 0, nds = 0;
	int err = uroce_ipc_open(&ipc, 0);

	if (err == -ECONNREFUSED || err == -ENOENT) {
		printf("uroced is not running\n");
		return 1;
	}
	if (err) {
		fprintf(stderr, "error: cannot reach uroced: %s\n", strerror(-err));
		return 1;
	}
	err = uroce_ipc_status(ipc, &st);
	if (!err)
		err = uroce_ipc_dev_stats(ipc, &ds, &nds);
	if (!err)
		err = uroce_ipc_clients(ipc, &cl, &ncl);
	uroce_ipc_close(ipc);
	if (err) {
		free(ds);
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	printf("daemon pid %d netns %llu uptime %llu.%03llus protocol %u\n", (int)st.pid,
	       (unsigned long long)st.netns_inode, (unsigned long long)(st.uptime_ms / 1000),
	       (unsigned long long)(st.uptime_ms % 1000), st.proto_version);
	for (unsigned i = 0; i < nds; i++)
		printf("device %s qpns %u clients %u\n", ds[i].name, ds[i].qpns_in_use, ds[i].clients);
	/* The connection asking is a client too; mark it rather than hide it. */
	for (unsigned i = 0; i < ncl; i++)
		printf("client pid %d uid %u qpns %u requests %llu%s\n", (int)cl[i].pid, cl[i].uid,
		       cl[i].qpns, (unsigned long long)cl[i].requests,
		       cl[i].pid == getpid() ? " (this uroce)" : "");
	printf("total devices %u clients %u qpns %u\n", st.num_devices, st.num_clients,
	       st.qpns_allocated);
	print_lifetime(&st);
	free(ds);
	free(cl);
	return 0;
}

int uroce_cmd_daemon(int argc, char **argv)
{
	if (argc < 2)
		return daemon_status();
	if (argc > 2) {
		fprintf(stderr, "Unknown parameter '%s'.\n", argv[2]);
		return 1;
	}
	if (matches(argv[1], "help"))
		return daemon_help(stdout);
	if (matches(argv[1], "start"))
		return daemon_start();
	if (matches(argv[1], "stop"))
		return daemon_stop();
	if (matches(argv[1], "status"))
		return daemon_status();
	fprintf(stderr, "Unknown command '%s'.\n", argv[1]);
	daemon_help(stderr);
	return 1;
}
