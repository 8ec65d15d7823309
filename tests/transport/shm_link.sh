#!/bin/sh
# shm_link.sh UROCE SHM_LINK DEVOPT ARGS... — run shm_link (the same-host shared-memory link,
# shm_link.c) under `uroce run`, after setting uroce0's loopback option to DEVOPT (shm or
# udp, `uroce link set uroce0 loopback DEVOPT`; "-" leaves the default).  Run by nsrun.sh.
set -u
UROCE=$1
PROG=$2
DEVOPT=$3
shift 3
export SHM_LINK_UROCE="$UROCE"
if [ "$DEVOPT" != - ]; then
	"$UROCE" link set uroce0 loopback "$DEVOPT" || { echo "FAIL: uroce link set uroce0 loopback $DEVOPT"; exit 1; }
	"$UROCE" link show uroce0 -d | grep -qx "    loopback $DEVOPT" ||
		{ echo "FAIL: link show -d does not say loopback $DEVOPT"; exit 1; }
fi
exec timeout 150 "$UROCE" run "$PROG" "$@"
