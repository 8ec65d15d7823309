#!/bin/sh
# rc_wire.sh UROCE [MODE] — capture a real RC run and check it with independent tools.
# Run by nsrun.sh (private namespaces: the capture sees only this test's traffic on lo).
#
# MODE says how the capture is made to show the packets as a wire carries them:
#   segment  (default) lo segments GSO sends in software (ethtool, needs root): every
#            packet captured with the IPv4 ID it has on the wire (segment k: ID k);
#   nogso    UROCE_NETIO_GSO=0, the documented way for a user to capture (no root, no
#            ethtool): every packet leaves alone, IPv4 ID 0;
#   gso-raw  the negative control: GSO on and lo left as it is, which is what a user who
#            captures without either sees: the test passes only if scapy finds frames
#            holding several packets each, with a wrong ICRC, i.e. the checks of the other
#            modes can fail.
#
#   1. tshark captures UDP 4791 on lo while Debian's ibv_rc_pingpong (multi-packet
#      messages) and ib_read_bw / ib_atomic_bw run over uroce;
#   2. tshark dissects the file as InfiniBand: every packet must dissect as a BTH of an RC
#      opcode, none malformed, and SEND FIRST/MIDDLE/LAST, ACK, READ request/response and
#      atomic packets must all be there, and every packet's IPv4 TTL is its AV's hop limit;
#   3. scapy (Debian's /usr/bin/python3, scapy.contrib.roce) recomputes every packet's ICRC.
# The UDP path: two uroce processes of one host talk through a shared-memory link by default,
# which puts nothing on lo (docs/transport.md "The shared-memory link").  The capture is of
# the UDP path, chosen the two ways a learner can: segment mode with the device option
# (`uroce link set uroce0 loopback udp`, and `uroce link show -d` must say so), nogso and
# gso-raw with UROCE_LINK=udp.
# A missing tshark, scapy or ethtool is a failure: scripts/deps.sh test installs them.
set -u
UROCE=$1
MODE=${2:-segment}
. "$(dirname "$0")/../daemon/lib.sh"
command -v tshark >/dev/null || { echo "FAIL: no tshark (package tshark)"; exit 1; }
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || { echo "FAIL: no scapy (package python3-scapy)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# lo hands a UDP_SEGMENT (GSO) send on unsegmented (it is split at the receiving socket),
# so a capture on lo would see one large frame where a wire carries several packets.  Make
# lo segment in software on transmit, as a path without segmentation offload does (the
# same kernel code, inet_gso_segment, that segments at the receiver): the capture then
# holds every packet with the IPv4 header it really had, and scapy checks each segment.
case $MODE in
segment) ethtool -K lo tx-udp-segmentation off ||
		{ echo "FAIL: cannot turn off tx-udp-segmentation on lo (ethtool, package ethtool): GSO sends would be captured unsegmented"; exit 1; }
	"$UROCE" link set uroce0 loopback udp || { echo "FAIL: uroce link set uroce0 loopback udp"; exit 1; }
	"$UROCE" link show uroce0 -d | grep -qx '    loopback udp' ||
		{ echo "FAIL: link show -d does not say loopback udp"; exit 1; } ;;
nogso) export UROCE_NETIO_GSO=0 UROCE_LINK=udp ;;
gso-raw) export UROCE_LINK=udp ;;
*) echo "unknown mode $MODE"; exit 2 ;;
esac
cap=$tmp/rc.pcap
# The independent tools run without the sanitizer runtime the ASan build preloads.
TSHARK=$(command -v tshark)
tshark() { env -u LD_PRELOAD -u ASAN_OPTIONS "$TSHARK" "$@"; }

# Started directly (not through the tshark function): $! must be tshark's own pid.  A
# non-interactive shell starts background jobs with SIGINT ignored, and tshark keeps an
# ignored SIGINT ignored, so python restores the default before exec'ing it: SIGINT is the
# signal on which tshark writes out every captured packet before it exits.
env -u LD_PRELOAD -u ASAN_OPTIONS /usr/bin/python3 -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$TSHARK" -q -i lo -f 'udp port 4791' -w "$cap" \
	>"$tmp/tshark.log" 2>&1 &
tpid=$!
started() { grep -q "Capturing on" "$tmp/tshark.log"; }
wait_for 30 started || fail "tshark did not start"

