#!/bin/sh
# demo.sh BUILD_DIR — the README's main job, run after a build:
#   1. the device that unmodified RDMA programs see (Debian's ibv_devinfo through uroce);
#   2. real RDMA between two processes: Debian's ibv_rc_pingpong, server and client, over
#      uroce's RC transport on 127.0.0.1;
#   3. RoCEv2 packets of a real Soft-RoCE rdma_cm capture decoded by uroce's wire module.
# Every part must run and succeed: a missing program or a failed run stops the job with a
# non-zero status and says why (scripts/deps.sh demo installs the programs).
set -eu
b=$(cd "${1:-build}" && pwd)
data=$(cd "$(dirname "$0")/../tests/data" && pwd)

die() {
	echo "run-demo: FAILED: $*" >&2
	exit 1
}
for f in bin/uroce bin/uroced lib/libibverbs.so.1; do
	[ -e "$b/$f" ] || die "$b/$f is missing (did the build fail?)"
done
for p in ibv_devinfo ibv_rc_pingpong ss; do
	command -v $p >/dev/null 2>&1 ||
		die "$p is not installed: run scripts/deps.sh demo as root (package $(awk -v c=$p '$1 == c { print $2 }' "$(dirname "$0")/tools.txt"))"
done
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== 1. the uroce device, as Debian's unmodified ibv_devinfo sees it"
"$b/bin/uroce" run ibv_devinfo -v >"$log/devinfo" 2>&1 || { cat "$log/devinfo"; die "ibv_devinfo failed"; }
sed -n '1,40p' "$log/devinfo"
grep -q 'hca_id:[[:space:]]*uroce0' "$log/devinfo" || die "ibv_devinfo does not show uroce0"
echo

echo "== 2. RDMA between two processes: Debian's unmodified ibv_rc_pingpong over uroce's RC"
echo "   (server and client on 127.0.0.1, 4 KiB messages, 1000 round trips)"
"$b/bin/uroce" run timeout 60 ibv_rc_pingpong -g 0 -s 4096 -n 1000 >"$log/srv" 2>&1 &
srv=$!
# The client may start once the server listens on its TCP port (bounded wait).
i=0
while ! ss -ltnH 'sport = :18515' 2>/dev/null | grep -q LISTEN; do
	i=$((i + 1))
	if [ $i -gt 400 ] || ! kill -0 $srv 2>/dev/null; then
		kill $srv 2>/dev/null || true
		cat "$log/srv"
		die "the ibv_rc_pingpong server never listened on port 18515"
	fi
	sleep 0.05
done
crc=0
"$b/bin/uroce" run timeout 60 ibv_rc_pingpong -g 0 -s 4096 -n 1000 127.0.0.1 >"$log/cli" 2>&1 || crc=$?
src=0
wait $srv || src=$?
echo "-- client side:"; cat "$log/cli"
echo "-- server side:"; cat "$log/srv"
[ $crc -eq 0 ] || die "the ibv_rc_pingpong client exited $crc"
[ $src -eq 0 ] || die "the ibv_rc_pingpong server exited $src"
# Each side reports the bytes it moved: 1000 round trips of 4096 bytes each way.
for side in cli srv; do
	grep -q '^8192000 bytes in .* seconds' "$log/$side" ||
		die "the ibv_rc_pingpong $side did not report its 8192000 bytes"
done
echo

echo "== 3. an rdma_cm connection of Linux Soft-RoCE, decoded by uroce (tests/data/rdma_cm_rping.pcap)"
"$b/bin/uroce" decode "$data/rdma_cm_rping.pcap" >"$log/decode" || { cat "$log/decode"; die "uroce decode failed"; }
cat "$log/decode"
tail -1 "$log/decode" | grep -q 'ICRC ok 41, bad 0; malformed 0' || die "the capture did not decode cleanly"
echo
echo "run-demo: the main job ran: the device, RDMA between two processes (ibv_rc_pingpong), the decode"
