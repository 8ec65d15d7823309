#!/bin/sh
# ud_mcast.sh UROCE UD_MCAST TOPO — UD multicast with plain verbs (ud_mcast.c), run by nsrun.sh.
#   lo:    three receivers on this host (one detaches after the first round), one sender
#   veth:  receivers r1 (two QPs attached), r2 (detaches) in netns a; r3 in netns b with the
#          sender; group 239.1.2.3 (GID ::ffff:239.1.2.3)
#   veth6: the same with the IPv6 group ff0e::1:3 and IPv6 source addresses
#
#      netns a                                 netns b
#   r1 (2 QPs), r2 -- uroced -- va ===== vb -- uroced -- r3, sender
#
# Round 1: every receiver QP gets N; r2 detaches; round 2: r1's and r3's QPs get N more, r2
# nothing.  After round 2 a lone process in netns a is the group's only member there: the
# case Linux used to re-steer to uroced (docs/ud-uc.md).  Also checked: no datagram reached
# a daemon's default socket (rx_default 0), and the AH's hop limit is the TTL / hop limit
# received (GRH area) and, when tshark is installed, the one on the wire.
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
DEV=uroce0
HOPS=1
if [ "$TOPO" != lo ]; then
	# netns a/b joined by veth, uroce1 in each, ports ACTIVE (tests/daemon/lib.sh);
	# veth6 adds 2001:db8::1 / ::2.
	netns_veth_setup $([ "$TOPO" = veth6 ] && echo v6) || exit 1
	A=$NS_A; B=$NS_B
	[ "$TOPO" = veth6 ] && G=ff0e::1:3
	DEV=uroce1
	# Not the kernel's default multicast TTL (1): the AH's hop limit must reach the wire.
	HOPS=5
	# A route for the IPv4 groups (the kernel wants one for a multicast sender, as for rxe).
	ip -n a route add 224.0.0.0/4 dev va; ip -n b route add 224.0.0.0/4 dev vb
	if [ "$TOPO" = veth6 ]; then
		# The sender picks the first global IPv6 GID: wait until b's table lists it.
		gid6() { $B "$UROCE" link show uroce1/1 -d 2>/dev/null | grep -q '2001:db8::2'; }
		wait_for 20 gid6 || die "b's GID table never listed 2001:db8::2"
	fi
else
	# lo has no MULTICAST flag by default; multicast to lo needs it and a route.
	ip link set lo multicast on
	ip route add 224.0.0.0/4 dev lo 2>/dev/null
	A=""; B=""
fi
export UD_MCAST_DEV=$DEV UD_MCAST_HOPS=$HOPS

# The wire, seen from netns a (veth topologies; tshark is required there): one line per
# datagram, printed as it is captured (-l), so no stop-and-flush is needed.
tpid=""
if [ "$TOPO" != lo ]; then
	command -v tshark >/dev/null || die "tshark not found (package tshark; scripts/deps.sh test installs it)"
	if [ "$TOPO" = veth6 ]; then f=ipv6.hlim; d=ipv6.dst; else f=ip.ttl; d=ip.dst; fi
	$A env -u LD_PRELOAD -u ASAN_OPTIONS tshark -l -n -i va -f 'udp dst port 4791' \
		-T fields -e $d -e $f >"$tmp/wire" 2>"$tmp/tshark.log" &
	tpid=$!
	started() { grep -q "Capturing on" "$tmp/tshark.log"; }
	wait_for 30 started || { cat "$tmp/tshark.log"; die "tshark did not start"; }
	# tshark says "Capturing on" a moment before its filter sees packets: send single
	# datagrams (nobody has joined yet) until one shows up, then the rounds are all seen.
	warm() {
		$B "$UROCE" run "$PROG" send $G 1 >/dev/null 2>&1
		[ -s "$tmp/wire" ]
	}
	wait_for 30 warm || { cat "$tmp/tshark.log"; die "tshark never saw a datagram"; }
	warmup=$(wc -l <"$tmp/wire")
fi

UD_MCAST_QPS=2 $A timeout 60 "$UROCE" run "$PROG" recv $G $N >"$tmp/r1" 2>&1 & p1=$!
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
[ $s1 -eq 0 ] || fail "r1 exit $s1"
[ $s2 -eq 0 ] || fail "r2 (detached) exit $s2"
[ $s3 -eq 0 ] || fail "r3 exit $s3"
expect_eq "r1 datagrams per QP" "$(grep GOT "$tmp/r1" | tr '\n' ' ')" "GOT $((2 * N)) GOT $((2 * N)) "
for r in r1 r2 r3; do
	expect_eq "$r: hop limit received" "$(sed -n 's/^HOPS //p' "$tmp/$r")" "$HOPS"
done

# Nothing for the group went to a daemon's default member (QPN 0xFFFFFF is steered there
# when the kernel consults the reuseport program).
rx_default() { $1 "$UROCE" stat show link "$DEV/1" | sed -n 's/.* rx_default \([0-9]*\).*/\1/p'; }
expect_eq "rx_default in ${A:-this host}" "$(rx_default "$A")" 0
[ "$TOPO" = lo ] || expect_eq "rx_default in b" "$(rx_default "$B")" 0

if [ -n "$tpid" ]; then
	# Every datagram of the two rounds must appear, each with the AH's hop limit.
	seen() { [ $(wc -l <"$tmp/wire") -ge $((warmup + 2 * N)) ]; }
	wait_for 20 seen || fail "tshark saw $(($(wc -l <"$tmp/wire") - warmup)) of $((2 * N)) datagrams"
	kill $tpid; wait $tpid
	echo "on the wire (count group hop-limit):"; sort "$tmp/wire" | uniq -c
	awk -v g=$G -v h=$HOPS '$1 != g || $2 != h { bad = 1 } END { exit bad }' "$tmp/wire" ||
		fail "a datagram left with another destination or hop limit than $G, $HOPS"
fi
[ $fails -eq 0 ] || exit 1
echo PASS
