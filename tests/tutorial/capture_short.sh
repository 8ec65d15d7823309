#!/bin/sh
# capture_short.sh UROCE HELLO_RDMA [late|late-udp] — `uroce capture` keeps the packets of programs that
# live only milliseconds (src/daemon/capture.c's orphans, src/cli/cmd_capture.c's asking
# period).  Five runs of chapter 1's program, one after the other, each started straight
# away (no wait for the capture to find the processes, unlike hello_rdma.sh), under one
# capture: it must hold exactly 5 x 4 packets, each once (no copy written twice, none
# lost), every ICRC good, as many as shm_tx_packets counted.  late: the capture asks uroced for
# new rings only at its start and its end (UROCE_CAPTURE_ASK_MS=600000), so every ring is
# handed over after its process ended, all at once when the capture stops, as for a
# capture starved of CPU while the programs ran; late-udp: the same over the UDP link
# (UROCE_LINK=udp), counted by tx_packets.  Run by nsrun.sh.
set -u
UROCE=$1
PROG=$2
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
RUNS=5
counter=shm_tx_packets
case ${3:-} in
"") ;;
late) export UROCE_CAPTURE_ASK_MS=600000 ;;
late-udp) export UROCE_CAPTURE_ASK_MS=600000 UROCE_LINK=udp
	  counter=tx_packets ;;
*) echo "unknown mode $3"; exit 2 ;;
esac

ucap_start "$tmp/short.pcap"
for i in $(seq $RUNS); do
	port=$((18610 + i))
	timeout 60 "$UROCE" run "$PROG" -p $port >"$tmp/srv.$i" 2>&1 &
	spid=$!
	listening() { ss -ltnH "sport = :$port" | grep -q LISTEN; }
	wait_for 20 listening || fail "run $i: the server never listened on $port"
	timeout 60 "$UROCE" run "$PROG" -p $port 127.0.0.1 >"$tmp/cli.$i" 2>&1 || fail "run $i: the client exited $?"
	wait $spid || fail "run $i: the server exited $?"
	grep -q 'client: done' "$tmp/cli.$i" || fail "run $i: the client did not finish"
done
ucap_stop
expect_eq "packets captured ($RUNS runs of 4)" "$ucap_n" $((RUNS * 4))
expect_eq "$counter" "$(total $counter)" $((RUNS * 4))
expect_eq "tshark's BTH opcodes" "$(ucap_opcodes "$tmp/short.pcap")" \
	"$(for i in $(seq $RUNS); do printf '4 17 10 17 '; done)"
finish
