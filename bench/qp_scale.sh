#!/bin/sh
# bench/qp_scale.sh — issue #16 section 3: N RC QPs created, connected, used once and
# destroyed between two processes (bench/qp_scale.c), for each N given, in a private
# namespace with its own uroced (tests/daemon/nsrun.sh), server on CPU 0 and client on
# CPU 1.  Prints per N and side: the times (ms) and per QP (us), and RSS per QP.
#
#   bench/qp_scale.sh [-b BUILD] [-r REPS] [-l shm|udp] [N...]    (default N: 1000 5000 10000)
#
# Not a ratio: the figures say whether time and memory grow linearly with N (per-QP
# figures stay flat).  Over UDP the QPs share their send sockets (at most 256), so
# RLIMIT_NOFILE need not exceed N.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --inner ]; then
	B=$2 N=$3 P=$4
	export UROCE_DAEMON=$B/bin/uroced
	"$B/bin/uroce" daemon start >/dev/null 2>&1
	taskset -c 0 timeout 600 "$B/bin/uroce" run "$B/bin/qp_scale" -s -n "$N" -p "$P" &
	spid=$!
	i=0
	while ! ss -tlnH "sport = :$P" | grep -q .; do
		i=$((i + 1)); [ $i -gt 1000 ] && break; sleep 0.01
	done
	taskset -c 1 timeout 600 "$B/bin/uroce" run "$B/bin/qp_scale" -c 127.0.0.1 -n "$N" -p "$P"
	c=$?
	wait $spid
	s=$?
	[ $c = 0 ] && [ $s = 0 ]
	exit $?
fi
BUILD=$SRC/build REPS=1 LINK=shm
while getopts b:r:l: opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 2 ;;
	r) REPS=$OPTARG ;;
	l) LINK=$OPTARG ;;
	*) sed -n '2,/^set -u$/{/^set -u$/d;p}' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ -x "$BUILD/bin/qp_scale" ] || { echo "qp_scale.sh: $BUILD/bin/qp_scale missing: build first"; exit 2; }
export UROCE_LINK=$LINK
echo "# uroce qp_scale $(date -u '+%Y-%m-%d %H:%M UTC') $(git -C "$SRC" describe --always --dirty 2>/dev/null), link $LINK, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), RLIMIT_NOFILE $(ulimit -n)"
hdr="%-6s %-6s %3s %10s %10s %10s %10s | %8s %8s %8s | %9s\n"
# shellcheck disable=SC2059
printf "$hdr" side n rep create_ms connect_ms traffic_ms destroy_ms create connect destroy "RSS/QP"
rc=0
port=18650
for n in ${*:-1000 5000 10000}; do
	r=1
	while [ $r -le "$REPS" ]; do
		port=$((port + 1))
		out=$("$SRC/tests/daemon/nsrun.sh" "$SRC/bench/qp_scale.sh" --inner "$BUILD" "$n" "$port" 2>&1) || rc=1
		echo "$out" | awk -v r=$r '/^qp_scale side=/ {
			for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			printf "%-6s %-6d %3d %10.1f %10.1f %10.1f %10.1f | %6.1fus %6.1fus %6.1fus | %7.0f B\n", f["side"], f["n"], r,
				f["create_ms"], f["connect_ms"], f["traffic_ms"], f["destroy_ms"],
				f["create_ms"] * 1000 / f["n"], f["connect_ms"] * 1000 / f["n"], f["destroy_ms"] * 1000 / f["n"],
				f["rss_per_qp_b"] }'
		echo "$out" | grep -v '^qp_scale side=' | sed 's/^/# /'
		r=$((r + 1))
	done
done
exit $rc
