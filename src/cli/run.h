/* run.h — the parts of `uroce run` (cmd_run.c): what UCX, Open MPI and hwloc read outside
 * the verbs API, made true for the program (docs/ucx-mpi.md).
 *
 * UCX 1.13 uses a verbs device only if /dev/infiniband/<dev_name> is a character device it
 * may read and write, and takes each GID's RoCE version from
 * /sys/class/infiniband/<dev>/ports/1/gid_attrs/types/<i>; Open MPI matches the basename of
 * the link /sys/class/infiniband/<dev>/device/driver.  uroce has neither a kernel device
 * nor sysfs, so `uroce run` gives the program a view where both exist:
 *
 *   ns    a private mount namespace (and, when not root, a user namespace that maps the
 *         caller's uid and gid to themselves) where /dev is a copy of the real one plus
 *         infiniband/uverbs0..15 (each /dev/null bound onto it) and /sys/class a copy of
 *         the real one whose infiniband/ is a tree uroce writes (run_tree.c);
 *   shim  where namespaces are refused: LD_PRELOAD=liburoce_shim.so (src/abi/shim), which
 *         rewrites those paths in stat/access/open/readlink/... to a tree on disk.
 */
#ifndef UROCE_CLI_RUN_H
#define UROCE_CLI_RUN_H

#include <stddef.h>

#include "ipc/ipc.h"

/* /dev/infiniband/uverbs0 .. uverbs(N-1) exist in the namespace: the library names its
 * devices uverbs<index in the process's device table>, and spare entries cover devices
 * added while the program runs. */
#define UROCE_RUN_UVERBS 16

/* The program's environment says which view it has: UROCE_RUN=ns|shim|plain. */
#define UROCE_RUN_ENV "UROCE_RUN"
/* Shim mode: the directory the shim maps /sys/class/infiniband and /dev/infiniband to
 * (<dir>/infiniband, <dir>/dev). */
#define UROCE_SHIM_DIR_ENV "UROCE_SHIM_DIR"
#define UROCE_SHIM_LIB "liburoce_shim.so"

/* Write the infiniband/ tree for @devs into the directory @dirfd: per device <name>/
 * node_type, node_guid, sys_image_guid, device/driver (a link whose basename is "uroce"),
 * ports/1/{state,phys_state,link_layer,gids/<i>,gid_attrs/types/<i>,gid_attrs/ndevs/<i>}
 * (types and ndevs for the valid GIDs only, as in the kernel's sysfs).  Each file is
 * written under a temporary name and renamed, so concurrent readers (MPI ranks started
 * together) see old or new contents, never a torn file.  Device directories not in @devs
 * are removed.  0 or -errno. */
int uroce_run_tree_write(int dirfd, const struct uroce_dev_info *devs, unsigned n);

/* Enter a private mount namespace (user namespace too when not root) whose /dev and
 * /sys/class have the overlay described above; the caller then execs.  0 on success.
 * On failure (the kernel refused the namespaces or the mounts: a chroot, a container's
 * seccomp profile, user.max_user_namespaces=0, AppArmor's userns restriction) -errno
 * with a reason in @why, and nothing is left mounted: the caller's view of the file
 * system is unchanged (it may be in new namespaces), so it may use the shim instead. */
int uroce_run_ns_enter(const struct uroce_dev_info *devs, unsigned n, char *why, size_t whylen);

/* The overlay of an enclosing `uroce run` is in place in this mount namespace
 * (/sys/class/infiniband is on a tmpfs and /dev/infiniband/uverbs0 is a character
 * device).  `ip netns exec` remounts /sys, so a program run through it loses the tree and
 * must set it up again. */
int uroce_run_ns_active(void);

/* Refresh the tree of an active overlay for @devs (a nested `uroce run`). 0 or -errno. */
int uroce_run_ns_refresh(const struct uroce_dev_info *devs, unsigned n);

/* Shim mode: (re)write the tree for @devs under the per-user, per-network-namespace
 * directory ${TMPDIR:-/tmp}/uroce-run-<uid>/net-<inode> and put its path in @dir.
 * The per-user directory must be the caller's own (mode 0700, not a link).  0 or -errno
 * with a reason in @why. */
int uroce_run_shim_prepare(const struct uroce_dev_info *devs, unsigned n, char *dir, size_t dirlen,
			   char *why, size_t whylen);

#endif
