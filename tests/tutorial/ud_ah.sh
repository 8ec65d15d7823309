#!/bin/sh
# ud_ah.sh UROCE UD_AH MODE — docs/tutorial/04-ud.md, checked.  Run by nsrun.sh.
#   shm  the program's verdict and the lines the chapter shows (QP numbers masked), then the
#        three drops in the device's totals of `uroce stat show` (wrong Q_Key, longer than
#        the MTU, no room for the GRH), one each;
#   udp  the same over UDP under dumpcap: on the wire, the UD SEND ONLY packets with their
#        DETH (the wrong Q_Key among them), none for the over-long send, and no ACK at all.
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
     capture_start "$tmp/ud.pcap" ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
timeout 60 "$UROCE" run "$PROG" >"$tmp/raw" 2>&1 || fail "ud_ah exited $?"
[ "$MODE" = udp ] && capture_stop
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

if [ "$MODE" = udp ]; then
	"$UROCE" decode "$tmp/ud.pcap" >"$tmp/decode" || fail "uroce decode"
	cat "$tmp/decode"
	# every packet a UD SEND ONLY: A->B 100, B->A 16, A->B wrong Q_Key, A->B x2 100
	expect_eq "UD packets" "$(grep -c ' UD_SEND_ONLY ' "$tmp/decode")" 5
	expect_eq "other packets" "$(awk '$6 ~ /_/ && $6 != "UD_SEND_ONLY"' "$tmp/decode" | wc -l)" 0
	expect_eq "packets with the wrong Q_Key" "$(grep -c 'qkey 0x11111112' "$tmp/decode")" 1
fi
finish
