#!/bin/sh
# ops.sh UROCE OPS MODE — docs/tutorial/05-operations.md, checked.  Run by nsrun.sh.
# The program runs under `uroce capture`; MODE:
#   shm  the default shared-memory link: every line the chapter shows, and the capture holds
#        the chapter's 18 packets in order (opcode, PSN and payload length as `uroce decode`
#        reads them, the BTH opcode numbers as tshark reads them, the RETH lengths, the
#        atomics' original values), every ICRC verified by scapy (check_pcap.py), as many
#        as shm_tx_packets says were sent and none sent over UDP;
#   udp  the same with UROCE_LINK=udp: the same packets, now counted by tx_packets.
set -u
UROCE=$1
PROG=$2
MODE=$3
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $MODE in
shm) link=shm_tx_packets other=tx_packets ;;
udp) export UROCE_LINK=udp
     link=tx_packets other=shm_tx_packets ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
ucap_start "$tmp/ops.pcap"
timeout 60 "$UROCE" run "$PROG" >"$tmp/raw" 2>&1 || fail "ops exited $?"
ucap_stop
cat "$tmp/raw"
while IFS= read -r line; do
	expect_line "$tmp/raw" "$line"
done <<'LINES'
SEND                  A: SEND success; B: RECV 100 bytes
SEND_WITH_IMM         A: SEND success; B: RECV 10 bytes, immediate 0x1001
RDMA_WRITE            A: RDMA_WRITE success; B: no completion
RDMA_WRITE_WITH_IMM   A: RDMA_WRITE success; B: RECV_RDMA_WITH_IMM 10 bytes, immediate 0x1003
RDMA_READ             A: RDMA_READ success; B: no completion; A now holds B's "ABCDEF..."
ATOMIC_FETCH_AND_ADD  A: FETCH_ADD success; B: no completion; original 40, B's word now 42
ATOMIC_CMP_AND_SWP    A: COMP_SWAP success; B: no completion; original 42, B's word now 7
every operation went as expected
LINES
expect_eq "packets captured" "$ucap_n" 18
expect_match "$tmp/ops.pcap.chk" '^packets 18 icrc_ok 18 icrc_bad 0 '
expect_eq "packets sent ($link)" "$(total $link)" 18
expect_eq "packets sent on the other link ($other)" "$(total $other)" 0
"$UROCE" decode "$tmp/ops.pcap" >"$tmp/decode" || fail "uroce decode"
cat "$tmp/decode"
# opcode, PSN, payload length
got=$(awk '$6 ~ /^RC_/ { for (i = 7; i < NF; i++) if ($i == "payload") p = $(i + 1); print $6, $10, p }' "$tmp/decode")
want="RC_SEND_ONLY 0x000000 100
RC_ACKNOWLEDGE 0x000000 0
RC_SEND_ONLY_WITH_IMMEDIATE 0x000001 10
RC_ACKNOWLEDGE 0x000001 0
RC_RDMA_WRITE_FIRST 0x000002 1024
RC_RDMA_WRITE_MIDDLE 0x000003 1024
RC_RDMA_WRITE_LAST 0x000004 952
RC_ACKNOWLEDGE 0x000004 0
RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE 0x000005 10
RC_ACKNOWLEDGE 0x000005 0
RC_RDMA_READ_REQUEST 0x000006 0
RC_RDMA_READ_RESPONSE_FIRST 0x000006 1024
RC_RDMA_READ_RESPONSE_MIDDLE 0x000007 1024
RC_RDMA_READ_RESPONSE_LAST 0x000008 452
RC_FETCH_ADD 0x000009 0
RC_ATOMIC_ACKNOWLEDGE 0x000009 0
RC_COMPARE_SWAP 0x00000a 0
RC_ATOMIC_ACKNOWLEDGE 0x00000a 0"
expect_eq "the packets (opcode, PSN, payload)" "$got" "$want"
expect_match "$tmp/decode" 'RC_RDMA_WRITE_FIRST .* RETH va 0x[0-9a-f]+ rkey 0x[0-9a-f]+ dlen 3000 '
expect_match "$tmp/decode" 'RC_RDMA_READ_REQUEST .* RETH va 0x[0-9a-f]+ rkey 0x[0-9a-f]+ dlen 2500 '
expect_match "$tmp/decode" 'RC_ATOMIC_ACKNOWLEDGE .* AtomicAckETH orig 0x28 '
expect_match "$tmp/decode" 'RC_ATOMIC_ACKNOWLEDGE .* AtomicAckETH orig 0x2a '
expect_match "$tmp/decode" '18 RoCEv2 packets \(ICRC ok 18, bad 0; malformed 0\)'
expect_eq "tshark's BTH opcodes" "$(ucap_opcodes "$tmp/ops.pcap")" "4 17 5 17 6 7 8 17 11 17 12 13 14 15 20 18 19 18 "
finish
