#!/bin/sh
# ud_fault.sh UROCE UD_FAULT TOPO CASE — exact loss accounting of UD / UC under UROCE_FAULT,
# two processes with plain verbs (ud_fault.c), run by tests/daemon/nsrun.sh.
#   TOPO lo:   both on 127.0.0.1 (uroce0);  veth: receiver in netns a, sender in netns b
#              (tests/daemon/lib.sh's topo_setup), a uroced in each
#   CASE SERVICE-MESSAGES-SEED (SERVICE ud, uc or ucw: UC with WRITEs; ud_fault.c), e.g.
#        ud-1500-7: the sender runs with
#        UROCE_FAULT="drop=0.05,seed=SEED,log=FILE"; ud_fault checks that the receiver gets
#        exactly the messages none of whose packets the log lists, and the counters.
# The sender starts once the receiver prints READY and its TCP port listens (no sleeps);
# every step is bounded by `timeout`.
set -u
UROCE=$1
PROG=$2
TOPO=$3
CASE=$4
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UROCE_RC_STATS=1 UD_FAULT_UROCE="$UROCE"

topo_setup "$TOPO" || exit 1
[ "$TOPO" = veth ] && export UD_FAULT_DEV=uroce1

set -- $(echo "$CASE" | tr - ' ')
svc=$1; n=$2; seed=$3
port=18517
log=$tmp/fault.log

echo "== receiver: $S uroce run $PROG recv $svc $port $n"
$S timeout 120 "$UROCE" run "$PROG" recv "$svc" $port "$n" >"$tmp/recv" 2>&1 &
rpid=$!
ready() { grep -q READY "$tmp/recv" && $S ss -ltnH "sport = :$port" | grep -q LISTEN; }
if ! wait_for 30 ready; then
	cat "$tmp/recv"
	fail "receiver never became ready"
	exit 1
fi
echo "== sender: $C UROCE_FAULT=drop=0.05,seed=$seed,log=... uroce run $PROG send $svc $SADDR $port $n"
$C env UROCE_FAULT="drop=0.05,seed=$seed,log=$log" \
	timeout 120 "$UROCE" run "$PROG" send "$svc" "$SADDR" $port "$n" "$log" >"$tmp/send" 2>&1
src=$?
wait $rpid
rrc=$?
echo "-- receiver"; cat "$tmp/recv"
echo "-- sender"; cat "$tmp/send"
[ $src -eq 0 ] || fail "sender exited $src"
[ $rrc -eq 0 ] || fail "receiver exited $rrc"
# The log the sender's fault module wrote: every line a drop, as many as the sender counted.
dropped=$(grep -c ' drop$' "$log" 2>/dev/null || echo 0)
lines=$(wc -l <"$log" 2>/dev/null || echo 0)
expect_eq "log lines are drops" "$lines" "$dropped"
expect_eq "dropped packets (log vs sender)" "dropped_packets $dropped" \
	"$(grep -o 'dropped_packets [0-9]*' "$tmp/send")"
# The receiver's QP counters (UROCE_RC_STATS at teardown): no datagram dropped for want of a
# receive WQE or a Q_Key mismatch.
for k in NO_RWQE QKEY NOT_READY; do
	v=$(grep 'uroce rc qp' "$tmp/recv" | grep -o " $k=[0-9]*" | head -1)
	expect_eq "receiver $k" "$v" " $k=0"
done
[ $fails -eq 0 ] || exit 1
echo "PASS $TOPO $CASE"
