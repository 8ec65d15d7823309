#!/bin/sh
# view_check.sh UROCE MODE — run inside `uroce run`: the view UCX and Open MPI need
# (src/cli/run.h).  Exits with the number of failed checks (0 = the view is right).
#   MODE      what $UROCE_RUN must say (ns, shim)
# Checks: /dev/infiniband/uverbs0..15 are character devices this process may read and
# write (UCX: uct_ib_device_is_accessible); /dev/null still works; /sys/class/infiniband
# lists exactly the devices `uroce link show` lists, each with node_type, link_layer,
# state, device/driver -> .../uroce (Open MPI's opal_common_ucx_devices), and for every
# GID `uroce link show -d` lists: gids/<i> (the same address), gid_attrs/types/<i>
# "RoCE v2" (UCX's RoCE version) and gid_attrs/ndevs/<i> (the netdev); no types/<i> for
# an empty index.
UROCE=$1
MODE=$2
bad=0
no() { echo "FAIL(view): $*"; bad=$((bad + 1)); }

[ "${UROCE_RUN:-}" = "$MODE" ] || no "UROCE_RUN=${UROCE_RUN:-} want $MODE"
i=0
while [ $i -lt 16 ]; do
	n=/dev/infiniband/uverbs$i
	{ [ -c $n ] && [ -r $n ] && [ -w $n ]; } || no "$n is not a readable, writable character device"
	i=$((i + 1))
done
{ [ -c /dev/null ] && echo x >/dev/null; } || no "/dev/null"

devs=$("$UROCE" link show | awk '$1 == "link" { sub("/.*", "", $2); print $2 }' | sort)
[ -n "$devs" ] || no "uroce link show lists no device"
have=$(ls /sys/class/infiniband 2>/dev/null | sort)
[ "$have" = "$devs" ] || no "/sys/class/infiniband lists [$have], uroce has [$devs]"
for dev in $devs; do
	d=/sys/class/infiniband/$dev
	[ "$(cat $d/node_type 2>/dev/null)" = "1: CA" ] || no "$d/node_type"
	[ "$(cat $d/ports/1/link_layer 2>/dev/null)" = "Ethernet" ] || no "$d/ports/1/link_layer"
	[ "$(cat $d/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] || no "$d/ports/1/state: $(cat $d/ports/1/state 2>&1)"
	drv=$(readlink $d/device/driver 2>/dev/null)
	[ "$(basename "${drv:-none}")" = uroce ] || no "$d/device/driver -> [$drv]"
	netdev=$("$UROCE" link show "$dev" | awk '{ for (i = 1; i < NF; i++) if ($i == "netdev") print $(i + 1) }')
	"$UROCE" link show "$dev" -d | awk '$1 == "gid" { print $2, $3 }' >"${TMPDIR:-/tmp}/vc.$$"
	[ -s "${TMPDIR:-/tmp}/vc.$$" ] || no "$dev has no GID"
	while read -r idx addr; do
		[ "$(cat $d/ports/1/gid_attrs/types/$idx 2>/dev/null)" = "RoCE v2" ] ||
			no "$d types/$idx: [$(cat $d/ports/1/gid_attrs/types/$idx 2>&1)]"
		[ "$(cat $d/ports/1/gid_attrs/ndevs/$idx 2>/dev/null)" = "$netdev" ] ||
			no "$d ndevs/$idx: [$(cat $d/ports/1/gid_attrs/ndevs/$idx 2>&1)] want $netdev"
		same=$(/usr/bin/python3 -c 'import ipaddress, sys
g = open(sys.argv[1]).read().strip().replace(":", "")
print(ipaddress.IPv6Address(bytes.fromhex(g)) == ipaddress.IPv6Address(sys.argv[2]))' \
			$d/ports/1/gids/$idx "$addr" 2>&1)
		[ "$same" = True ] || no "$d gids/$idx is not $addr ($same)"
	done <"${TMPDIR:-/tmp}/vc.$$"
	rm -f "${TMPDIR:-/tmp}/vc.$$"
	[ ! -e $d/ports/1/gid_attrs/types/31 ] || no "$d types/31 exists for an empty index"
done
[ $bad -eq 0 ] && echo "view ok ($MODE): $(echo $devs)"
exit $bad
