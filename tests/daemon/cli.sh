#!/bin/sh
# cli.sh UROCE IPC_TEST — the daemon-facing subcommands of the uroce tool, run by
# nsrun.sh in a namespace of its own: help and errors in rdma-tool style,
# `daemon status|stop`, `stat`, `run`, and a SIGKILLed client's QPNs seen going
# back through `uroce daemon status`.
set -u
UROCE=$1
IPC_TEST=$2
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# First, before anything autostarts it.  Not running yet: status says so and fails, stop is a no-op.
expect_eq "status before start" "$($UROCE daemon status)" "uroced is not running"
$UROCE daemon status >/dev/null && fail "status exit code when not running"
$UROCE daemon stop 2>/dev/null || fail "stop when not running"

# Help and errors.
$UROCE link help | grep -q '^Usage: uroce link show' || fail "link help"
$UROCE link help | grep -q 'uroce link add NAME \[type uroce\] netdev NETDEV' || fail "link help add"
$UROCE link frob 2>"$tmp/err" && fail "unknown link command accepted"
grep -q "^Unknown command 'frob'" "$tmp/err" || fail "unknown command message"
$UROCE link add 2>&1 | grep -q '^Please provide a link name' || fail "add without name"
$UROCE link add x 2>&1 | grep -q '^Please provide a net device name' || fail "add without netdev"
$UROCE link add x type rxe netdev lo 2>/dev/null && fail "type rxe accepted"
$UROCE link show nosuch 2>&1 | grep -qx 'Wrong device name' || fail "show unknown"
$UROCE link show uroce0/2 2>/dev/null && fail "port 2 accepted"
$UROCE daemon help | grep -q '^Usage: uroce daemon start' || fail "daemon help"
$UROCE stat help | grep -q '^Usage: uroce stat show' || fail "stat help"

# Prefixes as iproute2 accepts them; `link` alone shows (and autostarts).
expect_eq "link sh" "$($UROCE link sh)" "link uroce0/1 state ACTIVE physical_state LINK_UP netdev lo"
expect_eq "link" "$($UROCE link)" "$($UROCE link show)"
expect_eq "link show uroce0/1" "$($UROCE link show uroce0/1)" "$($UROCE link show)"

# The same-host link option: set, shown with -d, kept over a daemon restart (the state
# file), bad values refused.
expect_eq "loopback default" "$($UROCE link show uroce0 -d | grep loopback)" "    loopback shm"
$UROCE link set uroce0 loopback udp || fail "link set loopback udp"
expect_eq "loopback set" "$($UROCE link show uroce0 -d | grep loopback)" "    loopback udp"
$UROCE link set uroce0 loopback bogus 2>&1 | grep -q "^Unknown loopback 'bogus'" || fail "bad loopback value"
$UROCE link set uroce0 mtu 9000 2>&1 | grep -q '^Usage: uroce link set' || fail "link set without loopback"
$UROCE link set nosuch loopback udp 2>&1 | grep -qx 'Wrong device name' || fail "link set unknown device"
$UROCE daemon stop && $UROCE link show >/dev/null
expect_eq "loopback after a restart" "$($UROCE link show uroce0 -d | grep loopback)" "    loopback udp"
$UROCE link set uroce0 loopback shm || fail "link set loopback shm"
expect_eq "loopback back" "$($UROCE link show uroce0 -d | grep loopback)" "    loopback shm"

