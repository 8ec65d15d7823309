#!/bin/sh
# netns.sh UROCE IPC_TEST — one daemon per network namespace.  Run by nsrun.sh,
# which gives us private user/net/pid/mount namespaces; inside, two more network
# namespaces play two hosts joined by a veth pair:
#
#   [netns a: lo, va 192.0.2.1] <--veth--> [netns b: lo, vb 192.0.2.2]
#
# Checks: each namespace autostarts its own uroced (distinct pids, each reporting
# its own namespace), QPN spaces are independent (a QPN held in a is free in b),
# links and GIDs are per namespace.
set -u
UROCE=$1
IPC_TEST=$2
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ip netns keeps its names under /run/netns: a private tmpfs (our own mount
# namespace) makes that work unprivileged and leaves the host's /run alone.
mount -t tmpfs tmpfs /run || { echo "cannot mount /run"; exit 1; }
ip netns add a && ip netns add b || { echo "cannot create namespaces"; exit 1; }
ip link add va netns a type veth peer name vb netns b || { echo "no veth"; exit 1; }
ip -n a link set lo up; ip -n b link set lo up
ip -n a addr add 192.0.2.1/24 dev va; ip -n b addr add 192.0.2.2/24 dev vb
ip -n a link set va up; ip -n b link set vb up

A="ip netns exec a"
B="ip netns exec b"

# Two daemons, each serving its own namespace.
$A $UROCE daemon start >/dev/null || fail "start in a"
$B $UROCE daemon start >/dev/null || fail "start in b"
pa=$($A $UROCE daemon status | field pid)
pb=$($B $UROCE daemon status | field pid)
[ -n "$pa" ] && [ -n "$pb" ] && [ "$pa" != "$pb" ] || fail "two daemons ($pa, $pb)"
ns_a=$($A readlink /proc/self/ns/net | tr -dc 0-9)
ns_b=$($B readlink /proc/self/ns/net | tr -dc 0-9)
expect_eq "daemon a serves a" "$($A $UROCE daemon status | field netns)" "$ns_a"
expect_eq "daemon b serves b" "$($B $UROCE daemon status | field netns)" "$ns_b"
expect_eq "our own namespace has none" "$($UROCE daemon status 2>&1)" "uroced is not running"

# Links and GIDs per namespace.
$A $UROCE link add uroce1 netdev va || fail "link add in a"
$B $UROCE link add uroce1 netdev vb || fail "link add in b"
$A $UROCE link show uroce1 -d | grep -q '::ffff:192.0.2.1' || fail "a's GID"
$B $UROCE link show uroce1 -d | grep -q '::ffff:192.0.2.2' || fail "b's GID"
$B $UROCE link show uroce1 -d | grep -q '::ffff:192.0.2.1' && fail "a's address in b's table"
# Saved per namespace, under its ip-netns name.
grep -qx 'link uroce1 netdev va' "$UROCE_STATE_DIR/netns-name-a.links" || fail "a's state file"
grep -qx 'link uroce1 netdev vb' "$UROCE_STATE_DIR/netns-name-b.links" || fail "b's state file"
$A $UROCE link del uroce1 || fail "link del in a"
$B $UROCE link show uroce1 >/dev/null || fail "b's link survives a's del"

# Independent QPN spaces: a QPN held in a is unknown in b.
mkfifo "$tmp/hold"
$A $IPC_TEST holder uroce0 <"$tmp/hold" >"$tmp/qpn" &
exec 3>"$tmp/hold"
wait_for 10 test -s "$tmp/qpn" || fail "holder got no QPN"
q=$(cat "$tmp/qpn")
owner=$($A $IPC_TEST owner uroce0 "$q")
[ "$owner" != free ] || fail "QPN $q held in a shows free in a"
expect_eq "QPN $q in b" "$($B $IPC_TEST owner uroce0 "$q")" free
exec 3>&-
wait
wait_for 10 sh -c "[ \"\$($A $IPC_TEST owner uroce0 $q)\" = free ]" || fail "QPN $q back after exit"

$A $UROCE daemon stop || fail "stop a"
$B $UROCE daemon status >/dev/null || fail "b's daemon still runs after a's stop"
$B $UROCE daemon stop || fail "stop b"
finish
