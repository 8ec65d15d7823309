#!/bin/sh
# run_view.sh UROCE CASE — `uroce run` gives the program the /dev/infiniband and
# /sys/class/infiniband UCX and Open MPI read (src/cli/run.h, docs/ucx-mpi.md), and changes
# nothing else.  Run by tests/daemon/nsrun.sh (own network, pid and mount namespaces, so
# our own uroced); view_check.sh does the checks inside the program's view.
#
#   ns        the private mount namespace as root: the view; /dev and /sys/class list what
#             they listed before (plus infiniband); /dev/shm is the same directory; exit
#             codes pass through; nothing stays mounted or in $TMPDIR afterwards;
#             `uroce run --plain ibv_devinfo -v` prints what `uroce run ibv_devinfo -v`
#             prints; the view check fails under --plain (it can fail)
#   user      as a non-root user (a user namespace mapping us to uid 65534 first): the
#             program keeps uid 65534, the identity uid_map, no capabilities, the view
#   nested    `uroce run` inside `uroce run` refreshes the tree: a device added (and then
#             deleted) while the program runs appears (and goes); `ip netns exec` in the
#             program loses the tree (it remounts /sys) and a `uroce run` after it rebuilds
#             it for the other namespace's devices
#   shim      --shim: LD_PRELOAD=liburoce_shim.so gives the same view; ucx_info -d then
#             lists the device; other paths are untouched
#   fallback  where namespaces are refused (CAP_SYS_ADMIN dropped from the bounding set, as
#             in a container): the default falls back to the shim, --ns fails
set -u
UROCE=$1
CASE=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../daemon/lib.sh"
VIEW="sh $here/view_check.sh $UROCE"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The shim's tree and the staging directories go here, so that nothing outlives the test.
TMPDIR=$tmp
export TMPDIR
"$UROCE" daemon start >/dev/null || { fail "daemon start"; finish; }

case $CASE in
ns)
	ls -A /dev | grep -vx infiniband >"$tmp/dev.out"
	ls -A /sys/class | grep -vx infiniband >"$tmp/class.out"
	mounts=$(wc -l </proc/self/mountinfo)
	had_ib=$([ -e /dev/infiniband ] && echo yes || echo no)
	$UROCE run $VIEW ns || fail "view (ns)"
	"$UROCE" run sh -c 'ls -A /dev' >"$tmp/dev.in"
	"$UROCE" run sh -c 'ls -A /sys/class' >"$tmp/class.in"
	expect_eq "/dev inside minus infiniband" "$(grep -vx infiniband "$tmp/dev.in")" "$(cat "$tmp/dev.out")"
	grep -qx infiniband "$tmp/dev.in" || fail "no /dev/infiniband inside"
	expect_eq "/sys/class inside minus infiniband" "$(grep -vx infiniband "$tmp/class.in")" "$(cat "$tmp/class.out")"
	"$UROCE" run sh -c 'echo shared >/dev/shm/uroce-view.$PPID' && [ "$(cat /dev/shm/uroce-view.$$ 2>/dev/null)" = shared ] ||
		fail "/dev/shm inside is not the same directory"
	rm -f /dev/shm/uroce-view.$$
	"$UROCE" run sh -c 'exit 7'
	expect_eq "exit status" $? 7
	"$UROCE" run /nonexistent/prog 2>/dev/null
	expect_eq "exit status of a missing program" $? 127
	"$UROCE" run ibv_devinfo -v >"$tmp/devinfo.ns" 2>&1
	"$UROCE" run --plain ibv_devinfo -v >"$tmp/devinfo.plain" 2>&1
	cmp -s "$tmp/devinfo.ns" "$tmp/devinfo.plain" || fail "ibv_devinfo -v differs between the view and --plain"
	grep -q 'hca_id:.*uroce0' "$tmp/devinfo.ns" || fail "ibv_devinfo shows no uroce0"
	expect_eq "mounts after the runs" "$(wc -l </proc/self/mountinfo)" "$mounts"
	expect_eq "/dev/infiniband outside" "$([ -e /dev/infiniband ] && echo yes || echo no)" "$had_ib"
	expect_eq "staging directories left" "$(ls "$tmp" | grep -c '^uroce-run\.')" 0
	# The check can fail: without the view it must.
	if $UROCE run --plain $VIEW plain >"$tmp/neg" 2>&1; then
		fail "view check passed without the view"; cat "$tmp/neg"
	else
		echo "negative control: $(grep -c FAIL "$tmp/neg") failed view checks under --plain, as expected"
	fi
	;;
