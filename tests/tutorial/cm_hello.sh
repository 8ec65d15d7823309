#!/bin/sh
# cm_hello.sh UROCE CM_HELLO MODE — docs/tutorial/09-connection-setup.md, checked.  Run by
# nsrun.sh.
#   shm  the default, under `uroce capture`: both sides' events in order, the QPs in RTS,
#        the private data and the message; in the capture the CM's five MADs on QP1 (REQ
#        with the client's QPN and the service ID of TCP port 18700, REP with the server's
#        QPN, RTU, DREQ, DREP), which uroced sent over UDP, and between the RTU and the DREQ
#        the SEND and its ACK between the two QPs, which took the shared-memory link;
#   late the same, the capture asking uroced for new rings only at its start and its end
#        (UROCE_CAPTURE_ASK_MS): the programs' rings come after the daemon's, when the CM's
#        MADs are old, and the capture must still write all seven in time order;
#   udp  UROCE_LINK=udp UROCE_NETIO_GSO=0, under dumpcap on lo: the same seven packets, all
#        of them on the wire.
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
late) export UROCE_CAPTURE_ASK_MS=600000
      late=0.3   # the MADs then are older than what the capture holds back (20 ms)
      MODE=shm ;;
udp) export UROCE_LINK=udp UROCE_NETIO_GSO=0 ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
"$UROCE" daemon start >/dev/null || fail "uroce daemon start"
if [ "$MODE" = udp ]; then capture_start "$tmp/cm.pcap"; else ucap_start "$tmp/cm.pcap"; fi
timeout 60 "$UROCE" run "$PROG" >"$tmp/srv" 2>&1 &
spid=$!
listening() { grep -q '^server: listening on port 18700$' "$tmp/srv"; }
wait_for 20 listening || fail "the server never listened"
timeout 60 "$UROCE" run "$PROG" 127.0.0.1 >"$tmp/cli" 2>&1 || fail "the client exited $?"
wait $spid || fail "the server exited $?"
sleep "${late:-0}"
if [ "$MODE" = udp ]; then capture_stop; else ucap_stop; fi
echo "-- server"; cat "$tmp/srv"
echo "-- client"; cat "$tmp/cli"
sed -E 's/0x[0-9a-f]{6}/QPN/g' "$tmp/srv" >"$tmp/s"
sed -E 's/0x[0-9a-f]{6}/QPN/g' "$tmp/cli" >"$tmp/c"
expect_eq "the server's lines" "$(cat "$tmp/s")" "server: listening on port 18700
server: event RDMA_CM_EVENT_CONNECT_REQUEST
server: the request's private data: \"hi from the client\"
server: device uroce0, QP QPN in INIT
server: event RDMA_CM_EVENT_ESTABLISHED
server: QP QPN is in RTS
server: received a SEND of 22 bytes: \"hello through rdma_cm\"
server: event RDMA_CM_EVENT_DISCONNECTED
server: done"
expect_eq "the client's lines" "$(cat "$tmp/c")" "client: event RDMA_CM_EVENT_ADDR_RESOLVED
client: event RDMA_CM_EVENT_ROUTE_RESOLVED
client: device uroce0, QP QPN in INIT
client: event RDMA_CM_EVENT_ESTABLISHED
client: QP QPN is in RTS
client: SEND completed
client: event RDMA_CM_EVENT_DISCONNECTED
client: done"

sqp=$(sed -n 's/^server: QP 0x0*\([0-9a-f]*\) is in RTS$/\1/p' "$tmp/srv")
cqp=$(sed -n 's/^client: QP 0x0*\([0-9a-f]*\) is in RTS$/\1/p' "$tmp/cli")
"$UROCE" decode "$tmp/cm.pcap" >"$tmp/decode" || fail "uroce decode"
echo "-- uroce decode"; cat "$tmp/decode"
cm=$(awk '$6 == "UD_SEND_ONLY" && $8 == "0x000001" { for (i = 1; i < NF; i++) if ($i == "CM") print $(i + 1) }' "$tmp/decode" | tr '\n' ' ')
expect_eq "the CM's MADs" "$cm" "REQ REP RTU DREQ DREP "
expect_match "$tmp/decode" "\\| CM REQ .* sid=0x0*106490c\\(tcp:18700\\) qpn=0x$cqp "
expect_match "$tmp/decode" "\\| CM REP .* qpn=0x$sqp "
cm=$(awk '$6 == "UD_SEND_ONLY" && $8 == "0x000001" { for (i = 1; i < NF; i++) if ($i == "CM") { print $(i + 1); next } } $6 ~ /^RC_/ { print $6 }' "$tmp/decode" | tr '\n' ' ')
expect_eq "the packets" "$cm" "REQ REP RTU RC_SEND_ONLY RC_ACKNOWLEDGE DREQ DREP "
rc=$(awk '$6 ~ /^RC_/ { print $6, $8 }' "$tmp/decode" | tr '\n' ';')
expect_eq "the RC packets" "$rc" "RC_SEND_ONLY 0x$(printf %06x 0x$sqp);RC_ACKNOWLEDGE 0x$(printf %06x 0x$cqp);"
if [ "$MODE" = shm ]; then
	expect_eq "shm_tx_packets" "$(total shm_tx_packets)" 2
	expect_eq "tx_packets (UDP)" "$(total tx_packets)" 0
fi
finish
