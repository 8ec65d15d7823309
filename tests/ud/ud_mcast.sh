#!/bin/sh
# ud_mcast.sh UROCE UD_MCAST TOPO — UD multicast with plain verbs (ud_mcast.c), run by nsrun.sh.
#   lo:   three receivers on this host (one detaches after the first round), one sender
#   veth: receivers r1, r2 (detaches) in netns a, r3 in netns b with the sender
# Round 1: every receiver gets N; r2 detaches; round 2: r1 and r3 get N more, r2 nothing.
set -u
UROCE=$1
PROG=$2
TOPO=$3
N=20
G=239.1.2.3
. "$(dirname "$0")/../daemon/lib.sh"
# lib.sh's fail() only counts; die() stops the test where going on makes no sense.
die() { fail "$@"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UD_MCAST_STOP=$tmp/stop
export UROCE_RC_STATS=1
if [ "$TOPO" = veth ]; then
	mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
	ip netns add a && ip netns add b || { echo "SKIP: no netns"; exit 77; }
	ip link add va netns a type veth peer name vb netns b || { echo "SKIP: no veth"; exit 77; }
	ip -n a link set lo up; ip -n b link set lo up
	ip -n a addr add 192.0.2.1/24 dev va; ip -n b addr add 192.0.2.2/24 dev vb
	ip -n a link set va up; ip -n b link set vb up
	A="ip netns exec a"; B="ip netns exec b"
	export UD_MCAST_DEV=uroce1
	# A route for the groups (the kernel wants one for a multicast sender, as for rxe).
	ip -n a route add 224.0.0.0/4 dev va; ip -n b route add 224.0.0.0/4 dev vb
	$A "$UROCE" link add uroce1 netdev va >/dev/null || die "link add in a"
	$B "$UROCE" link add uroce1 netdev vb >/dev/null || die "link add in b"
	active() { $1 "$UROCE" run ibv_devinfo -d uroce1 2>/dev/null | grep -q PORT_ACTIVE; }
	wait_for 20 active "$A" || die "a's port never became active"
	wait_for 20 active "$B" || die "b's port never became active"
else
	# lo has no MULTICAST flag by default; multicast to lo needs it and a route.
	ip link set lo multicast on
	ip route add 224.0.0.0/4 dev lo 2>/dev/null
	A=""; B=""
fi
$A timeout 60 "$UROCE" run "$PROG" recv $G $N >"$tmp/r1" 2>&1 & p1=$!
$A timeout 60 "$UROCE" run "$PROG" recv $G $N detach >"$tmp/r2" 2>&1 & p2=$!
$B timeout 60 "$UROCE" run "$PROG" recv $G $N >"$tmp/r3" 2>&1 & p3=$!
ready() { grep -q READY "$tmp/r1" && grep -q READY "$tmp/r2" && grep -q READY "$tmp/r3"; }
wait_for 20 ready || { cat "$tmp"/r*; die "receivers not ready"; }
$B timeout 60 "$UROCE" run "$PROG" send $G $N || die "sender 1"
detached() { grep -q DETACHED "$tmp/r2"; }
wait_for 20 detached || { cat "$tmp"/r*; die "r2 did not get round 1"; }
$B timeout 60 "$UROCE" run "$PROG" send $G $N || die "sender 2"
wait $p1; s1=$?
wait $p3; s3=$?
touch "$UD_MCAST_STOP"
wait $p2; s2=$?
for r in r1 r2 r3; do echo "-- $r"; cat "$tmp/$r"; done
[ $s1 -eq 0 ] || die "r1 exit $s1"
[ $s2 -eq 0 ] || die "r2 (detached) exit $s2"
[ $s3 -eq 0 ] || die "r3 exit $s3"
[ $fails -eq 0 ] || exit 1
echo PASS
