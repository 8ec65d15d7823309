#!/bin/sh
# hello_rdma.sh UROCE HELLO_RDMA MODE — docs/tutorial/01-end-to-end.md, checked.  Run by nsrun.sh
# (a uroced of its own, a private lo).
# The pair runs under `uroce capture`; MODE:
#   shm  the default same-host path (the shared-memory link): the output the chapter shows,
#        and the capture must hold exactly the chapter's four packets (SEND ONLY, ACK, RDMA
#        WRITE ONLY, ACK) between the two QPs the programs printed, the WRITE carrying the
#        server's rkey, as `uroce decode` and tshark both read them, every ICRC good
#        (check_pcap.py), as many as shm_tx_packets counted and none over UDP;
#   udp  UROCE_LINK=udp: the same, counted by tx_packets;
#   veth two "hosts": the server in network namespace a (192.0.2.1), the client in b
#        (192.0.2.2), joined by a veth pair, each with its own uroced and a device uroce1
#        on its end (tests/daemon/lib.sh netns_veth_setup); the same checks, the capture
#        taken in a (`uroce capture -d uroce1`: what a sent and received, 2 + 2 packets).
set -u
UROCE=$1
PROG=$2
MODE=$3
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

SA=127.0.0.1 CA=127.0.0.1
set --
case $MODE in
shm) ucap_start "$tmp/hello.pcap" ;;
udp) export UROCE_LINK=udp
     ucap_start "$tmp/hello.pcap" ;;
veth) netns_veth_setup || finish
      S=$NS_A C=$NS_B SADDR=$ADDR_A SA=$ADDR_A CA=$ADDR_B
      set -- -d uroce1
      CAP=$NS_A ucap_start "$tmp/hello.pcap" -d uroce1 ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
# The pair runs straight away, as a learner runs it: the capture must keep every packet
# even though it asks uroced for new processes' rings only every 100 ms (a ring handed
# late, or after its process ended, still gives all of its packets, each once).
${S:-} timeout 60 "$UROCE" run "$PROG" "$@" -p 18600 >"$tmp/srv" 2>&1 &
spid=$!
listening() { ${S:-} ss -ltnH "sport = :18600" | grep -q LISTEN; }
wait_for 20 listening || fail "the server never listened on 18600"
${C:-} timeout 60 "$UROCE" run "$PROG" "$@" -p 18600 "${SADDR:-127.0.0.1}" >"$tmp/cli" 2>&1 ||
	fail "the client exited $?"
wait $spid || fail "the server exited $?"
echo "-- server"; cat "$tmp/srv"
echo "-- client"; cat "$tmp/cli"
ucap_stop

expect_line "$tmp/srv" 'server: received a SEND of 21 bytes: "hello over RDMA SEND"'
expect_line "$tmp/srv" "server: the client's RDMA WRITE put \"written by RDMA WRITE\" in my buffer"
expect_line "$tmp/srv" 'server: QP is ready to send (RTS)'
expect_line "$tmp/cli" 'client: SEND completed: success'
expect_line "$tmp/cli" 'client: RDMA WRITE completed: success'
expect_line "$tmp/cli" 'client: done'
dev=uroce0
[ "$MODE" = veth ] && dev=uroce1
expect_line "$tmp/srv" "server: opened device $dev"
expect_line "$tmp/cli" "client: opened device $dev"
expect_match "$tmp/srv" "^server: peer QP 0x[0-9a-f]{6} at GID ::ffff:$CA, first PSN 0x100000\$"
expect_match "$tmp/cli" "^client: peer QP 0x[0-9a-f]{6} at GID ::ffff:$SA, first PSN 0x200000\$"

expect_eq "packets captured" "$ucap_n" 4
expect_match "$tmp/hello.pcap.chk" '^packets 4 icrc_ok 4 icrc_bad 0 '
case $MODE in
shm) expect_eq "shm_tx_packets" "$(total shm_tx_packets)" 4
     expect_eq "tx_packets (UDP)" "$(total tx_packets)" 0 ;;
udp) expect_eq "tx_packets" "$(total tx_packets)" 4
     expect_eq "shm_tx_packets" "$(total shm_tx_packets)" 0 ;;
veth) expect_eq "a's tx_packets" "$(CAP=$NS_A total tx_packets)" 2
      expect_eq "a's rx_packets" "$(CAP=$NS_A total rx_packets)" 2 ;;
esac
{
	sqp=$(sed -n 's/^server: created RC QP \(0x[0-9a-f]*\)$/\1/p' "$tmp/srv")
	cqp=$(sed -n 's/^client: created RC QP \(0x[0-9a-f]*\)$/\1/p' "$tmp/cli")
	srkey=$(sed -n 's/^server: registered 4096 bytes: lkey 0x[0-9a-f]* rkey 0x\([0-9a-f]*\)$/\1/p' "$tmp/srv")
	"$UROCE" decode "$tmp/hello.pcap" >"$tmp/decode" || fail "uroce decode"
	echo "-- uroce decode"; cat "$tmp/decode"
	# opcode, destination QP, PSN of each packet, in order
	got=$(awk '$6 ~ /^RC_/ { print $6, $8, $10 }' "$tmp/decode" | tr '\n' ';')
	want="RC_SEND_ONLY $sqp 0x100000;RC_ACKNOWLEDGE $cqp 0x100000;RC_RDMA_WRITE_ONLY $sqp 0x100001;RC_ACKNOWLEDGE $cqp 0x100001;"
	expect_eq "the packets (opcode, dest QP, PSN)" "$got" "$want"
	grep -q "RC_RDMA_WRITE_ONLY .* rkey 0x0*$srkey dlen 22 payload 22 icrc ok" "$tmp/decode" ||
		fail "the WRITE does not carry the server's rkey 0x$srkey and 22 bytes"
	expect_match "$tmp/decode" '4 RoCEv2 packets \(ICRC ok 4, bad 0; malformed 0\)'
	expect_eq "tshark's BTH opcodes" "$(ucap_opcodes "$tmp/hello.pcap")" "4 17 10 17 "
}
finish
