#!/bin/sh
# stat_faults.sh UROCE STAT_FAULTS [NMSG [nosqd]] — issue #4: `uroce stat` shows the RC
# recovery.  nosqd: the processes make no state change after the traffic, so what `uroce
# stat` shows while they are alive comes from the engine's periodic publish.
# Two processes (stat_faults.c) exchange RC traffic under fault injection; run by nsrun.sh
# (a uroced of its own).  Checked:
#   while they are alive: `uroce stat show qp` lists both QPs (shape of `rdma statistic qp
#   show`: link, lqpn, type, pid, counters) and over the two of them retransmissions,
#   sequence NAKs sent and received, duplicate requests are non-zero; `uroce stat show` has
#   one line per context with the packet counters, ICRC drops (non-zero over the two) and
#   misrouted drops;
#   after each destroyed its QP (processes still alive): no QP lines, and each context's
#   totals equal that QP's own counters as printed by UROCE_RC_STATS=1 at destroy, and are
#   at least the values seen while the QP was alive;
#   the device's totals line sums the contexts' lines; after they exit their lines are
#   gone and the totals keep what they counted.
set -u
UROCE=$1
PROG=$2
NMSG=${3:-3000}
MODE=${4:-}
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
prog=
cleanup() {
	[ -n "$prog" ] && kill "$prog" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
for r in p c; do mkfifo "$tmp/go1.$r" "$tmp/go2.$r" || exit 1; done

UROCE_FAULT="drop=0.05,dup=0.02,reorder=0.02,corrupt=0.01,seed=4" UROCE_RC_STATS=1 \
	"$UROCE" run "$PROG" faults "$tmp" "$NMSG" $MODE >"$tmp/out" 2>"$tmp/err" &
prog=$!
# Ready, or the run is over (failed: its message is in err).
wait_for 240 sh -c "(test -s '$tmp/ready.p' && test -s '$tmp/ready.c') || ! kill -0 $prog"
if ! test -s "$tmp/ready.p" || ! test -s "$tmp/ready.c"; then
	fail "the processes never got ready: $(cat "$tmp/err")"
	finish
fi
read -r pid_p qpn_p <"$tmp/ready.p"
read -r pid_c qpn_c <"$tmp/ready.c"

# v FILE PID KEY [LQPN]: KEY's value on FILE's line of PID (and LQPN), "" if none.
v() {
	awk -v pid="$2" -v k="$3" -v q="${4:-}" '
		{ p = ""; l = ""; val = ""
		  for (i = 1; i < NF; i++) {
			if ($i == "pid") p = $(i + 1)
			if ($i == "lqpn") l = $(i + 1)
			if ($i == k && val == "") val = $(i + 1)
		  }
		  if (p == pid && (q == "" || l == q)) { print val; exit } }' "$1"
}
# rcstat QPN KEY: KEY's value in the UROCE_RC_STATS line of QPN ("naks_tx" gives the
# sequence NAKs, the first of a/b/c/d).
rcstat() {
	awk -v q="$(printf '0x%06x:' "$1")" -v k="$2" '
		$4 == q { for (i = 5; i < NF; i++) if ($i == k) { v = $(i + 1); sub("/.*", "", v); print v; exit } }' "$tmp/err"
}
nonzero_sum() {  # WHAT A B [C D]
	what=$1
	shift
	sum=0
	for x in "$@"; do
		case "$x" in *[!0-9]* | "") fail "$what: not numbers [$*]"; return ;; esac
		sum=$((sum + x))
	done
	[ $sum -gt 0 ] || fail "$what: zero over both processes"
}

# ---- alive, traffic over: per-QP lines (published at the SQD cycle's state changes, or
# periodically: then within two periods of the last change; bounded wait)
wait_for 20 sh -c "test \$('$UROCE' stat show qp | grep -c ' retransmissions [1-9]') -ge 1" ||
	fail "no retransmissions published while alive"
"$UROCE" stat show qp >"$tmp/qp1"
"$UROCE" stat show >"$tmp/show1"
expect_eq "QP lines while alive" "$(wc -l <"$tmp/qp1")" 2
grep -Evq '^link uroce0/1 lqpn [0-9]+ type RC pid [0-9]+( [a-z_]+ [0-9]+)+$' "$tmp/qp1" &&
	fail "QP line shape: $(cat "$tmp/qp1")"
expect_eq "parent's QP listed" "$(v "$tmp/qp1" "$pid_p" type "$qpn_p")" RC
expect_eq "child's QP listed" "$(v "$tmp/qp1" "$pid_c" type "$qpn_c")" RC
expect_eq "filter lqpn" "$("$UROCE" stat show qp lqpn "$qpn_p" | wc -l)" 1
expect_eq "filter pid" "$("$UROCE" stat show qp pid "$pid_c" | v /dev/stdin "$pid_c" lqpn)" "$qpn_c"
for k in retransmissions seq_naks_tx seq_naks_rx dup_requests tx_packets rx_packets; do
	nonzero_sum "qp $k" "$(v "$tmp/qp1" "$pid_p" $k)" "$(v "$tmp/qp1" "$pid_c" $k)"
