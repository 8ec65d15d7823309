/* cmd_daemon.c — `uroce daemon start|stop|status`: the uroced of this network
 * namespace.
 *
 *   start   start uroced unless one runs (the same autostart the libraries do)
 *   stop    ask uroced to exit and wait until it has gone
 *   status  pid, devices, clients and allocated QPNs; exit 1 if not running
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
		   "One uroced serves one network namespace; programs start it on demand.\n");
	return f == stdout ? 0 : 1;
}

static int daemon_start(void)
{
	struct uroce_daemon_status st;
	struct uroce_ipc *ipc;
	int err, running;

	running = !uroce_ipc_open(&ipc, 0);
	if (!running) {
		err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
		if (err) {
			fprintf(stderr, "error: cannot start uroced: %s\n", strerror(-err));
			return 1;
		}
	}
	err = uroce_ipc_status(ipc, &st);
	uroce_ipc_close(ipc);
	if (err) {
		fprintf(stderr, "error: %s\n", strerror(-err));
		return 1;
	}
	printf("uroced %s, pid %d\n", running ? "already running" : "started", (int)st.pid);
	return 0;
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
