#!/bin/sh
# anatomy.sh UROCE HELLO_RDMA — docs/tutorial/10-packet-anatomy.md, checked.  Run by nsrun.sh.
# Chapter 1's program over UDP under dumpcap; then tshark's reading of the RDMA WRITE ONLY
# packet, field by field, must be what the chapter's table says (lengths, IPv4 DF/ID/TTL,
# UDP port, BTH opcode/pad/P_Key/QP/AckReq/PSN, RETH rkey/length, the data), the ACK's AETH
# (syndrome ACK, MSN 2), and uroce decode must find the ICRC good.
set -u
UROCE=$1
PROG=$2
. "$(dirname "$0")/../daemon/lib.sh"
. "$(dirname "$0")/lib_tut.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UROCE_LINK=udp UROCE_NETIO_GSO=0
capture_start "$tmp/hello.pcap"
tut_pair 18600 "$PROG"
capture_stop
sqp=$(sed -n 's/^server: created RC QP \(0x[0-9a-f]*\)$/\1/p' "$tmp/srv")
srkey=$(sed -n 's/^server: registered 4096 bytes: lkey 0x[0-9a-f]* rkey \(0x[0-9a-f]*\)$/\1/p' "$tmp/srv")
TS() { env -u LD_PRELOAD tshark -r "$tmp/hello.pcap" -d udp.port==4791,infiniband "$@" 2>/dev/null; }
TS -Y 'infiniband.bth.opcode == 10' -V -O infiniband
f=$(TS -Y 'infiniband.bth.opcode == 10' -T fields -E separator=' ' \
	-e frame.len -e ip.len -e ip.flags.df -e ip.id -e ip.ttl -e ip.proto -e udp.dstport -e udp.length \
	-e infiniband.bth.opcode -e infiniband.bth.se -e infiniband.bth.padcnt -e infiniband.bth.tver \
	-e infiniband.bth.p_key -e infiniband.bth.destqp -e infiniband.bth.a -e infiniband.bth.psn \
	-e infiniband.reth.r_key -e infiniband.reth.dmalen -e data.len)
want="98 84 1 0x0000 64 17 4791 64 10 0 2 0 65535 $(printf 0x%06x "$sqp") 1 1048577 $(printf 0x%08x "$srkey") 22 24"
expect_eq "the WRITE's fields" "$f" "$want"
a=$(TS -Y 'infiniband.bth.opcode == 17 && infiniband.bth.psn == 1048577' -T fields -E separator=' ' \
	-e frame.len -e infiniband.aeth.syndrome -e infiniband.aeth.msn)
expect_eq "the WRITE's ACK (frame length, AETH syndrome, MSN)" "$a" "62 31 2"
"$UROCE" decode "$tmp/hello.pcap" >"$tmp/decode" || fail "uroce decode"
grep -q 'RC_RDMA_WRITE_ONLY .* icrc ok$' "$tmp/decode" || fail "the WRITE's ICRC"
TS -Y 'infiniband.bth.opcode == 10' -x
finish
