#!/bin/sh
# nsrun.sh CMD [ARGS...] — run CMD in fresh user, network, pid and mount namespaces
# with lo up, so a test has a uroced of its own: abstract socket names are per
# network namespace, and every process of the pid namespace (the daemon included)
# is killed when CMD exits, even if CMD is killed by the ctest timeout.
# Works as root and, where user namespaces are enabled, unprivileged.  Exit 77
# (ctest SKIP_RETURN_CODE) if namespaces are unavailable.
PATH=$PATH:/usr/sbin:/sbin
export PATH
NS="unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc"
if ! $NS true 2>/dev/null; then
	echo "SKIP: cannot create user/network/pid namespaces here"
	exit 77
fi
# A fresh state directory: saved links are keyed by netns inode, and the kernel
# reuses the inodes of dead namespaces.
UROCE_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/uroce-test.XXXXXX") || exit 1
export UROCE_STATE_DIR
$NS sh -c 'ip link set lo up && exec "$@"' nsrun "$@"
rc=$?
rm -rf "$UROCE_STATE_DIR"
exit $rc
