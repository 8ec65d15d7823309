/* cmd_run.c — `uroce run [OPTIONS] CMD [ARGS...]`: run an unmodified RDMA program on uroce.
 *
 * Makes sure this namespace's uroced runs (so the program's first verbs call does not pay
 * for the autostart, and so that the daemon lives outside the namespaces entered below),
 * puts uroce's library directory (the uroce binary's ../lib, where libibverbs.so.1 and
 * librdmacm.so.1 are built) in front of LD_LIBRARY_PATH, gives the program the
 * /dev/infiniband and /sys/class/infiniband that UCX and Open MPI look for (run.h: a
 * private mount namespace, or the LD_PRELOAD shim where namespaces are refused), and execs
 * CMD.  The exit status is CMD's; 126/127 as a shell when CMD cannot be run, 1 when the
 * set-up fails.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run.h"
#include "ipc/ipc.h"

enum run_mode { MODE_AUTO, MODE_NS, MODE_SHIM, MODE_PLAIN };

static int run_help(FILE *f)
{
	fprintf(f, "Usage: uroce run [-v] [--ns|--shim|--plain] [--] CMD [ARGS...]\n"
		   "Runs CMD with uroce's libibverbs.so.1 and librdmacm.so.1 (LD_LIBRARY_PATH), and\n"
		   "with the /dev/infiniband/uverbsN nodes and the /sys/class/infiniband tree (GID\n"
		   "types, netdevs, device/driver) that UCX and Open MPI look for:\n"
		   "  (default) a private mount namespace (a user namespace too when not root, with\n"
		   "            your uid and gid mapped to themselves); where the kernel refuses\n"
		   "            namespaces (chroot, container), the LD_PRELOAD shim\n"
		   "  --ns      the namespace or fail        --shim   the LD_PRELOAD shim\n"
		   "  --plain   only LD_LIBRARY_PATH         -v       say which, on stderr\n"
		   "$UROCE_RUN_MODE (ns, shim, plain) sets the default; the program finds the\n"
		   "choice in $UROCE_RUN.  Run `ip netns exec` before `uroce run`, not after: it\n"
		   "remounts /sys.\n"
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

/* VAR=ITEM:$VAR (front: unless ITEM is first already) or VAR=$VAR:ITEM (back: unless
 * ITEM is listed already). */
static int env_list_add(const char *var, const char *item, int front)
{
	const char *old = getenv(var);
	size_t k = strlen(item);
	char *val;

	for (const char *p = old; p && *p;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len == k && !strncmp(p, item, k))
			return 0;
		if (front)
			break;
		p += len + (end != NULL);
	}
	if (!old || !*old)
		val = strdup(item);
	else if (asprintf(&val, "%s:%s", front ? item : old, front ? old : item) < 0)
		val = NULL;
	if (!val)
		return -ENOMEM;
	setenv(var, val, 1);
	free(val);
	return 0;
}

static int parse_mode(const char *s, enum run_mode *m)
{
	if (!strcmp(s, "ns"))
		*m = MODE_NS;
	else if (!strcmp(s, "shim"))
		*m = MODE_SHIM;
	else if (!strcmp(s, "plain"))
		*m = MODE_PLAIN;
	else if (!strcmp(s, "auto") || !*s)
		*m = MODE_AUTO;
	else
		return -EINVAL;
	return 0;
}

/* The shim: LD_PRELOAD (after what is there: an ASan runtime must stay first). */
static int use_shim(const char *dir, const struct uroce_dev_info *devs, unsigned n, int verbose)
{
	char lib[PATH_MAX + 32], tree[PATH_MAX], why[PATH_MAX + 128];
	int err;

	snprintf(lib, sizeof(lib), "%s/%s", dir, UROCE_SHIM_LIB);
	if (access(lib, R_OK)) {
		fprintf(stderr, "error: uroce run: %s: %s\n", lib, strerror(errno));
		return 1;
	}
	err = uroce_run_shim_prepare(devs, n, tree, sizeof(tree), why, sizeof(why));
	if (err) {
		fprintf(stderr, "error: uroce run: %s\n", why);
		return 1;
	}
	if (env_list_add("LD_PRELOAD", lib, 0)) {
		fprintf(stderr, "error: %s\n", strerror(ENOMEM));
		return 1;
	}
	setenv(UROCE_SHIM_DIR_ENV, tree, 1);
	setenv(UROCE_RUN_ENV, "shim", 1);
	if (verbose)
		fprintf(stderr, "uroce run: LD_PRELOAD shim, tree in %s\n", tree);
	return 0;
}