# A client holding a QPN shows in status and stat; SIGKILL returns the QPN.
mkfifo "$tmp/hold"
$IPC_TEST holder uroce0 <"$tmp/hold" >"$tmp/qpn" &
holder=$!
exec 3>"$tmp/hold"
wait_for 10 test -s "$tmp/qpn" || fail "holder got no QPN"
$UROCE daemon status >"$tmp/st"
grep -q "^client pid $holder uid [0-9]* qpns 1 " "$tmp/st" || fail "holder in status: $(cat "$tmp/st")"
expect_eq "total line" "$(grep '^total' "$tmp/st" | field qpns)" 1
expect_eq "stat in use" "$($UROCE stat show link uroce0 | field qpns_in_use)" 1
expect_eq "stat alloc" "$($UROCE stat show link uroce0/1 | field qpn_alloc)" 1
# The holder registered data-path counters: its context's and its QP's.
q=$(cat "$tmp/qpn")
expect_eq "stat context counters" "$($UROCE stat show | grep " pid $holder ")" \
	"link uroce0/1 pid $holder tx_packets 11"
expect_eq "stat device totals" "$($UROCE stat show | grep " total ")" "link uroce0/1 total tx_packets 11"
expect_eq "stat qp" "$($UROCE stat show qp)" "link uroce0/1 lqpn $q type RC pid $holder sent 3"
expect_eq "stat qp link" "$($UROCE stat show qp link uroce0/1)" "$($UROCE stat show qp)"
# Filters as `rdma statistic qp show`: lqpn, pid, with link, in any order.
expect_eq "stat qp lqpn" "$($UROCE stat show qp lqpn "$q")" "$($UROCE stat show qp)"
expect_eq "stat qp pid link" "$($UROCE stat show qp pid "$holder" link uroce0)" "$($UROCE stat show qp)"
expect_eq "stat qp other lqpn" "$($UROCE stat show qp lqpn $((q + 1)))" ""
expect_eq "stat qp other pid" "$($UROCE stat show qp pid $((holder + 100000)))" ""
$UROCE stat show qp lqpn x 2>&1 | grep -qx 'Wrong lqpn value x' || fail "bad lqpn value"
$UROCE stat show qp pid 2>&1 | grep -qx 'Wrong pid value (none)' || fail "pid without value"
$UROCE stat show lqpn 5 2>&1 | grep -qx "Unknown parameter 'lqpn'." || fail "lqpn outside qp"
$UROCE stat show qp lqpn 5 >/dev/null 2>&1 && $UROCE stat show qp lqpn x >/dev/null 2>&1 &&
	fail "exit status of a bad filter"
kill -KILL "$holder"
wait "$holder" 2>/dev/null
exec 3>&-
wait_for 10 sh -c "$UROCE daemon status | grep -q '^total devices 1 clients 1 qpns 0'" ||
	fail "QPN of the killed client not back: $($UROCE daemon status)"
expect_eq "stat reclaimed" "$($UROCE stat show link uroce0 | field qpn_reclaimed)" 1
expect_eq "stat qp after kill" "$($UROCE stat show qp)" ""
# What the killed client counted stays in the device's totals.
expect_eq "stat totals after kill" "$($UROCE stat show | grep -c " pid ")" 0
expect_eq "stat totals after kill" "$($UROCE stat show link uroce0 | grep " total ")" \
	"link uroce0/1 total tx_packets 11"
$UROCE stat show link nosuch 2>&1 | grep -qx 'Wrong device name' || fail "stat unknown device"

# run: LD_LIBRARY_PATH gets the library directory next to the tool, first.
libdir=$(cd "$(dirname "$UROCE")/../lib" 2>/dev/null && pwd -P)
expect_eq "run LD_LIBRARY_PATH" "$(LD_LIBRARY_PATH=/old $UROCE run sh -c 'echo $LD_LIBRARY_PATH')" \
	"$libdir:/old"
expect_eq "run keeps args" "$($UROCE run -- echo a 'b c')" "a b c"
$UROCE run sh -c 'exit 7'
expect_eq "run exit status" "$?" 7
$UROCE run /nonexistent/cmd 2>/dev/null
expect_eq "run missing command" "$?" 127
$UROCE run 2>&1 | grep -q '^Please provide a command' || fail "run without command"
# run starts the daemon if needed.
$UROCE daemon stop
$UROCE run true || fail "run true"
$UROCE daemon status >/dev/null || fail "run did not start the daemon"

finish
