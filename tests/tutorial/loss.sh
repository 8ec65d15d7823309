#!/bin/sh
# loss.sh UROCE LOSS MODE — docs/tutorial/08-loss.md, checked.  Run by nsrun.sh.
#   clean   no UROCE_FAULT: the RNR cases; RC, UC and UD all deliver 100 of 100; in
#           `uroce stat show` RNR NAKs sent and received and their retransmissions, no
#           sequence NAK, nothing dropped by fault injection;
#   faults  UROCE_FAULT=drop=0.05,seed=8 on the shared-memory link: RC still 100 of 100 in
#           order and intact, UC and UD fewer (each intact); retransmissions, sequence NAKs
#           sent and received, UC messages lost, the link's fault drops, all counted;
#   udp     the same over UDP (UROCE_LINK=udp).
# Every run is under `uroce capture`: every ICRC verifies (check_pcap.py), the frames are
# as many as the link's sent-packet counter says (a packet the fault injection drops is
# neither sent nor captured), the RNR NAKs and PSN sequence NAKs in the capture are as many
# as the requesters received (rnr_naks_rx, seq_naks_rx), and RC requests appear more than
# once (the same opcode and PSN to the same QP): as often as `retransmissions` says without
# faults, at most that often with them (a resent copy may be dropped too).
set -u
UROCE=$1
PROG=$2
MODE=$3
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sent=shm_tx_packets
case $MODE in
clean) ;;
faults) export UROCE_FAULT=drop=0.05,seed=8 ;;
udp) export UROCE_FAULT=drop=0.05,seed=8 UROCE_LINK=udp
     sent=tx_packets ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
ucap_start "$tmp/loss.pcap"
timeout 120 "$UROCE" run "$PROG" >"$tmp/out" 2>&1 || fail "loss exited $?"
ucap_stop
cat "$tmp/out"
expect_line "$tmp/out" "   rnr_retry 7: after 50 ms the SEND has not completed (being retried); posting the receive now"
expect_line "$tmp/out" "   rnr_retry 7: the SEND completed: success"
expect_line "$tmp/out" "   rnr_retry 0: the SEND completed: RNR retry counter exceeded"
expect_line "$tmp/out" "RC: 100 of 100 sends completed successfully; 100 messages received, in order, each intact"
expect_line "$tmp/out" "every step went as expected"
received() { sed -n "s/^$1: 100 of 100 sends completed successfully; \([0-9]*\) messages received, in order, each intact$/\1/p" "$tmp/out"; }
uc=$(received UC)
ud=$(received UD)
"$UROCE" stat show >"$tmp/stat" || fail "uroce stat show"
tot=$(grep '^link uroce0/1 total ' "$tmp/stat")
c() { echo "$tot" | field "$1"; }
echo "UC received $uc, UD received $ud; retransmissions $(c retransmissions) seq_naks_tx $(c seq_naks_tx) seq_naks_rx $(c seq_naks_rx) rnr_naks_tx $(c rnr_naks_tx) rnr_naks_rx $(c rnr_naks_rx) drop_uc_msg_lost $(c drop_uc_msg_lost) shm_fault_drop $(c shm_fault_drop) fault_drop $(c fault_drop)"
gt() { [ "${2:-0}" -gt "$3" ] || fail "$1: $2, want more than $3"; }
lt() { [ "${2:-999}" -lt "$3" ] || fail "$1: $2, want less than $3"; }
gt "RNR NAKs sent" "$(c rnr_naks_tx)" 1
gt "RNR NAKs received" "$(c rnr_naks_rx)" 1
gt "retransmissions" "$(c retransmissions)" 0
case $MODE in
clean)
	expect_eq "UC received" "$uc" 100
	expect_eq "UD received" "$ud" 100
	expect_eq "sequence NAKs sent" "$(c seq_naks_tx)" 0
	expect_eq "fault drops" "$(c shm_fault_drop)/$(c fault_drop)" 0/0 ;;
*)
	lt "UC received" "$uc" 100
	lt "UD received" "$ud" 100
	gt "sequence NAKs sent" "$(c seq_naks_tx)" 0
	gt "sequence NAKs received" "$(c seq_naks_rx)" 0
	gt "UC messages lost" "$(c drop_uc_msg_lost)" 0
	if [ "$MODE" = faults ]; then
		gt "the link's fault drops" "$(c shm_fault_drop)" 0
	else
		gt "fault drops" "$(c fault_drop)" 0
	fi ;;
esac
"$UROCE" decode "$tmp/loss.pcap" >"$tmp/decode" || fail "uroce decode"
echo "-- uroce decode: the first NAKs"
grep -E 'NAK' "$tmp/decode" | head -5
tail -1 "$tmp/decode"
rnr=$(grep -c 'AETH RNR_NAK ' "$tmp/decode")
seq=$(grep -c 'AETH NAK PSN_SEQ_ERR ' "$tmp/decode")
# RC requests sent more than once: the copies beyond the first of each (dest QP, PSN, opcode)
again=$(awk '$6 ~ /^RC_(SEND|RDMA)/ { print $8, $10, $6 }' "$tmp/decode" | sort | uniq -c |
	awk '$1 > 1 { n += $1 - 1 } END { print n + 0 }')
echo "capture: $ucap_n frames, RNR NAKs $rnr, sequence NAKs $seq, RC requests again $again"
expect_eq "frames against $sent" "$ucap_n" "$(c $sent)"
expect_eq "RNR NAKs in the capture against rnr_naks_rx" "$rnr" "$(c rnr_naks_rx)"
expect_eq "sequence NAKs in the capture against seq_naks_rx" "$seq" "$(c seq_naks_rx)"
gt "RC requests seen more than once" "$again" 0
if [ "$MODE" = clean ]; then
	expect_eq "RNR NAKs in the capture against rnr_naks_tx" "$rnr" "$(c rnr_naks_tx)"
	expect_eq "RC requests again against retransmissions" "$again" "$(c retransmissions)"
else
	gt "sequence NAKs in the capture" "$seq" 0
	lt "RC requests again (at most retransmissions + 1)" "$again" $(( $(c retransmissions) + 1 ))
fi
finish
