#!/bin/sh
# demo.sh BUILD_DIR — the README's main job, run after a build.
#
# What it shows grows with the project (README status table):
#   - the device that unmodified RDMA programs see (ibv_devices / ibv_devinfo through uroce);
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
fi

echo "== an rdma_cm connection of Linux Soft-RoCE, decoded by uroce (tests/data/rdma_cm_rping.pcap)"
"$b/bin/uroce" decode "$data/rdma_cm_rping.pcap"
