#!/bin/sh
# cq_events.sh UROCE CQ_EVENTS — docs/tutorial/06-cq-events.md, checked.  Run by nsrun.sh.
# The program's verdict and every line the chapter shows (the channel's fd number masked).
set -u
UROCE=$1
PROG=$2
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 60 "$UROCE" run "$PROG" >"$tmp/raw" 2>&1 || fail "cq_events exited $?"
cat "$tmp/raw"
sed -E 's/channel fd [0-9]+/channel fd N/' "$tmp/raw" >"$tmp/out"
while IFS= read -r line; do
	expect_line "$tmp/out" "$line"
done <<'LINES'
completion channel fd N; B's receive CQ reports to it
   found a RECV (one CPU busy meanwhile)
   event within 300 ms: no; ibv_poll_cq then finds 1 completion(s)
   event within 5 s: yes; ibv_poll_cq then finds 1 completion(s)
   event within 300 ms: no; ibv_poll_cq then finds 2 completion(s)
   a plain SEND: event within 300 ms: no
   a SEND with IBV_SEND_SOLICITED: event within 5 s: yes; ibv_poll_cq then finds 2 completion(s)
   woke after the SEND; ibv_poll_cq then finds 1 completion(s)
acknowledging 3 event(s)
every step went as expected
LINES
grep -q UNEXPECTED "$tmp/out" && fail "a step did not go as expected"
finish
