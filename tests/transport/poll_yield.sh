#!/bin/sh
# poll_yield.sh UROCE CASE — a busy-polling thread yields its CPU to a spinner that needs it
# (engine.c uroce_transport_poll, POLL_IDLE_YIELD and poll_yield; docs/transport.md):
# Debian's unmodified ib_send_lat, server and client both pinned to one CPU, so that each
# half round trip needs the other process to run on the CPU the waiting one spins on in
# ibv_poll_cq.  With the yield the two hand over within microseconds; without it, only when
# the scheduler preempts the spinner, at the tick (4 ms at HZ=250, 1 ms at HZ=1000).  It
# shows that a yield comes, not how often: a poller stuck in poll_yield's long cadence (64
# empty drains) would still hand over well within the bound.  Run by tests/daemon/nsrun.sh.
#
#   udp   UROCE_LINK=udp: perftest's typical latency below 500 us (10-13 us seen here)
#   shm   the same over the shared-memory link (7 us seen)
#   off   the negative control: UDP with UROCE_POLL_YIELD=0 (never yield) must be
#         tick-bound, typical 500 us or more (4,000 us seen), so the check can fail
# Not a benchmark: the bound is 40 times what a handover costs and half a tick at HZ=1000.
# ib_send_lat, not ib_write_lat: that one waits for the peer's WRITE in a loop of its own,
# outside uroce, and on one CPU can go tick-bound whatever uroce yields (docs/transport.md).
set -u
UROCE=$1
CASE=$2
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

iters=1000
case $CASE in
udp) export UROCE_LINK=udp ;;
shm) export UROCE_LINK=shm ;;
off) export UROCE_LINK=udp UROCE_POLL_YIELD=0; iters=300 ;;
*) echo "unknown case $CASE"; exit 2 ;;
esac
# The first CPU this test may run on (a list such as 0-1 or 2,5).
cpu=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status | cut -d, -f1 | cut -d- -f1)
S="taskset -c $cpu" C="taskset -c $cpu"
args="ib_send_lat -x 0 -F -s 2 -n $iters"
# one_pair PORT: run the pair, set typ (perftest's typical latency, us) and slow (1 when
# tick-bound: 500 us or more)
one_pair() {
	run_pair 120 "$1" "$args -p $1" "$args -p $1 127.0.0.1" || exit 1
	# perftest's row: #bytes #iterations t_min t_max t_typical t_avg ...
	typ=$(awk '/t_typical/ { getline; print $5; exit }' "$tmp/cli")
	case $typ in
	'' | *[!0-9.]*) fail "no typical latency in the client's output"; exit 1 ;;
	esac
	echo "typical latency: $typ us (both processes on CPU $cpu, UROCE_LINK=$UROCE_LINK)"
	slow=$(awk -v t="$typ" 'BEGIN { print (t >= 500) ? 1 : 0 }')
}
case $CASE in
# The control shows that the check can fail, so one tick-bound pair in three proves it:
# something else that runs on the CPU now and then (a CI run's other processes, the host)
# preempts a spinner sooner than the tick and can make one pair hand over early
# (325 us once in a CI run, 2026-12-05).
off)
	for port in 18515 18516 18517; do
		one_pair $port
		[ "$slow" = 1 ] && break
	done
	[ "$slow" = 1 ] || fail "without the yield no pair of three was tick-bound: the check cannot fail" ;;
*)
	one_pair 18515
	[ "$slow" = 0 ] || fail "the pair handed over at the tick ($typ us): a spinner did not yield" ;;
esac
[ "$fails" -eq 0 ]
