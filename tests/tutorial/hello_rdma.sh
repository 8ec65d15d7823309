#!/bin/sh
# hello_rdma.sh UROCE HELLO_RDMA MODE — docs/tutorial/01-end-to-end.md, checked.  Run by nsrun.sh
# (a uroced of its own, a private lo).
#   shm  the default same-host path: the output the chapter shows;
#   udp  UROCE_LINK=udp UROCE_NETIO_GSO=0 under dumpcap: the same output, and the capture must
#        hold exactly the chapter's four packets (SEND ONLY, ACK, RDMA WRITE ONLY, ACK) between
#        the two QPs the programs printed, the WRITE carrying the server's rkey, as
#        `uroce decode` and tshark both read them, every ICRC good;
#   veth two "hosts": the server in network namespace a (192.0.2.1), the client in b
#        (192.0.2.2), joined by a veth pair, each with its own uroced and a device uroce1
#        on its end (tests/daemon/lib.sh netns_veth_setup); the same checks as udp, the
#        capture taken on a's end of the veth.
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
shm) ;;
udp) export UROCE_LINK=udp UROCE_NETIO_GSO=0
     capture_start "$tmp/hello.pcap" ;;
veth) export UROCE_NETIO_GSO=0
      netns_veth_setup || finish
      S=$NS_A C=$NS_B SADDR=$ADDR_A SA=$ADDR_A CA=$ADDR_B
      PROBE_NS=$NS_B PROBE_ADDR=$ADDR_A
      set -- -d uroce1
      capture_start "$tmp/hello.pcap" va "$NS_A" ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
tut_pair 18600 "$PROG" "$@"
[ "$MODE" != shm ] && capture_stop

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

if [ "$MODE" != shm ]; then
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
	ops=$(env -u LD_PRELOAD tshark -r "$tmp/hello.pcap" -d udp.port==4791,infiniband \
		-Y infiniband.bth -T fields -e infiniband.bth.opcode 2>/dev/null | tr '\n' ' ')
	expect_eq "tshark's BTH opcodes" "$ops" "4 17 10 17 "
fi
finish