user)
	# unshare: a user namespace where we are 65534, then uroce run as that non-root user.
	U="unshare --user --map-user=65534 --map-group=65534"
	# A chroot (the kernel refuses CLONE_NEWUSER to a chrooted process) or a seccomp
	# profile can refuse user namespaces to everyone: then there is no non-root user to be
	# here and the case cannot run.  It says so and is counted as skipped (exit 77), which
	# run-tests.sh reports as a failure unless UROCE_ALLOW_SKIP=1; a non-root user in such
	# a place gets the shim (the fallback case checks that).
	if ! err=$($U true 2>&1); then
		echo "SKIP: user namespaces are refused here ($err): no non-root user to test with"
		"$UROCE" daemon stop >/dev/null 2>&1
		exit 77
	fi
	out=$($U "$UROCE" run -v sh -c 'echo "id $(id -u) $(id -g)"; echo "map $(cat /proc/self/uid_map)";
		grep CapEff /proc/self/status' 2>&1)
	echo "$out"
	echo "$out" | grep -q 'private mount namespace in a user namespace' || fail "no user namespace taken"
	echo "$out" | grep -q '^id 65534 65534$' || fail "uid/gid changed"
	echo "$out" | grep -Eq '^map +65534 +65534 +1$' || fail "uid map is not the identity"
	echo "$out" | grep -Eq 'CapEff:[[:space:]]+0+$' || fail "the program has capabilities"
	$U "$UROCE" run $VIEW ns || fail "view (user)"
	;;
nested)
	out=$("$UROCE" run sh -c "$UROCE run -v true" 2>&1)
	echo "$out" | grep -q "enclosing namespace's overlay, refreshed" || fail "nested run: $out"
	ip link add d0 type veth peer name d1 && ip link set d1 up && ip link set d0 up || fail "veth d0"
	"$UROCE" run sh -c "
		$UROCE link add uroce5 netdev d0 >/dev/null || exit 3
		i=0; until $UROCE run ibv_devinfo -d uroce5 | grep -q PORT_ACTIVE; do
			i=\$((i + 1)); [ \$i -lt 500 ] || exit 3; sleep 0.02; done
		$UROCE run ls /sys/class/infiniband | grep -qx uroce5 || exit 4
		ls /sys/class/infiniband | grep -qx uroce5 || exit 5
		$UROCE run $VIEW ns || exit 6
		$UROCE link del uroce5 >/dev/null || exit 7
		$UROCE run ls /sys/class/infiniband | grep -qx uroce5 && exit 8
		exit 0"
	expect_eq "device added and deleted while running (3: add, 4/5: not seen, 6: view, 7: del, 8: still seen)" $? 0
	# ip netns exec remounts /sys: the tree is gone behind it, a uroce run rebuilds it.
	netns_veth_setup || finish
	"$UROCE" run sh -c "ip netns exec b sh -c '[ ! -e /sys/class/infiniband/uroce0 ]' || exit 3
		ip netns exec b $UROCE run $VIEW ns || exit 4
		ip netns exec b $UROCE run ls /sys/class/infiniband | grep -qx uroce1 || exit 5"
	expect_eq "uroce run after ip netns exec (3: tree survived, 4: view, 5: b's uroce1)" $? 0
	;;
shim)
	out=$("$UROCE" run --shim -v sh -c 'echo "preload $LD_PRELOAD"; echo "dir $UROCE_SHIM_DIR"' 2>&1)
	echo "$out"
	echo "$out" | grep -q '^preload .*/liburoce_shim.so$' || fail "LD_PRELOAD"
	echo "$out" | grep -q "^dir $tmp/uroce-run-$(id -u)/net-" || fail "UROCE_SHIM_DIR"
	"$UROCE" run --shim $VIEW shim || fail "view (shim)"
	"$UROCE" run --shim ucx_info -d >"$tmp/info" 2>&1
	grep -q 'Memory domain: uroce0' "$tmp/info" && grep -q 'Transport: rc_verbs' "$tmp/info" &&
		grep -q 'Transport: ud_verbs' "$tmp/info" || { fail "ucx_info -d under the shim"; cat "$tmp/info"; }
	expect_eq "other paths under the shim" "$("$UROCE" run --shim sh -c 'ls /sys/class/net; cat /etc/hostname')" \
		"$(ls /sys/class/net; cat /etc/hostname)"
	[ ! -e /dev/infiniband/uverbs0 ] || [ -c /dev/infiniband/uverbs0 ] || fail "shim touched /dev"
	;;
fallback)
	NOADMIN="setpriv --bounding-set=-sys_admin"
	out=$($NOADMIN "$UROCE" run -v $VIEW shim 2>&1)
	rc=$?
	echo "$out"
	expect_eq "view (fallback)" $rc 0
	echo "$out" | grep -q 'uroce run: no namespace (unshare(CLONE_NEWNS): Operation not permitted)' ||
		fail "fallback reason"
	$NOADMIN "$UROCE" run --ns true 2>"$tmp/err"
	expect_eq "--ns where namespaces are refused" $? 1
	grep -q '^error: uroce run: unshare' "$tmp/err" || fail "--ns error: $(cat "$tmp/err")"
	;;
*)
	echo "unknown case $CASE"; exit 2 ;;
esac
finish