pair() { # server command; the client adds 127.0.0.1
	"$UROCE" run "$@" >"$tmp/srv.log" 2>&1 &
	sp=$!
	listening() { ss -ltnH "sport = :18515" | grep -q LISTEN; }
	wait_for 20 listening || fail "$1 server never listened"
	timeout 60 "$UROCE" run "$@" 127.0.0.1 >"$tmp/cli.log" 2>&1 || { fail "$1 client"; cat "$tmp/cli.log"; }
	wait $sp || { fail "$1 server"; cat "$tmp/srv.log"; }
}
# tshark reports "Capturing on" a moment before its filter sees packets, so the first
# exchange may be missed: a warm-up that the checks below do not depend on.
pair ibv_rc_pingpong -g 0 -s 64 -n 3000
pair ibv_rc_pingpong -g 0 -s 3000 -n 20 -m 1024
pair ib_read_bw -x 0 -F -s 10000 -n 20
pair ib_atomic_bw -x 0 -F -n 20
# A trailing exchange the checks do not depend on either: stopped right after the atomics,
# a loaded machine's capture once ended without them (read from the kernel's buffer only
# after the stop).
pair ibv_rc_pingpong -g 0 -s 64 -n 500
# Let tshark write the last packets: stop it and wait until it has exited.
kill -INT $tpid; wait $tpid

total=$(tshark -r "$cap" -Y udp.port==4791 2>/dev/null | wc -l)
ib=$(tshark -r "$cap" -Y infiniband.bth 2>/dev/null | wc -l)
bad=$(tshark -r "$cap" -Y '_ws.malformed || _ws.expert.severity >= warning' 2>/dev/null | wc -l)
echo "captured $total RoCEv2 packets, $ib dissected with a BTH, $bad malformed"
[ "$total" -gt 100 ] || fail "too few packets ($total)"
[ "$ib" -eq "$total" ] || fail "$((total - ib)) packets without a BTH"
# (tshark does not check the ICRC: in an unsegmented GSO capture it shows each frame as one
# packet whose payload runs on into the next packets, not as malformed; scapy's ICRC check
# below is what tells.)
[ "$MODE" = gso-raw ] || [ "$bad" -eq 0 ] || fail "$bad malformed packets"
ops=$(tshark -r "$cap" -Y infiniband.bth -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c)
echo "opcodes (count opcode):"; echo "$ops"
# (An unsegmented GSO capture shows a run of packets as one frame with the first one's
# opcode: gso-raw does not look for the others.)
[ "$MODE" = gso-raw ] ||
for op in 0 1 2 12 13 14 15 17 18 20; do   # SEND F/M/L, READ req + resp F/M/L, ACK, atomic ACK, FA
	echo "$ops" | awk -v o=$op '$2 == o { f = 1 } END { exit !f }' || fail "no packet with opcode $op"
done

# IP carries the AV's GRH hop limit as TTL (RoCEv2 A17.4.5, as rxe): ibv_rc_pingpong's AV asks
# for 1, perftest's for 255, and nothing else may appear (uroce sent the socket's default, 64,
# for connected QPs before 2026-12-02).
ttls=$(tshark -r "$cap" -Y udp.port==4791 -T fields -e ip.ttl 2>/dev/null | sort -n | uniq -c)
echo "IPv4 TTLs (count TTL):"; echo "$ttls"
[ "$(echo "$ttls" | awk '{ print $2 }' | tr '\n' ' ')" = "1 255 " ] ||
	fail "TTLs are not the AVs' hop limits (1 from ibv_rc_pingpong, 255 from perftest)"
env -u LD_PRELOAD /usr/bin/python3 - "$cap" "$MODE" <<'PY' || fail "scapy ICRC check ($MODE)"
import sys
from scapy.all import rdpcap, IP, UDP, raw
from scapy.contrib.roce import BTH
n = bad = ids = big = 0
for pkt in rdpcap(sys.argv[1]):
    if UDP not in pkt or pkt[UDP].dport != 4791:
        continue
    n += 1
    ip = IP(raw(pkt[IP]))            # re-dissect so BTH is bound under UDP 4791
    if ip.id != 0:
        ids += 1                     # segment k > 0 of a GSO send (single sends carry ID 0)
    if len(raw(ip[UDP].payload)) > 4096 + 64:
        big += 1                     # more than one packet: a GSO send captured unsegmented
    want = ip[BTH].compute_icrc(None)
    got = raw(ip[UDP].payload)[-4:]
    if want != got:
        bad += 1
        if bad <= 5:
            print("bad ICRC: opcode %d psn %d: %s != %s" % (ip[BTH].opcode, ip[BTH].psn, got.hex(), want.hex()))
print("scapy: %d packets, ICRC ok %d, bad %d; %d with a non-zero IPv4 ID (GSO segments), %d unsegmented"
      % (n, n - bad, bad, ids, big))
mode = sys.argv[2]
if mode == "segment":
    # uroce sends multi-packet messages with UDP_SEGMENT: their segments must be on the
    # wire, each with the ICRC of its own header.
    ok = n and not bad and not big and ids
elif mode == "nogso":
    # Every packet its own datagram: each whole, ICRC right, IPv4 ID 0.
    ok = n and not bad and not big and not ids
else:
    # What a capture of GSO sends without segmentation looks like: frames holding several
    # packets, whose trailing 4 bytes are not the first packet's ICRC.
    ok = n and bad and big
sys.exit(0 if ok else 1)
PY
[ $fails -eq 0 ] && echo PASS
exit $([ $fails -eq 0 ] && echo 0 || echo 1)
