#!/bin/sh
# asyncwatch.sh LIBDIR — Debian's ibv_asyncwatch through our library sees
# IBV_EVENT_DEVICE_FATAL when uroced dies.  Runs in its own namespaces (nsrun.sh), so
# the only uroced is the one autostarted here.  Waits are on observable conditions
# (log contents, the daemon's pid), each bounded to 10 s.
set -u
LIB=$1
HERE=$(dirname "$0")
command -v ibv_asyncwatch >/dev/null || { echo "FAIL: ibv_asyncwatch not found (package ibverbs-utils; scripts/deps.sh test installs it)"; exit 1; }
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
fail() { echo "FAIL: $*"; cat "$LOG"; exit 1; }

# until CMD: retry CMD every 20 ms for at most 10 s.
until_ok() {
	i=0
	while ! "$@"; do
		i=$((i + 1))
		[ $i -ge 500 ] && return 1
		sleep 0.02
	done
}
daemon_pid() {
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = uroced ] && { echo "${p#/proc/}"; return 0; }
	done
	return 1
}

sh "$HERE/with_lib.sh" "$LIB" ibv_asyncwatch -d uroce0 >"$LOG" 2>&1 &
AW=$!
until_ok grep -q "async event FD" "$LOG" || fail "ibv_asyncwatch did not open uroce0"
D=$(daemon_pid) || fail "no uroced running"
kill -9 "$D"
until_ok grep -q "IBV_EVENT_DEVICE_FATAL" "$LOG" || fail "no DEVICE_FATAL event"
kill "$AW" 2>/dev/null
cat "$LOG"
echo PASS
