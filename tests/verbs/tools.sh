#!/bin/sh
# tools.sh LIBDIR — Debian's unmodified ibverbs-utils through our libibverbs.so.1.
# Runs inside its own namespaces (nsrun.sh); LIBDIR must be absolute so the library
# can find uroced next to it (build/bin) for autostart.
set -u
LIB=$1
fail() { echo "FAIL: $*"; exit 1; }
command -v ibv_devices >/dev/null || { echo "FAIL: ibv_devices not found (package ibverbs-utils; scripts/deps.sh test installs it)"; exit 1; }
export LD_LIBRARY_PATH=$LIB
# An ASan build of the library needs the ASan runtime first in uninstrumented programs.
asan=$(ldd "$LIB/libibverbs.so.1" | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
	export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fi

out=$(timeout 20 ibv_devices) || fail "ibv_devices exited $?"
echo "$out"
echo "$out" | grep -Eq '^[[:space:]]+uroce0[[:space:]]+[0-9a-f]{16}$' || fail "ibv_devices does not list uroce0"

out=$(timeout 20 ibv_devinfo -v) || fail "ibv_devinfo exited $?"
echo "$out"
echo "$out" | grep -q '^hca_id:[[:space:]]*uroce0$' || fail "no hca_id uroce0"
echo "$out" | grep -Eq 'state:[[:space:]]+PORT_ACTIVE \(4\)' || fail "port not PORT_ACTIVE"
echo "$out" | grep -Eq 'link_layer:[[:space:]]+Ethernet' || fail "link layer not Ethernet"
echo "$out" | grep -Eq 'active_mtu:[[:space:]]+4096 \(5\)' || fail "lo should give active MTU 4096"
echo "$out" | grep -Eq 'GID\[ *0\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2' || fail "no RoCE v2 GID ::ffff:127.0.0.1"
echo "$out" | grep -Eq 'fw_ver:[[:space:]]+uroce ' || fail "fw_ver"
echo "$out" | grep -q 'board_id' && fail "board_id printed although there is no sysfs"

# A 1500-byte netdev gives the 1024-byte IB MTU, as Soft-RoCE.
ip link set lo mtu 1500 || fail "cannot set lo mtu"
out=$(timeout 20 ibv_devinfo) || fail "ibv_devinfo exited $?"
echo "$out" | grep -Eq 'active_mtu:[[:space:]]+1024 \(3\)' || fail "lo mtu 1500 should give active MTU 1024"
echo "PASS"
