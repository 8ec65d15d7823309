#!/bin/sh
# idle.sh UROCE IPC_TEST — issue #17 (10): a daemon started on demand must not outlive
# the programs of its namespace.  Run by nsrun.sh (private mount, network and pid
# namespaces); netns x (veth vx, its peer vy here) plays a scripted namespace.  Checked:
#   uroced refuses a bad --idle-ms; the default idle time is 10 s and `daemon status` says so;
#   `link add` in x starts a daemon that stays while a program holds a connection (longer
#   than the idle time), `daemon status` says when it will exit (after its last client /
#   after this command), and once the program has ended the daemon exits within the idle
#   time, having saved the departed program's counters;
#   the next client starts a new daemon with the saved link, the device counters and the
#   departed clients' totals;
#   a client that connects while the daemon is closing its socket (held open by
#   UROCE_DAEMON_EXIT_PAUSE=close:MS) is reset and its library starts a successor, so the
#   command succeeds; one that connects just before the last accept (accept:MS) is served
#   by the daemon, which stays, and the totals are then not counted twice;
#   `daemon start` makes the daemon stay past the idle time;
#   `ip netns del x` after the programs have ended: the daemon exits and the kernel frees
#   the namespace (its veth pair disappears);
#   a daemon whose links cannot be saved (no state directory) stays, and says why; idle
#   time 0 means never.
set -u
UROCE=$1
IPC_TEST=$2
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
holder=
cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

IDLE=1000
UROCE_DAEMON_IDLE_MS=$IDLE
UROCE_DAEMON_LOG=$tmp/log
export UROCE_DAEMON_IDLE_MS UROCE_DAEMON_LOG

mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
ip netns add x || { echo "SKIP: no netns"; exit 77; }
ip link add vy type veth peer name vx netns x || { echo "SKIP: no veth"; exit 77; }
ip -n x link set lo up
ip -n x link set vx up
ip link set vy up
X="ip netns exec x"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# alive PID: PID is a live process (a zombie waiting for us to reap it is not).
alive() {
	[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" ] &&
		[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
# wait_gone PID SECONDS: until PID has exited, bounded.
wait_gone() {
	_lim=$(($(now_ms) + $2 * 1000))
	while alive "$1"; do
		[ "$(now_ms)" -ge "$_lim" ] && return 1
		sleep 0.02
	done
	return 0
}
# dpid PREFIX: the pid of the daemon as `uroce daemon status` shows it (starts none).
dpid() { $1 "$UROCE" daemon status | awk '$1 == "daemon" { print $3 }'; }
counters_file=$UROCE_STATE_DIR/netns-name-x.counters

# ---- uroced's option; the default idle time
"$UROCE_DAEMON" --idle-ms 5x 2>/dev/null
expect_eq "uroced --idle-ms 5x" "$?" 2
env -u UROCE_DAEMON_IDLE_MS $X "$UROCE" link show >/dev/null || fail "link show (default idle)"
expect_eq "default idle time" "$($X "$UROCE" daemon status | grep '^exit')" \
	"exit idle 10.000s after this command, unless a client connects"
$X "$UROCE" daemon stop

# ---- link add starts a daemon; it stays while a program runs, exits once it has ended
$X "$UROCE" link add uroce1 netdev vx >/dev/null || fail "link add in x"
pid1=$(dpid "$X")
mkfifo "$tmp/hold"
$X "$IPC_TEST" holder uroce1 <"$tmp/hold" >"$tmp/qpn" &
holder=$!
exec 3>"$tmp/hold"
wait_for 10 test -s "$tmp/qpn" || fail "holder got no QPN"
$X "$UROCE" daemon status >"$tmp/st"
expect_eq "daemon that link add started" "$(awk '$1 == "daemon" { print $3 }' "$tmp/st")" "$pid1"
expect_eq "status with a program running" "$(grep '^exit' "$tmp/st")" \
	"exit idle 1.000s after its last client leaves (1 other client now)"
sleep 1.5
alive "$pid1" || fail "daemon exited while a program was connected"
exec 3>&-
wait "$holder"
holder=
$X "$UROCE" daemon status >"$tmp/st"
expect_eq "status with no program" "$(grep '^exit' "$tmp/st")" \
	"exit idle 1.000s after this command, unless a client connects"
t0=$(now_ms)
if wait_gone "$pid1" 15; then
	took=$(($(now_ms) - t0))
	echo "daemon $pid1 exited ${took} ms after the last client"
	[ "$took" -ge $((IDLE / 2)) ] || fail "exited after ${took} ms, before its idle time $IDLE ms"
	[ "$took" -le $((IDLE + 3000)) ] || fail "exited after ${took} ms, idle time $IDLE ms"
else
	fail "daemon $pid1 still runs 15 s after its last client left"
fi
grep -q "uroced\[$pid1\]: no client for $IDLE ms: exiting, counters saved to $counters_file" \
	"$tmp/log" || fail "no exit line in the log: $(cat "$tmp/log")"

# ---- the next client's daemon has the saved link and counters
expect_eq "link after the idle exit" "$($X "$UROCE" link show uroce1 | field netdev)" vx
pid2=$(dpid "$X")
[ -n "$pid2" ] && [ "$pid2" != "$pid1" ] || fail "no new daemon: [$pid2] after [$pid1]"
test -e "$counters_file" && fail "counters file left after the restart read it"
$X "$UROCE" stat show link uroce1 >"$tmp/stat"
expect_eq "departed totals kept" "$(grep ' total ' "$tmp/stat")" "link uroce1/1 total tx_packets 11"
expect_eq "qpn_alloc kept" "$(field qpn_alloc <"$tmp/stat")" 1
expect_eq "qpn_reclaimed kept" "$(field qpn_reclaimed <"$tmp/stat")" 1

# ---- a client that connects while the daemon closes its socket: reset, a successor serves
wait_gone "$pid2" 15 || fail "daemon $pid2 did not exit when idle"
UROCE_DAEMON_EXIT_PAUSE=close:800 $X "$UROCE" link show >/dev/null
pid3=$(dpid "$X")
wait_for 15 grep -q "uroced\[$pid3\]: exit paused 800 ms before close" "$tmp/log" ||
	fail "daemon $pid3 never reached its exit"
expect_eq "link show during the close" "$($X "$UROCE" link show uroce1 | field netdev)" vx
pid4=$(dpid "$X")
[ -n "$pid4" ] && [ "$pid4" != "$pid3" ] || fail "no successor: [$pid4] after [$pid3]"
wait_gone "$pid3" 5 || fail "daemon $pid3 did not finish its exit"

# ---- a client that connects just before the last accept: served, the daemon stays
wait_gone "$pid4" 15 || fail "daemon $pid4 did not exit when idle"
UROCE_DAEMON_EXIT_PAUSE=accept:800 $X "$UROCE" link show >/dev/null
pid5=$(dpid "$X")
wait_for 15 grep -q "uroced\[$pid5\]: exit paused 800 ms before accept" "$tmp/log" ||
	fail "daemon $pid5 never reached its exit"
test -e "$counters_file" || fail "no counters file while the daemon exits"
expect_eq "link show before the accept" "$($X "$UROCE" link show uroce1 | field netdev)" vx
expect_eq "the same daemon served" "$(dpid "$X")" "$pid5"
grep -q "uroced\[$pid5\]: a client came during the idle exit: staying" "$tmp/log" ||
	fail "daemon $pid5 did not say it stays"
test -e "$counters_file" && fail "counters file left by the daemon that stayed"
# Exits at a later idle time (pausing again), and its successor counts the totals once.
wait_gone "$pid5" 15 || fail "daemon $pid5 did not exit when idle"
expect_eq "totals counted once" "$($X "$UROCE" stat show link uroce1 | grep ' total ')" \
	"link uroce1/1 total tx_packets 11"
expect_eq "qpn_alloc counted once" "$($X "$UROCE" stat show link uroce1 | field qpn_alloc)" 1

# ---- started explicitly: stays
$X "$UROCE" daemon start >/dev/null || fail "daemon start"
pid6=$(dpid "$X")
expect_eq "status after daemon start" "$($X "$UROCE" daemon status | grep '^exit')" \
	"exit never: started by 'uroce daemon start', stays until 'uroce daemon stop'"
sleep $((IDLE / 1000 + 1))
alive "$pid6" || fail "a daemon that 'daemon start' keeps exited when idle"
$X "$UROCE" daemon stop

# ---- ip netns del after the programs ended: daemon and namespace go
$X "$UROCE" link show >/dev/null
pid7=$(dpid "$X")
ip netns del x
wait_gone "$pid7" 15 || fail "the daemon of the deleted namespace x still runs"
# The kernel destroys the namespace once nothing holds it, and the veth pair with it.
wait_for 20 sh -c '! ip link show vy' || fail "namespace x never freed: vy still exists"

# ---- links that cannot be saved keep the daemon; idle time 0 means never
ip netns add y
ip link add vz type veth peer name vw netns y
Y="ip netns exec y"
UROCE_STATE_DIR=/proc/none/state $Y "$UROCE" link add uroce1 netdev vw >/dev/null ||
	fail "link add in y"
pid8=$(dpid "$Y")
expect_eq "status with unsaved links" "$($Y "$UROCE" daemon status | grep '^exit')" \
	"exit never: started on demand, but its links could not be saved"
sleep $((IDLE / 1000 + 1))
alive "$pid8" || fail "a daemon with unsaved links exited when idle"
$Y "$UROCE" daemon stop
UROCE_DAEMON_IDLE_MS=0 $Y "$UROCE" link show >/dev/null
expect_eq "status with idle time 0" "$($Y "$UROCE" daemon status | grep '^exit')" \
	"exit never: started on demand, idle exit off (idle time 0)"
$Y "$UROCE" daemon stop

echo "log:"; cat "$tmp/log"
finish
