#!/bin/sh
# veth.sh UROCE TEST_NETIO — netio between two hosts: network namespaces a and b joined by
# a veth pair, each with its own uroced and a device uroce1 on its end.  Run by nsrun.sh
# (private user/net/pid/mount namespaces).  Exit 77 when veth or namespaces are missing.
#
#   [a: va 192.0.2.1, 2001:db8::1, fe80::..] <--veth--> [b: vb 192.0.2.2, 2001:db8::2, fe80::..]
set -u
UROCE=$1
TEST=$2
mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
ip netns add a && ip netns add b || { echo "SKIP: cannot create namespaces"; exit 77; }
ip link add va netns a type veth peer name vb netns b || { echo "SKIP: no veth"; exit 77; }
ip -n a link set lo up; ip -n b link set lo up
ip -n a addr add 192.0.2.1/24 dev va; ip -n b addr add 192.0.2.2/24 dev vb
ip -n a addr add 2001:db8::1/64 dev va nodad; ip -n b addr add 2001:db8::2/64 dev vb nodad
# No duplicate address detection: the link-local GIDs are usable as soon as the link is up.
ip netns exec a sysctl -qw net.ipv6.conf.va.accept_dad=0
ip netns exec b sysctl -qw net.ipv6.conf.vb.accept_dad=0
ip -n a link set va up; ip -n b link set vb up
# The link-local addresses appear shortly after the carrier (addrconf work): wait, bounded.
ll_ready() {
	ip -n a -6 addr show dev va scope link | grep -q 'inet6 fe80' &&
	ip -n b -6 addr show dev vb scope link | grep -q 'inet6 fe80' &&
	! ip -n a -6 addr show dev va | grep -q tentative &&
	! ip -n b -6 addr show dev vb | grep -q tentative
}
i=0
until ll_ready; do
	i=$((i + 1))
	[ $i -lt 200 ] || { echo "FAIL: no link-local addresses on the veth pair"; exit 1; }
	sleep 0.05
done
ip netns exec a "$UROCE" link add uroce1 netdev va || { echo "FAIL: link add in a"; exit 1; }
ip netns exec b "$UROCE" link add uroce1 netdev vb || { echo "FAIL: link add in b"; exit 1; }
rc=0
for scen in basic gso fault threads; do
	for fam in v4 v6 v6ll; do
		echo "== $scen $fam over veth"
		"$TEST" $scen $fam uroce1 /run/netns/a /run/netns/b || rc=1
	done
done
exit $rc
