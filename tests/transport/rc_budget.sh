#!/bin/sh
# rc_budget.sh UROCE CASE — the in-flight budget per UDP destination (engine.c, "Credits"):
# many RC QPs of one context stream to one peer over UDP without overflowing the peer's
# receive socket.  Debian's unmodified perftest, server and client as two processes on lo,
# UROCE_LINK=udp (the shared-memory link has its own backpressure).  Run by
# tests/daemon/nsrun.sh: the network namespace is the test's own, so /proc/net/snmp's
# UDP counters are this test's packets only.
#
#   stream   ib_write_bw -q 1000 -s 65536 for 3 s: the receiver's socket drops (its own
#            count, SO_MEMINFO; with the client's, the namespace's RcvbufErrors) at most
#            0.1% of the client's packets and the client's QPs send at most 1% of
#            them again; the client's QPs waited for credits (credit_waits > 0, uroce's
#            counters), so the budget was what held them back
#   off      the negative control: the same with UROCE_UDP_INFLIGHT_KB=0 (no budget) must
#            fail stream's first check (more than 0.1% of the packets dropped; 1% was seen)
#            and wait for no credits -- so the check can fail, and 1,000 windows are what
#            overflows the socket
#   faults   the smallest budget (512 KiB) under UROCE_FAULT loss, duplication and
#            reordering, for each of ib_write_bw, ib_read_bw and ib_atomic_bw -q 64 with a
#            fixed number of iterations: every run finishes (a credit never lost, a waiter
#            never forgotten) and waited for credits
#   walk     faults with a timer walk that runs one QP's due timers at a time
#            (UROCE_TIMER_FIRE_MAX=1, engine.c run_timers): the QPs left due are run by
#            the next walks, from where the last one stopped, so every run still finishes
#            (a deferred retransmission or credit retry never forgotten), and walks did
#            leave timers due (timer_deferred > 0 over the three, UROCE_ENGINE_STATS;
#            per program it may be 0: ib_read_bw's QPs seldom come due together, 0-7
#            such walks against 130-181 for ib_write_bw)
#   fds      stream's 1,000 QPs under a limit of 512 file descriptors (ulimit -n): the QPs
#            of a UDP source-port slot share one send socket, so the client runs, and it
#            held at most UROCE_UDP_SPORTS (default 256) of them at once (tx_sockets_max,
#            UROCE_ENGINE_STATS)
#   fds_off  the negative control: the same with a slot per hash value
#            (UROCE_UDP_SPORTS=16384) must run out of descriptors -- the client fails
set -u
UROCE=$1
CASE=$2
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UROCE_RC_STATS=1 UROCE_LINK=udp
topo_setup lo || exit 1
port=18515

# UDP counter NAME of this namespace (/proc/net/snmp: a header line, then the values).
udp_stat() {
	awk -v k="$1" '$1 == "Udp:" { if (!h) { for (i = 2; i <= NF; i++) col[$i] = i; h = 1 }
			else { print $col[k]; exit } }' "$SNMP"
}
SNMP=/proc/net/snmp
# Sum of a counter over the QPs' "uroce rc qp" lines of FILE (UROCE_RC_STATS).
qp_sum() {
	awk -v k="$1" '/^uroce rc qp/ { for (i = 1; i < NF; i++) if ($i == k) s += $(i + 1) }
		END { print s + 0 }' "$2"
}

# eng_stat sum|max KEY FILE: KEY= of the UROCE_ENGINE_STATS lines of FILE (one per context
# at close), summed or the largest.
eng_stat() {
	awk -v op="$1" -v k="$2=" '/^UROCE_ENGINE_STATS/ { for (i = 1; i <= NF; i++)
		if (index($i, k) == 1) { v = substr($i, length(k) + 1) + 0; s += v; if (v > m) m = v } }
		END { print (op == "max" ? m : s) + 0 }' "$3"
}
# What the kernel dropped at a side's receive socket (rx_socket_drops, SO_MEMINFO), so the
# data receiver's overflow is told from the client's (ACKs its socket had no room for:
# harmless while later ACKs arrive, since ACKs are cumulative, but counted in the same
# UdpRcvbufErrors).
sock_drops() { eng_stat sum rx_socket_drops "$1"; }

