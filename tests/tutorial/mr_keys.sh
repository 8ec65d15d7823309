#!/bin/sh
# mr_keys.sh UROCE MR_KEYS MODE — docs/tutorial/02-memory-keys.md, checked.  Run by nsrun.sh.
# The program runs under `uroce capture`; MODE:
#   shm  the default path (the shared-memory link): the program's own verdict (exit 0), the
#        lines the chapter shows, and in the capture each WRITE answered as the chapter says
#        (ACK, NAK REMOTE_ACCESS_ERR x4, ACK, NAK), nothing at all for the SEND whose lkey is
#        of another PD (caught before it leaves): 14 frames, every ICRC verified
#        (check_pcap.py), tshark's opcodes, as many as shm_tx_packets counted;
#   udp  the same with UROCE_LINK=udp (counted by tx_packets).
set -u
UROCE=$1
PROG=$2
MODE=$3
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $MODE in
shm) sent=shm_tx_packets ;;
udp) export UROCE_LINK=udp
     sent=tx_packets ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
ucap_start "$tmp/keys.pcap"
timeout 60 "$UROCE" run "$PROG" >"$tmp/out" 2>&1 || fail "mr_keys exited $?"
ucap_stop
cat "$tmp/out"

count() { grep -cxF -- "$1" "$tmp/out"; }
expect_line "$tmp/out" "ibv_reg_mr with REMOTE_WRITE but not LOCAL_WRITE: Invalid argument"
expect_line "$tmp/out" '  target buffer now holds "sixty-four bytes from the requester"'
expect_eq "successful WRITEs" "$(count '  completion: success')" 2
expect_eq "WRITEs refused by the target" "$(count '  completion: remote access error')" 5
expect_eq "the SEND with a foreign lkey" "$(count '  completion: local protection error')" 1
expect_eq "pairs both in Error" "$(count '  requester QP is now ERR, target QP ERR')" 5
expect_eq "the target untouched by the local error" "$(count '  requester QP is now ERR, target QP RTS')" 1
expect_eq "access events on the target" \
	"$(count '  async event "local access violation work queue error" on the target QP')" 5
expect_line "$tmp/out" '  the 32 bytes inside the region are untouched'
expect_line "$tmp/out" "every case ended as expected"

"$UROCE" decode "$tmp/keys.pcap" >"$tmp/decode" || fail "uroce decode"
cat "$tmp/decode"
got=$(awk '$6 ~ /^RC_/ { print $6 ($12 == "NAK" ? "/" $13 : "") }' "$tmp/decode" | tr '\n' ' ')
want="RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR"
want="$want RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR"
want="$want RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE"
want="$want RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR "
expect_eq "the packets" "$got" "$want"
expect_eq "packets captured" "$ucap_n" 14
expect_match "$tmp/keys.pcap.chk" '^packets 14 icrc_ok 14 icrc_bad 0 '
expect_eq "packets sent ($sent)" "$(total $sent)" 14
expect_eq "tshark's BTH opcodes" "$(ucap_opcodes "$tmp/keys.pcap")" "10 17 10 17 10 17 10 17 10 17 10 17 10 17 "
finish
