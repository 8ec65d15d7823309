#!/bin/sh
# nsrun.sh CMD [ARGS...] — run CMD in fresh network, pid and mount namespaces with lo
# up, so a test has a uroced of its own: abstract socket names are per network
# namespace, and every process of the pid namespace (the daemon included) is killed
# when CMD exits, even if CMD is killed by the ctest timeout.
#
# As root the namespaces need no user namespace, which matters inside a chroot or a
# container (the kernel refuses CLONE_NEWUSER to a chrooted process, Docker's default
# seccomp profile refuses it too).  Unprivileged, a user namespace mapping the caller
# to root comes first.  Exit 77 (ctest SKIP_RETURN_CODE) with the reason if the
# namespaces cannot be made: ctest then reports the test as skipped, and
# ./run-tests.sh fails because of it unless UROCE_ALLOW_SKIP=1.
PATH=$PATH:/usr/sbin:/sbin
export PATH
if [ "$(id -u)" -eq 0 ]; then
	NS="unshare --net --pid --fork --kill-child --mount-proc"
else
	NS="unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc"
fi
if ! err=$($NS true 2>&1); then
	echo "SKIP: cannot create the test's namespaces here ($NS: $err)"
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