stream() { # ENV...: one ib_write_bw -q 1000 pair; sets tx retrans waits drops (the
	# server's socket, the data's receiver), ack_drops (the client's) and all (the namespace)
	a="ib_write_bw -x 0 -F --report_gbits -s 65536 -D 3 -q 1000"
	d0=$(udp_stat RcvbufErrors)
	export UROCE_ENGINE_STATS=1 "$@"
	run_pair 300 $port "$a" "$a $SADDR" || return 1
	tx=$(qp_sum tx "$tmp/cli")
	retrans=$(qp_sum retrans "$tmp/cli")
	waits=$(qp_sum credit_waits "$tmp/cli")
	all=$(( $(udp_stat RcvbufErrors) - d0 ))
	drops=$(sock_drops "$tmp/srv")
	ack_drops=$(sock_drops "$tmp/cli")
	summary="client: $tx packets, $retrans sent again, $waits credit waits; receive buffer overflows: $drops at the server's socket, $ack_drops at the client's (ACKs), $all in the namespace"
	echo "$summary"
	# The sockets' counts are read when each context closes; the namespace's also holds what
	# arrived after that, at a socket no longer drained (a few to a few thousand with
	# retransmissions still in flight), so they are at most the namespace's: more would
	# mean they read someone else's sockets.
	[ $((drops + ack_drops)) -le "$all" ] ||
		fail "the sockets' drops ($drops + $ack_drops) exceed the namespace's $all"
	[ "$tx" -gt 100000 ] || fail "only $tx packets sent: nothing streamed"
}

case $CASE in
stream)
	if stream; then
		[ $((drops * 1000)) -le "$tx" ] || fail "$drops of $tx packets overflowed the receiver's socket (> 0.1%)"
		[ $((retrans * 100)) -le "$tx" ] || fail "$retrans of $tx packets sent again (> 1%)"
		[ "$waits" -gt 0 ] || fail "no QP waited for credits: the budget did not hold anything back"
	fi ;;
off)
	if stream UROCE_UDP_INFLIGHT_KB=0; then
		[ $((drops * 1000)) -gt "$tx" ] ||
			fail "without a budget only $drops of $tx packets overflowed (<= 0.1%): the stream case proves nothing here"
		[ "$waits" -eq 0 ] || fail "$waits credit waits with the budget off"
	fi ;;
fds|fds_off)
	ulimit -n 512 || { echo "SKIP: cannot lower the descriptor limit"; exit 77; }
	[ "$CASE" = fds_off ] && export UROCE_UDP_SPORTS=16384
	# The most send sockets the client's context held at once (UROCE_ENGINE_STATS).
	max_socks() { eng_stat max tx_sockets_max "$tmp/cli"; }
	if stream; then
		socks=$(max_socks)
		echo "client: at most $socks send sockets open at once"
		if [ "$CASE" = fds_off ]; then
			fail "1,000 QPs with a socket per port ran under 512 descriptors: the fds case proves nothing"
		else
			# One per slot: a QP opens its sender with its AV's GRH (perftest's hop
			# limit 255), never passing through another socket on the way.
			[ "$socks" -ge 1 ] && [ "$socks" -le 256 ] || fail "$socks send sockets (want 1-256)"
		fi
	elif [ "$CASE" = fds_off ]; then
		socks=$(max_socks)
		if grep -q "to RTR" "$tmp/cli" && [ "$socks" -gt 256 ]; then
			fails=0
			echo "client failed as expected after $socks send sockets: $(grep -m1 "to RTR" "$tmp/cli")"
		else
			fail "the client failed, but not for want of descriptors ($socks send sockets)"
		fi
	fi ;;
faults|walk)
	export UROCE_UDP_INFLIGHT_KB=512 UROCE_FAULT=drop=0.02,dup=0.01,reorder=0.02
	[ "$CASE" = walk ] && export UROCE_TIMER_FIRE_MAX=1 UROCE_ENGINE_STATS=1
	deferred=0
	for t in "ib_write_bw -s 65536 -n 200" "ib_read_bw -s 65536 -n 100" "ib_atomic_bw -A FETCH_AND_ADD -n 2000"; do
		port=$((port + 1))
		a="$t -x 0 -F -q 64 -p $port"
		run_pair 300 $port "$a" "$a $SADDR" || continue
		w=$(qp_sum credit_waits "$tmp/cli")
		echo "${t%% *}: $w credit waits"
		[ "$w" -gt 0 ] || fail "${t%% *}: no QP waited for credits at a 512 KiB budget"
		if [ "$CASE" = walk ]; then
			dw=$(( $(eng_stat sum timer_deferred "$tmp/cli") + $(eng_stat sum timer_deferred "$tmp/srv") ))
			echo "${t%% *}: $dw timer walks left due timers for the next"
			deferred=$((deferred + dw))
		fi
	done
	[ "$CASE" = faults ] || [ "$deferred" -gt 0 ] ||
		fail "no walk left a timer due in any of the three: the walk's budget was never reached" ;;
*)
	echo "unknown case $CASE"; exit 2 ;;
esac
# Again at the end, below the 2,000 per-QP lines: what a failed run's tail should show.
[ -n "${summary:-}" ] && echo "$summary"
[ $fails -eq 0 ] && echo "PASS $CASE"
exit $([ $fails -eq 0 ] && echo 0 || echo 1)
