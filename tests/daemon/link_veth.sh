#!/bin/sh
# link_veth.sh UROCE IPC_TEST — `uroce link add/del` on a veth, run by nsrun.sh in
# a namespace of its own.
#
#   [ns: lo, va <-veth-> vb]   uroce1 on va
#
# Checks: the GID table equals the netdev's addresses (IPv4 mapped, IPv6 as is)
# and follows additions and removals; the MTU follows the netdev; the port goes
# DOWN without carrier; links survive a daemon restart; errors for duplicates
# and unknown names.  192.0.2.0/24 and 2001:db8::/32 are documentation ranges,
# used only inside this namespace.
set -u
UROCE=$1
IPC_TEST=$2
. "$(dirname "$0")/lib.sh"

ip link add va type veth peer name vb || { echo "cannot create veth"; exit 1; }
# A known MAC: the node GUID is its modified EUI-64 (50:54:00:ff:fe:12:34:56), as rxe's.
ip link set va address 52:54:00:12:34:56
ip addr add 192.0.2.1/24 dev va
ip -6 addr add 2001:db8::1/64 dev va nodad
ip link set va up
ip link set vb up
# Carrier on a veth comes asynchronously (linkwatch); so does its link-local.
wait_for 10 sh -c 'ip link show va | grep -q LOWER_UP' || fail "va has no carrier"
wait_for 10 sh -c 'ip -6 addr show dev va scope link | grep -q fe80' || fail "va has no link-local"

$UROCE link add uroce1 type uroce netdev va || fail "link add"
out=$($UROCE link show uroce1)
expect_eq "show" "$out" "link uroce1/1 state ACTIVE physical_state LINK_UP netdev va"
expect_eq "GIDs = addresses" "$(uroce_gids uroce1)" "$(kernel_gids va)"
uroce_gids uroce1 | grep -qx '::ffff:192.0.2.1' || fail "IPv4-mapped GID missing"
uroce_gids uroce1 | grep -qx '2001:db8::1' || fail "IPv6 GID missing"
uroce_gids uroce1 | grep -q '^fe80::' || fail "link-local GID missing"
expect_eq "IPv4 first" "$($UROCE link show uroce1 -d | awk '$1 == "gid" && $2 == 0 { print $3 }')" \
	"::ffff:192.0.2.1"
# (/sys still shows the parent namespace's netdevs: ask ip.)
expect_eq "mac" "$($UROCE link show uroce1 -d | field mac)" "$(ip -o link show va | field link/ether)"
expect_eq "mtu" "$($UROCE link show uroce1 -d | field mtu)" "$(ip -o link show va | field mtu)"
# The node GUID reads the same everywhere, in the order Linux prints it (ibv_devinfo
# prints be64toh of ibv_device_attr.node_guid; /sys/class/infiniband/*/node_guid).
expect_eq "node_guid (link show)" "$($UROCE link show uroce1 -d | field node_guid)" "5054:00ff:fe12:3456"
expect_eq "node_guid (ibv_devinfo)" \
	"$($UROCE run ibv_devinfo -d uroce1 | awk '$1 == "node_guid:" { print $2 }')" "5054:00ff:fe12:3456"
expect_eq "node_guid (sysfs under uroce run)" \
	"$($UROCE run cat /sys/class/infiniband/uroce1/node_guid)" "5054:00ff:fe12:3456"

# Changes on the netdev show up in the next query.
ip addr add 192.0.2.7/24 dev va
ip -6 addr del 2001:db8::1/64 dev va
ip link set va mtu 4200
expect_eq "GIDs after change" "$(uroce_gids uroce1)" "$(kernel_gids va)"
uroce_gids uroce1 | grep -qx '::ffff:192.0.2.7' || fail "added address has no GID"
uroce_gids uroce1 | grep -qx '2001:db8::1' && fail "removed address still a GID"
expect_eq "GID 0 kept its index" "$($UROCE link show uroce1 -d | awk '$1 == "gid" && $2 == 0 { print $3 }')" \
	"::ffff:192.0.2.1"
expect_eq "mtu follows" "$($UROCE link show uroce1 -d | field mtu)" 4200

# No carrier: the port is down.
ip link set vb down
wait_for 10 sh -c "! ip link show va | grep -q LOWER_UP" || fail "va kept carrier"
expect_eq "down" "$($UROCE link show uroce1)" \
	"link uroce1/1 state DOWN physical_state DISABLED netdev va"
ip link set vb up
wait_for 10 sh -c 'ip link show va | grep -q LOWER_UP' || fail "carrier back"
wait_for 10 sh -c "$UROCE link show uroce1 | grep -q ACTIVE" || fail "port up again"

# Errors.
$UROCE link add uroce1 netdev vb 2>/dev/null && fail "duplicate name accepted"
$UROCE link add uroce2 netdev va 2>/dev/null && fail "second link on va accepted"
$UROCE link add uroce2 netdev nosuch0 2>/dev/null && fail "missing netdev accepted"
expect_eq "del unknown" "$($UROCE link del nosuch 2>&1)" "Wrong device name"

# Restart: the links come back, with GIDs read afresh.
pid1=$($UROCE daemon status | field pid)
$UROCE daemon stop || fail "stop"
$UROCE daemon status >/dev/null && fail "status after stop says running"
$UROCE daemon start >/dev/null || fail "start"
pid2=$($UROCE daemon status | field pid)
[ -n "$pid2" ] && [ "$pid1" != "$pid2" ] || fail "a new daemon ($pid1 -> $pid2)"
expect_eq "links after restart" "$($UROCE link show | awk '{ print $2, $NF }')" \
	"uroce0/1 lo
uroce1/1 va"
expect_eq "GIDs after restart" "$(uroce_gids uroce1)" "$(kernel_gids va)"

# Delete persists as well.
$UROCE link del uroce1 || fail "link del"
$UROCE daemon stop
expect_eq "links after del + restart" "$($UROCE link show | awk '{ print $2 }')" "uroce0/1"

finish