int uroce_cmd_run(int argc, char **argv)
{
	struct uroce_dev_info *devs = NULL;
	enum run_mode mode = MODE_AUTO;
	char dir[PATH_MAX], why[PATH_MAX + 128];
	const char *env = getenv("UROCE_RUN_MODE");
	struct uroce_ipc *ipc;
	unsigned ndevs = 0;
	int i, err, verbose = 0;

	if (env && parse_mode(env, &mode)) {
		fprintf(stderr, "error: UROCE_RUN_MODE=%s: want ns, shim, plain or auto\n", env);
		return 1;
	}
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			return run_help(stdout);
		} else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			verbose = 1;
		} else if (!strncmp(argv[i], "--", 2) && !parse_mode(argv[i] + 2, &mode) && argv[i][2]) {
			;
		} else {
			fprintf(stderr, "error: uroce run: unknown option %s\n", argv[i]);
			run_help(stderr);
			return 1;
		}
	}
	if (i < argc && !strcmp(argv[i], "help") && i == 1)
		return run_help(stdout);
	if (i >= argc) {
		fprintf(stderr, "Please provide a command to run.\n");
		run_help(stderr);
		return 1;
	}
	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	if (err) {
		fprintf(stderr, "error: cannot start uroced: %s\n", strerror(-err));
		return 1;
	}
	if (mode != MODE_PLAIN) {
		err = uroce_ipc_devices(ipc, &devs, &ndevs);
		if (err) {
			fprintf(stderr, "error: uroce run: device list: %s\n", strerror(-err));
			uroce_ipc_close(ipc);
			return 1;
		}
	}
	uroce_ipc_close(ipc);
	err = lib_dir(dir, sizeof(dir));
	if (err) {
		fprintf(stderr, "error: cannot find uroce's library directory: %s\n", strerror(-err));
		free(devs);
		return 1;
	}
	if (env_list_add("LD_LIBRARY_PATH", dir, 1)) {
		fprintf(stderr, "error: %s\n", strerror(ENOMEM));
		free(devs);
		return 1;
	}

	switch (mode) {
	case MODE_PLAIN:
		setenv(UROCE_RUN_ENV, "plain", 1);
		break;
	case MODE_SHIM:
		err = use_shim(dir, devs, ndevs, verbose);
		break;
	case MODE_AUTO:
	case MODE_NS:
		if (uroce_run_ns_active()) {
			/* A `uroce run` inside another: the overlay is there, bring it up to date. */
			err = uroce_run_ns_refresh(devs, ndevs);
			if (verbose)
				fprintf(stderr, "uroce run: the enclosing namespace's overlay%s\n",
					err ? " (could not refresh it)" : ", refreshed");
			err = 0;
			setenv(UROCE_RUN_ENV, "ns", 1);
			break;
		}
		err = uroce_run_ns_enter(devs, ndevs, why, sizeof(why));
		if (!err) {
			setenv(UROCE_RUN_ENV, "ns", 1);
			if (verbose)
				fprintf(stderr, "uroce run: private mount namespace%s\n",
					geteuid() ? " in a user namespace" : "");
		} else if (mode == MODE_NS) {
			fprintf(stderr, "error: uroce run: %s\n", why);
			err = 1;
		} else {
			if (verbose)
				fprintf(stderr, "uroce run: no namespace (%s)\n", why);
			err = use_shim(dir, devs, ndevs, verbose);
		}
		break;
	}
	free(devs);
	if (err)
		return 1;
	execvp(argv[i], argv + i);
	err = errno;
	fprintf(stderr, "error: %s: %s\n", argv[i], strerror(err));
	return err == ENOENT ? 127 : 126;
}