done
for k in timeouts rnr_naks_tx rnr_naks_rx dup_responses read_replays inv_req_naks_rx drop_not_ready; do
	[ -n "$(v "$tmp/qp1" "$pid_p" $k)" ] || fail "qp line has no $k"
done
# Context lines: netio's counters and the transport's totals on one line per context.
for p in "$pid_p" "$pid_c"; do
	expect_eq "context lines of $p" "$(grep -c " pid $p " "$tmp/show1")" 1
	for k in tx_packets rx_packets rx_bad_icrc rx_misrouted fault_drop retransmissions seq_naks_tx; do
		[ -n "$(v "$tmp/show1" "$p" $k)" ] || fail "context line of $p has no $k"
	done
done
# The device's totals line sums the contexts (none has gone yet).
for k in retransmissions seq_naks_tx dup_requests rx_bad_icrc tx_packets; do
	expect_eq "device total $k" "$(grep '^link uroce0/1 total ' "$tmp/show1" | field $k)" \
		"$(($(v "$tmp/show1" "$pid_p" $k) + $(v "$tmp/show1" "$pid_c" $k)))"
done
# On whichever link carried the traffic: the UDP socket (rx_bad_icrc, fault_corrupt) or,
# the default between two processes of one host, the shared-memory link (shm_*).
for k in rx_bad_icrc fault_corrupt; do
	nonzero_sum "$k (UDP + shm)" "$(v "$tmp/show1" "$pid_p" $k)" "$(v "$tmp/show1" "$pid_c" $k)" \
		"$(v "$tmp/show1" "$pid_p" shm_$k)" "$(v "$tmp/show1" "$pid_c" shm_$k)"
done

# ---- QPs destroyed, processes alive: the context totals keep them
echo >"$tmp/go1.p"; echo >"$tmp/go1.c"
wait_for 60 sh -c "(test -s '$tmp/destroyed.p' && test -s '$tmp/destroyed.c') || ! kill -0 $prog"
if ! test -s "$tmp/destroyed.p" || ! test -s "$tmp/destroyed.c"; then
	fail "QPs not destroyed: $(cat "$tmp/err")"
	finish
fi
"$UROCE" stat show >"$tmp/show2"
expect_eq "QP lines after destroy" "$("$UROCE" stat show qp pid "$pid_p"; "$UROCE" stat show qp pid "$pid_c")" ""
for pq in "$pid_p:$qpn_p" "$pid_c:$qpn_c"; do
	p=${pq%:*}; q=${pq#*:}
	[ -n "$(rcstat "$q" retrans)" ] || fail "no UROCE_RC_STATS line for QP $q"
	# uroce stat name : UROCE_RC_STATS name
	for m in retransmissions:retrans timeouts:timeouts seq_naks_tx:naks_tx \
		 seq_nak_retries:seq_naks_rx rnr_naks_rx:rnr_naks_rx rnr_naks_tx:rnr_naks_tx \
		 dup_requests:dup_req dup_responses:dup_resp read_replays:read_replays; do
		k=${m%:*}; r=${m#*:}
		got=$(v "$tmp/show2" "$p" "$k")
		expect_eq "pid $p total $k = QP $q's $r" "$got" "$(rcstat "$q" "$r")"
		alive=$(v "$tmp/qp1" "$p" "$k" "$q")
		[ -n "$alive" ] && [ -n "$got" ] && [ "$alive" -le "$got" ] ||
			fail "pid $p $k: alive [$alive] > final [$got]"
	done
done

# ---- processes gone
echo >"$tmp/go2.p"; echo >"$tmp/go2.c"
wait "$prog"
rc=$?
prog=
expect_eq "stat_faults exit status" "$rc" 0
[ "$rc" -eq 0 ] || cat "$tmp/err" >&2
"$UROCE" stat show >"$tmp/show3"
grep -q " pid $pid_p \| pid $pid_c " "$tmp/show3" && fail "context lines left: $(cat "$tmp/show3")"
# The daemon keeps what the exited processes counted: the QP totals exactly as they were
# after the QPs went, the context's own counters at least as they were then.
total() { grep '^link uroce0/1 total ' "$tmp/show3" | field "$1"; }
for k in retransmissions seq_naks_tx seq_naks_rx dup_requests dup_responses read_replays; do
	expect_eq "device total $k after exit" "$(total $k)" \
		"$(($(v "$tmp/show2" "$pid_p" $k) + $(v "$tmp/show2" "$pid_c" $k)))"
done
for k in rx_bad_icrc tx_packets rx_packets; do
	t=$(total $k)
	[ -n "$t" ] && [ "$t" -ge $(($(v "$tmp/show2" "$pid_p" $k) + $(v "$tmp/show2" "$pid_c" $k))) ] ||
		fail "device total $k after exit [$t] below the contexts' last values"
done

echo "sample (alive):"; cat "$tmp/qp1" "$tmp/show1"
echo "sample (after exit):"; cat "$tmp/show3"
finish
