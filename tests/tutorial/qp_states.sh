#!/bin/sh
# qp_states.sh UROCE QP_STATES — docs/tutorial/03-qp-states.md, checked.  Run by nsrun.sh.
# The program's verdict, and every line the chapter shows (the QP numbers masked; the two
# completions of the SEND in either order).
set -u
UROCE=$1
PROG=$2
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 60 "$UROCE" run "$PROG" >"$tmp/raw" 2>&1 || fail "qp_states exited $?"
cat "$tmp/raw"
sed -E 's/0x[0-9a-f]{6}/QPN/g' "$tmp/raw" >"$tmp/out"
while IFS= read -r line; do
	expect_line "$tmp/out" "$line"
done <<'LINES'
created QP A QPN and QP B QPN; A is in RESET
post_recv in RESET                                             Invalid argument
post_send in RESET                                             Invalid argument
RESET -> RTR (skipping INIT)                                   Invalid argument
RESET -> INIT without IBV_QP_PORT                              Invalid argument
RESET -> INIT with the RTR attribute IBV_QP_PATH_MTU too       Invalid argument
RESET -> INIT (port, P_Key index, access flags)                ok
post_recv in INIT                                              ok
post_send in INIT                                              Invalid argument
INIT -> RTS (skipping RTR)                                     Invalid argument
INIT -> RTR without IBV_QP_DEST_QPN                            Invalid argument
INIT -> RTR (peer GID and QPN, its PSN, path MTU, ...)         ok
post_send in RTR                                               Invalid argument
RTR -> RTS without IBV_QP_SQ_PSN                               Invalid argument
RTR -> RTS (own PSN, ACK timeout, retry counts)                ok
-- RTS: dest QPN QPN, rq_psn 0x1000, sq_psn 0x2000, path MTU 1024, timeout 14
post_send in RTS                                               ok
  completion on B: RECV success
  completion on A: SEND success
RTS -> ERR                                                     ok
  completion on A: receive posted in INIT, Work Request Flushed Error
post_send in ERR (completes at once, flushed)                  ok
  completion on A: that send, Work Request Flushed Error
ERR -> RTS                                                     Invalid argument
ERR -> RESET                                                   ok
RESET -> INIT again                                            ok
A is in INIT
every step went as expected
LINES
grep -q UNEXPECTED "$tmp/out" && fail "a step did not go as expected"
finish
