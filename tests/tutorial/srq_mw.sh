#!/bin/sh
# srq_mw.sh UROCE SRQ_MW — docs/tutorial/07-srq-mw.md, checked.  Run by nsrun.sh.
# The program's verdict and every line the chapter shows (QP numbers and keys masked); the
# invalidated key is the one bound.
set -u
UROCE=$1
PROG=$2
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 60 "$UROCE" run "$PROG" >"$tmp/raw" 2>&1 || fail "srq_mw exited $?"
cat "$tmp/raw"
sed -E 's/0x[0-9a-f]+/X/g' "$tmp/raw" >"$tmp/out"
while IFS= read -r line; do
	expect_line "$tmp/out" "$line"
done <<'LINES'
1. an SRQ with room for 8 receives, shared by QPs X, X, X
   posted 4 receives to the SRQ (none to the QPs), limit 2
   receive through QP X (receiver 2) into pool buffer 0: "to receiver 2"
   receive through QP X (receiver 0) into pool buffer 1: "to receiver 0"
   receive through QP X (receiver 1) into pool buffer 2: "to receiver 1"
   async event SRQ_LIMIT_REACHED (1 receive left, limit 2): yes
2. a 64 KiB region (rkey X) and a type 2 memory window (rkey X, unbound)
   bound the window onto [region + 4096, region + 8192): BIND_MW success, rkey X
   WRITE 64 bytes at the window's start with its rkey: success; the region holds "through the window"
   SEND with Invalidate X: the target's receive says invalidated X
   WRITE with the window's rkey after that: remote access error
   WRITE of 64 bytes starting 32 bytes before the window's end: remote access error
every step went as expected
LINES
expect_eq "binds" "$(grep -c 'BIND_MW success' "$tmp/out")" 2
bound=$(sed -n 's/.*BIND_MW success, rkey \(0x[0-9a-f]*\)$/\1/p' "$tmp/raw" | head -1)
expect_line "$tmp/raw" "   SEND with Invalidate $bound: the target's receive says invalidated $bound"
grep -q UNEXPECTED "$tmp/out" && fail "a step did not go as expected"
finish
