#!/bin/sh
# cm_veth.sh UROCE CM_DAEMON — the connection manager between two hosts: two network
# namespaces joined by a veth, each with its own uroced and a uroce device on its
# end, IPv4 and IPv6.  Run by nsrun.sh.
#
#   [netns a: va 192.0.2.1 2001:db8::1] <--veth--> [netns b: vb 192.0.2.2 2001:db8::2]
#
# Checks: a connection (REQ/REP/RTU, DREQ/DREP) across the veth in each family, with the
# daemons' CM counters showing the MADs on both sides; a port nobody listens on gives
# REJECTED 8; an address with no host gives no REJ (the REQ goes unanswered: checked
# only as "no REJ", the 98 s timeout is the unit tests').
set -u
UROCE=$1
CMD=$2
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mount -t tmpfs tmpfs /run || { echo "cannot mount /run"; exit 1; }
ip netns add a && ip netns add b || { echo "cannot create namespaces"; exit 1; }
ip link add va netns a type veth peer name vb netns b || { echo "no veth"; exit 1; }
ip -n a link set lo up; ip -n b link set lo up
ip -n a addr add 192.0.2.1/24 dev va; ip -n b addr add 192.0.2.2/24 dev vb
ip -n a -6 addr add 2001:db8::1/64 dev va nodad; ip -n b -6 addr add 2001:db8::2/64 dev vb nodad
ip -n a link set va up; ip -n b link set vb up
A="ip netns exec a"
B="ip netns exec b"
wait_for 10 sh -c "$A ip link show va | grep -q LOWER_UP" || fail "no carrier"
wait_for 10 sh -c "$B ip link show vb | grep -q LOWER_UP" || fail "no carrier on vb"
$A $UROCE link add uroce1 netdev va || fail "link add in a"
$B $UROCE link add uroce1 netdev vb || fail "link add in b"

pair() {  # pair ADDR PORT
	$B timeout 30 $CMD serve "$1" "$2" >"$tmp/srv" 2>&1 &
	spid=$!
	wait_for 10 grep -q listening "$tmp/srv" || fail "server on $1 never listened: $(cat "$tmp/srv")"
	out=$($A timeout 30 $CMD dial "$1" "$2" 2>&1)
	wait $spid
	expect_eq "dial $1" "$(echo "$out" | grep -v passed)" "dialed"
	grep -q served "$tmp/srv" || fail "server on $1: $(cat "$tmp/srv")"
}

pair 192.0.2.2 7471
pair 2001:db8::2 7472
expect_eq "no listener" "$($A timeout 30 $CMD dial 192.0.2.2 7999 2>&1 | head -1)" "rejected 8"
# What crossed the veth, in each daemon's counters.
$A $UROCE stat show cm >"$tmp/a"
$B $UROCE stat show cm >"$tmp/b"
grep -q '^cm sent REQ 3 MRA 0 REJ 0 REP 0 RTU 2 DREQ 2 DREP 0 ' "$tmp/a" || fail "a sent: $(cat "$tmp/a")"
grep -q '^cm rcvd REQ 0 MRA 0 REJ 1 REP 2 RTU 0 DREQ 0 DREP 2 ' "$tmp/a" || fail "a rcvd: $(cat "$tmp/a")"
grep -q '^cm sent REQ 0 MRA 0 REJ 1 REP 2 RTU 0 DREQ 0 DREP 2 ' "$tmp/b" || fail "b sent: $(cat "$tmp/b")"
grep -q '^cm rej_sent 8 1$' "$tmp/b" || fail "b's REJ 8: $(cat "$tmp/b")"
grep -q '^cm drops 0$' "$tmp/a" || fail "a dropped: $(cat "$tmp/a")"
grep -q '^cm drops 0$' "$tmp/b" || fail "b dropped: $(cat "$tmp/b")"
[ -n "${CM_VETH_SHOW:-}" ] && cat "$tmp/a"
[ "$fails" -eq 0 ] && echo "cm_veth: all passed"
exit $((fails != 0))
