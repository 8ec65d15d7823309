#!/bin/sh
# demo.sh BUILD_DIR — the README's main job, run after a build.
#
# What it shows grows with the project (README status table):
#   - the device that unmodified RDMA programs see (ibv_devices / ibv_devinfo through uroce);
#   - real RDMA between two processes: ibv_rc_pingpong server and client over uroce's RC;
#   - RoCEv2 packets of a real Soft-RoCE capture decoded by uroce's wire module.
set -eu
b=$(cd "${1:-build}" && pwd)
data=$(cd "$(dirname "$0")/../tests/data" && pwd)

if [ -x "$b/bin/uroce" ] && [ -e "$b/lib/libibverbs.so.1" ] && [ -x "$b/bin/uroced" ]; then
	echo "== the uroce device, as Debian's unmodified ibv_devinfo sees it"
	if command -v ibv_devinfo >/dev/null 2>&1; then
		"$b/bin/uroce" run ibv_devinfo -v | sed -n '1,40p'
	fi
	echo
	if command -v ibv_rc_pingpong >/dev/null 2>&1; then
		echo "== RDMA between two processes: Debian's unmodified ibv_rc_pingpong over uroce's RC"
		echo "   (server and client on 127.0.0.1, 4 KiB messages, 1000 round trips)"
		log=$(mktemp)
		"$b/bin/uroce" run ibv_rc_pingpong -g 0 -s 4096 -n 1000 >"$log" 2>&1 &
		srv=$!
		# The client may start once the server listens on its TCP port (bounded wait).
		i=0
		while ! ss -ltnH 'sport = :18515' 2>/dev/null | grep -q LISTEN; do
			i=$((i + 1))
			[ $i -gt 200 ] && break
			sleep 0.05
		done
		if timeout 60 "$b/bin/uroce" run ibv_rc_pingpong -g 0 -s 4096 -n 1000 127.0.0.1; then
			wait $srv || true
			echo "-- server side:"
			cat "$log"
		else
			echo "ibv_rc_pingpong failed; server output:"
			kill $srv 2>/dev/null || true
			cat "$log"
			rm -f "$log"
			exit 1
		fi
		rm -f "$log"
		echo
	fi
fi

echo "== an rdma_cm connection of Linux Soft-RoCE, decoded by uroce (tests/data/rdma_cm_rping.pcap)"
"$b/bin/uroce" decode "$data/rdma_cm_rping.pcap"
