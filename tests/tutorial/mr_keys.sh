#!/bin/sh
# mr_keys.sh UROCE MR_KEYS MODE — docs/tutorial/02-memory-keys.md, checked.  Run by nsrun.sh.
#   shm  the default path: the program's own verdict (exit 0) and the lines the chapter shows;
#   udp  UROCE_LINK=udp UROCE_NETIO_GSO=0 under dumpcap: the same, and on the wire each WRITE
#        answered as the chapter says (ACK, NAK REMOTE_ACCESS_ERR x4, ACK, NAK), and nothing
#        at all for the SEND whose lkey is of another PD (caught before it leaves).
set -u
UROCE=$1
PROG=$2
MODE=$3
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $MODE in
shm) ;;
udp) export UROCE_LINK=udp UROCE_NETIO_GSO=0
     capture_start "$tmp/keys.pcap" ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
timeout 60 "$UROCE" run "$PROG" >"$tmp/out" 2>&1 || fail "mr_keys exited $?"
[ "$MODE" = udp ] && capture_stop
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

if [ "$MODE" = udp ]; then
	"$UROCE" decode "$tmp/keys.pcap" >"$tmp/decode" || fail "uroce decode"
	cat "$tmp/decode"
	got=$(awk '$6 ~ /^RC_/ { print $6 ($12 == "NAK" ? "/" $13 : "") }' "$tmp/decode" | tr '\n' ' ')
	want="RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR"
	want="$want RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR"
	want="$want RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE"
	want="$want RC_RDMA_WRITE_ONLY RC_ACKNOWLEDGE/REMOTE_ACCESS_ERR "
	expect_eq "the packets" "$got" "$want"
fi
finish
