#!/bin/sh
# fresh-root.sh [DIR] — the README's two commands on a fresh Debian 12 machine.
#
# Makes a minimal Debian 12 root with debootstrap in DIR (default
# /var/tmp/uroce-fresh-root, emptied first), clones this repository's committed HEAD into
# it, and runs ./run-demo.sh and then ./run-tests.sh there, as root, with /proc, /sys and
# /dev mounted and a clean environment: nothing installed but what debootstrap's minbase
# has, so a package the project forgets to install, or a test that depends on this
# machine's own setup (a hand-installed tool), fails here even where CI's host has it.
#
# The root is entered as a machine or a container runtime has it: the root of a mount
# namespace of its own (pivot_root), where user namespaces are allowed as on a fresh
# Debian 12.  Then a chroot check: in a chroot the kernel refuses user namespaces (as
# Docker's seccomp profile does) and tests/daemon/nsrun.sh must not need one as root
# (bug 3 of #17): a sample of the namespace tests runs there and must pass.
#
# Needs root and debootstrap (scripts/deps.sh ci).  Environment:
#   FRESH_MIRROR      Debian mirror (default http://deb.debian.org/debian)
#   FRESH_CMAKE_ARGS  CMAKE_ARGS for the test command (.ci/run: -DUROCE_WERROR=ON)
#   FRESH_KEEP=1      leave DIR in place afterwards (its mounts are always undone)
# Exit 0 when both commands succeeded, else the first failure's status.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/var/tmp/uroce-fresh-root}
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "fresh-root: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-root: needs debootstrap (scripts/deps.sh ci)" >&2; exit 2; }
case $dir in /|"") echo "fresh-root: refusing DIR '$dir'" >&2; exit 2 ;; esac

undo_mounts() {
	# Deepest first; the root's own bind mount last.
	if [ -d "$dir" ]; then
		awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts |
			sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
	fi
}
cleanup() {
	undo_mounts
	[ "${FRESH_KEEP:-0}" = 1 ] || rm -rf "$dir"
}
undo_mounts
rm -rf "$dir"
mkdir -p "$dir"
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
echo "== fresh-root: debootstrap --variant=minbase bookworm $dir $mirror"
# A mirror hiccup should not fail CI: one retry.
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 ||
	{ sleep 10; rm -rf "$dir"; mkdir -p "$dir"; debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1; } ||
	{ tail -20 "$dir.debootstrap.log"; echo "fresh-root: debootstrap failed" >&2; exit 1; }
rm -f "$dir.debootstrap.log"
# The suites a Debian 12 installation has: the release, its updates and security.
cat >"$dir/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$dir/etc/resolv.conf"
echo "== fresh-root: Debian $(cat "$dir/etc/debian_version") in $(( $(date +%s) - t0 )) s"

# The repository as a user gets it: a clone (the committed HEAD, nothing else).
git clone --quiet --no-hardlinks "$src" "$dir/root/uroce"
echo "== fresh-root: cloned $(git -C "$dir/root/uroce" log -1 --format='%h %s')"

# A mount point of its own (unshare --mount makes / private, which needs a mount), then
# the kernel's file systems; rslave so that nothing unmounted in here leaves the host.
mount --bind "$dir" "$dir"
mount -t proc proc "$dir/proc"
mount --rbind /sys "$dir/sys" && mount --make-rslave "$dir/sys"
mount --rbind /dev "$dir/dev" && mount --make-rslave "$dir/dev"
mount -t tmpfs tmpfs "$dir/tmp"
mount -t tmpfs tmpfs "$dir/run"

clean_env="/usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	CMAKE_ARGS=${FRESH_CMAKE_ARGS:-}"
# in_root CMD: CMD in the root as its own mount namespace's root (pivot_root; the host's
# tree detached), so the kernel sees no chroot.
in_root() {
	# shellcheck disable=SC2016
	unshare --mount --fork /bin/sh -c '
		set -e
		cd "$1"
		mkdir -p .host-root
		pivot_root . .host-root
		cd /
		umount -l /.host-root
		rmdir /.host-root
		shift
		exec $0 /bin/sh -c "cd /root/uroce && $1"' "$clean_env" "$dir" "$1"
}
# in_chroot CMD: CMD in a plain chroot of the same root.
in_chroot() {
	# shellcheck disable=SC2086
	chroot "$dir" $clean_env /bin/sh -c "cd /root/uroce && $1"
}
rc=0
t1=$(date +%s)
echo "== fresh-root: ./run-demo.sh"
in_root ./run-demo.sh || rc=$?
echo "== fresh-root: ./run-demo.sh exited $rc after $(( $(date +%s) - t1 )) s"
if [ $rc -eq 0 ]; then
	t1=$(date +%s)
	echo "== fresh-root: ./run-tests.sh"
	in_root ./run-tests.sh || rc=$?
	echo "== fresh-root: ./run-tests.sh exited $rc after $(( $(date +%s) - t1 )) s"
fi
if [ $rc -eq 0 ]; then
	# The chroot check: user namespaces refused (else the check proves nothing), and the
	# tests that run in namespaces of their own still pass (nsrun.sh takes none as root).
	echo "== fresh-root: in a chroot"
	if in_chroot 'unshare --user true' 2>/dev/null; then
		echo "fresh-root: a chroot here allows user namespaces: the chroot check cannot hold"
		rc=1
	else
		sample='^(daemon_netns|daemon_link_veth|transport_shm_ops|verbs_attrs|cm_apps_lo_rping|ucx_run_ns)$'
		n=$(in_chroot "ctest --test-dir build -N -R '$sample'" | sed -n 's/^Total Tests: //p')
		[ "$n" = 6 ] || { echo "fresh-root: the chroot sample is $n tests, not 6"; rc=1; }
		in_chroot "ctest --test-dir build --output-on-failure -R '$sample'" || rc=$?
	fi
	echo "== fresh-root: chroot check status $rc"
fi
echo "== fresh-root: done in $(( $(date +%s) - t0 )) s, status $rc"
exit $rc
