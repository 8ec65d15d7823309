#!/bin/sh
# ud_ah.sh UROCE UD_AH MODE — docs/tutorial/04-ud.md, checked.  Run by nsrun.sh.
#   shm  the program's verdict and the lines the chapter shows (QP numbers masked), then the
#        three drops in the device's totals of `uroce stat show` (wrong Q_Key, longer than
#        the MTU, no room for the GRH), one each;
#        and, the program having run under `uroce capture`, the UD SEND ONLY packets with
#        their DETH (the wrong Q_Key among them), none for the over-long send, no ACK at
#        all: 5 frames, every ICRC verified (check_pcap.py), tshark's opcode 100 each, as
#        many as shm_tx_packets counted;
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
ucap_start "$tmp/ud.pcap"
timeout 60 "$UROCE" run "$PROG" >"$tmp/raw" 2>&1 || fail "ud_ah exited $?"
ucap_stop
cat "$tmp/raw"
sed -E 's/0x[0-9a-f]{6}(,| |$)/QPN\1/g' "$tmp/raw" >"$tmp/out"
while IFS= read -r line; do
	expect_line "$tmp/out" "$line"
done <<'LINES'
device uroce0 port 1: active MTU 4096, 32 GID table entries
  GID index 0: ::ffff:127.0.0.1, RoCE v2, netdev ifindex 1
UD QP A QPN, UD QP B QPN, both with Q_Key 0x11111111
AH to ::ffff:127.0.0.1 (GID index 0 as source, hop limit 64)
A: send completed: success
B: received 140 bytes (40 of GRH + 100), from QP QPN, GRH present: "a datagram from A"
B: GRH area bytes 0-19 all zero: yes; bytes 20-39: IPv4 header, version 4, protocol 17 (UDP), 127.0.0.1 -> 127.0.0.1, TTL 64
A: received 56 bytes from QP QPN through the AH made from B's completion: "B's answer"
A: send with Q_Key 0x11111112 completed: success
A: send of 4097 bytes (MTU + 1) completed: success
B: 100 bytes into a 100-byte receive buffer: local length error
every step went as expected
LINES
expect_eq "datagrams B did not receive" "$(grep -cxF 'B: nothing received within 500 ms' "$tmp/out")" 2
# B's QPN is the source of A's answer
qa=$(sed -n 's/^UD QP A \(0x[0-9a-f]*\),.*/\1/p' "$tmp/raw")
qb=$(sed -n 's/^UD QP A 0x[0-9a-f]*, UD QP B \(0x[0-9a-f]*\),.*/\1/p' "$tmp/raw")
expect_match "$tmp/raw" "^B: received 140 bytes \\(40 of GRH \\+ 100\\), from QP $qa,"
expect_match "$tmp/raw" "^A: received 56 bytes from QP $qb "

"$UROCE" stat show >"$tmp/stat" || fail "uroce stat show"
tot=$(grep '^link uroce0/1 total ' "$tmp/stat")
for c in drop_qkey drop_ud_too_long drop_ud_rx_len; do
	expect_eq "uroce stat: $c" "$(echo "$tot" | field $c)" 1
done
expect_eq "uroce stat: drop_no_rwqe" "$(echo "$tot" | field drop_no_rwqe)" 0

"$UROCE" decode "$tmp/ud.pcap" >"$tmp/decode" || fail "uroce decode"
cat "$tmp/decode"
# every packet a UD SEND ONLY: A->B 100, B->A 16, A->B wrong Q_Key, A->B x2 100
got=$(awk '$6 ~ /_/ { for (i = 7; i < NF; i++) { if ($i == "qkey") k = $(i + 1); if ($i == "payload") p = $(i + 1) }
	print $6, k, p }' "$tmp/decode")
want="UD_SEND_ONLY 0x11111111 100
UD_SEND_ONLY 0x11111111 16
UD_SEND_ONLY 0x11111112 100
UD_SEND_ONLY 0x11111111 100
UD_SEND_ONLY 0x11111111 100"
expect_eq "the packets (opcode, Q_Key, payload)" "$got" "$want"
expect_match "$tmp/decode" " UD_SEND_ONLY qp $qb psn 0x000000 DETH qkey 0x11111111 srcqp $qa payload 100 "
expect_match "$tmp/decode" " UD_SEND_ONLY qp $qa psn 0x000000 DETH qkey 0x11111111 srcqp $qb payload 16 "
expect_eq "packets captured" "$ucap_n" 5
expect_match "$tmp/ud.pcap.chk" '^packets 5 icrc_ok 5 icrc_bad 0 '
expect_eq "packets sent ($sent)" "$(total $sent)" 5
expect_eq "tshark's BTH opcodes" "$(ucap_opcodes "$tmp/ud.pcap")" "100 100 100 100 100 "
finish
