#!/bin/sh
# start.sh UROCE — docs/tutorial/00-start.md, checked.  Run by nsrun.sh.
# Debian's ibv_devices and ibv_devinfo see the device uroce0 as the chapter shows (port
# active, Ethernet link layer, GID 0 ::ffff:127.0.0.1 RoCE v2); `uroce daemon status` names
# the daemon; Debian's ibv_rc_pingpong runs 1000 iterations between two processes, and
# uroce's counters say that uroce carried them (the shared-memory link's packets).
set -u
UROCE=$1
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$UROCE" run ibv_devices >"$tmp/devs" 2>&1 || fail "ibv_devices"
cat "$tmp/devs"
grep -qE '^ +uroce0[[:space:]]+[0-9a-f]{16}$' "$tmp/devs" || fail "ibv_devices does not list uroce0"
"$UROCE" run ibv_devinfo -v >"$tmp/info" 2>&1 || fail "ibv_devinfo"
for l in 'hca_id:	uroce0' '			state:			PORT_ACTIVE (4)' \
	 '			link_layer:		Ethernet' '			GID[  0]:		::ffff:127.0.0.1, RoCE v2'; do
	expect_line "$tmp/info" "$l"
done
"$UROCE" daemon status >"$tmp/status" 2>&1 || fail "uroce daemon status"
cat "$tmp/status"
expect_match "$tmp/status" '^daemon pid [0-9]+ netns [0-9]+ uptime '
expect_match "$tmp/status" '^device uroce0 '

"$UROCE" run ibv_rc_pingpong -g 0 >"$tmp/srv" 2>&1 &
spid=$!
listening() { ss -ltnH "sport = :18515" | grep -q LISTEN; }
wait_for 20 listening || fail "ibv_rc_pingpong never listened"
timeout 60 "$UROCE" run ibv_rc_pingpong -g 0 127.0.0.1 >"$tmp/cli" 2>&1 || fail "the client exited $?"
wait $spid || fail "the server exited $?"
cat "$tmp/srv" "$tmp/cli"
for f in srv cli; do
	expect_match "$tmp/$f" '^8192000 bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$'
	expect_match "$tmp/$f" '^1000 iters in [0-9.]+ seconds = [0-9.]+ usec/iter$'
done
pk=$("$UROCE" stat show | grep '^link uroce0/1 total ' | field shm_tx_packets)
echo "uroce0's shared-memory link carried ${pk:-?} packets"
[ "${pk:-0}" -ge 2000 ] || fail "uroce did not carry the ping-pong"
finish
