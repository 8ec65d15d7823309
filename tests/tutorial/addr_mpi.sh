#!/bin/sh
# addr_mpi.sh UROCE — docs/tutorial/09-connection-setup.md, its address and MPI parts,
# checked.  Run by nsrun.sh.
#   1. a device on a netdev of its own (`uroce link add uroce1 netdev d0`, d0 one end of a
#      veth pair): its GID table follows d0's addresses: the IPv4 address as ::ffff:a.b.c.d,
#      the link-local and an added IPv6 address as they are, and a deleted address's GID goes;
#      Debian's ibv_devices lists both devices;
#   2. the chapter's Open MPI command (two ranks, mpi4py's ringtest over UCX rc_verbs under
#      `uroce run`) runs, and uroce's own counters prove that uroce carried it: the
#      shared-memory link sent at least the 2 x 20 x 1 MiB the ring moves.
set -u
UROCE=$1
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
has_gid() { "$UROCE" link show uroce1 -d | grep -qE "^    gid [0-9]+ $1 RoCE v2\$"; }
ip link add d0 type veth peer name d1 || { echo "SKIP: no veth"; exit 77; }
ip link set d1 up
ip addr add 192.0.2.5/24 dev d0
ip link set d0 up
"$UROCE" link add uroce1 netdev d0 || fail "uroce link add"
wait_for 20 has_gid ::ffff:192.0.2.5 || fail "no GID for 192.0.2.5"
ip addr add 2001:db8::5/64 dev d0 nodad
wait_for 20 has_gid 2001:db8::5 || fail "no GID for 2001:db8::5"
ll=$(ip -6 -o addr show dev d0 scope link | awk '{ sub("/.*", "", $4); print $4 }')
has_gid "$ll" || fail "no GID for the link-local address $ll"
"$UROCE" link show uroce1 -d
ip addr del 192.0.2.5/24 dev d0
gone() { ! has_gid ::ffff:192.0.2.5; }
wait_for 20 gone || fail "the GID of a deleted address stayed"
"$UROCE" run ibv_devices >"$tmp/devs" || fail "ibv_devices"
cat "$tmp/devs"
grep -qE '^ +uroce0 ' "$tmp/devs" || fail "ibv_devices does not list uroce0"
grep -qE '^ +uroce1 ' "$tmp/devs" || fail "ibv_devices does not list uroce1"
"$UROCE" link del uroce1 || fail "uroce link del"

command -v mpirun.openmpi >/dev/null || { fail "no mpirun.openmpi (package openmpi-bin)"; finish; }
root=
[ "$(id -u)" -eq 0 ] && root=--allow-run-as-root
timeout 120 "$UROCE" run mpirun.openmpi -np 2 $root --bind-to none --mca pml ucx --mca osc ucx \
	--mca btl self --mca mtl ^ofi,psm,psm2 --mca opal_common_ucx_devices any \
	-x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=uroce0:1 \
	/usr/bin/python3 -m mpi4py.bench ringtest -n 1048576 -l 20 >"$tmp/mpi" 2>&1 || fail "mpirun exited $?"
cat "$tmp/mpi"
grep -qE '^time for 20 loops = [0-9.e-]+ seconds \(2 processes, 1048576 bytes\)$' "$tmp/mpi" ||
	fail "no ringtest result"
bytes=$("$UROCE" stat show | grep '^link uroce0/1 total ' | field shm_tx_bytes)
echo "uroce0's shared-memory link sent ${bytes:-?} bytes"
[ "${bytes:-0}" -ge $((2 * 20 * 1048576)) ] || fail "uroce did not carry the ring ($bytes bytes)"
finish
