/* cmd_run.c — `uroce run CMD [ARGS...]`: run an unmodified RDMA program on uroce.
 *
 * Makes sure this namespace's uroced runs (so the program's first verbs call does
 * not pay for the autostart), puts uroce's library directory (the uroce binary's
 * ../lib, where libibverbs.so.1 and librdmacm.so.1 are built) in front of
 * LD_LIBRARY_PATH, and execs CMD.  The exit status is CMD's; 126/127 as a shell
 * when CMD cannot be run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ipc/ipc.h"

static int run_help(FILE *f)
{
	fprintf(f, "Usage: uroce run CMD [ARGS...]\n"
		   "Runs CMD with uroce's libibverbs.so.1 and librdmacm.so.1 (LD_LIBRARY_PATH).\n"
		   "\n"
		   "Capturing the packets (tshark, tcpdump, Wireshark on lo, a veth, a bridge):\n"
		   "uroce hands runs of equal-size packets to the kernel in one UDP GSO send,\n"
		   "and a capture point before segmentation shows each run as ONE oversized\n"
		   "frame holding several RoCEv2 packets, with a wrong ICRC.  To capture the\n"
		   "packets as a wire carries them, run the program with GSO off:\n"
		   "    UROCE_NETIO_GSO=0 uroce run CMD ...\n"
		   "(or, as root, make the netdev segment in software first:\n"
		   "    ethtool -K lo tx-udp-segmentation off)\n"
		   "and dissect port 4791 as RoCEv2:  tshark -i lo -f 'udp port 4791' -d udp.port==4791,infiniband\n");
	return f == stdout ? 0 : 1;
}

/* dirname(/proc/self/exe)/../lib, resolved; -errno if it cannot be found. */
static int lib_dir(char *out, size_t size)
{
	char self[PATH_MAX], lib[PATH_MAX + 8];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	snprintf(lib, sizeof(lib), "%s/../lib", self);
	if (!realpath(lib, out) || strlen(out) >= size)
		return -ENOENT;
	return 0;
}

int uroce_cmd_run(int argc, char **argv)
{
	char dir[PATH_MAX];
	struct uroce_ipc *ipc;
	const char *old;
	char *path;
	int err;

	if (argc < 2) {
		fprintf(stderr, "Please provide a command to run.\n");
		run_help(stderr);
		return 1;
	}
	if (!strcmp(argv[1], "help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return run_help(stdout);
	if (!strcmp(argv[1], "--")) {
		argv++;
		argc--;
		if (argc < 2) {
			fprintf(stderr, "Please provide a command to run.\n");
			return 1;
		}
	}
	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	if (err) {
		fprintf(stderr, "error: cannot start uroced: %s\n", strerror(-err));
		return 1;
	}
	uroce_ipc_close(ipc);
	err = lib_dir(dir, sizeof(dir));
	if (err) {
		fprintf(stderr, "error: cannot find uroce's library directory: %s\n", strerror(-err));
		return 1;
	}
	old = getenv("LD_LIBRARY_PATH");
	if (asprintf(&path, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "") < 0) {
		fprintf(stderr, "error: %s\n", strerror(ENOMEM));
		return 1;
	}
	setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	execvp(argv[1], argv + 1);
	err = errno;
	fprintf(stderr, "error: %s: %s\n", argv[1], strerror(err));
	return err == ENOENT ? 127 : 126;
}
