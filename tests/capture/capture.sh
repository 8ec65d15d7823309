#!/bin/sh
# capture.sh UROCE SHM_LINK CHECK_PCAP CASE — `uroce capture` (issue #15, docs/daemon.md
# "Capturing") around shm_link (tests/transport/shm_link.c: every opcode of RC, UC and UD
# between two processes, every byte checked).  Run by nsrun.sh: a uroced of its own.
#
# CASE:
#   shm | udp   the run over the shared-memory link / over UDP (UROCE_LINK=udp), captured:
#               every frame dissects as InfiniBand (tshark) and its ICRC verifies (scapy,
#               CHECK_PCAP); the count equals what uroce's counters say was sent on that
#               link; every opcode family is there (SEND, WRITE, READ, atomics and their
#               ACKs, UC, UD); `uroce decode` shows the same packets in the same order.
#               udp: no frame larger than one MTU packet (GSO sends as their segments,
#               IPv4 IDs 1, 2, ... present).  Negative controls: one byte flipped in the
#               file must fail the ICRC check and decode; a capture with -c stops at COUNT.
#   fault       udp with UROCE_FAULT (RC only): the NAKs are there, and the captured
#               packets with a bad ICRC are exactly the ones fault injection corrupted.
#   missed      rings too small: the capture says how many packets it missed, as the
#               counter capture_missed does; what it did capture verifies.
#   v6          IPv6 GIDs on both links (ibv_rc_pingpong -g 1): IPv6 frames, ICRCs right
#               (zlib over the masked headers), the count what was sent.
#   veth        two hosts (namespaces joined by veth), a capture on each: received packets
#               (GRO split, IDs recovered) verify, counts match, both sides agree.
#   qpn         -q QPN with two ibv_rc_pingpong pairs at once: only the packets to and from
#               that QP.
#   uid         a capture by another user (nobody) of root's run gets nothing; the same
#               user's run (as nobody) it gets.
#   cm | cm_veth  rping (rdma_cm) on 127.0.0.1 / across veth (a daemon per side): the
#               daemon's QP1 packets (the IB CM's REQ, REP, RTU, DREQ, DREP) are in the
#               capture, dissected as InfiniBand CM, in that order, every ICRC right, as
#               many of each as `uroce stat show cm` counts (lo: sent, each side once;
#               veth: what that side sent and received).  cm: rping's own packets are
#               there too; a capture by nobody gets none of root's connection's MADs,
#               and all of its own connection's.
set -u
UROCE=$1
PROG=$2
CHECK=$3
CASE=$4
. "$(dirname "$0")/../daemon/lib.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/uroce-capture.XXXXXX") || exit 1
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
command -v tshark >/dev/null || { echo "FAIL: no tshark"; exit 1; }
/usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null || { echo "FAIL: no scapy (python3-scapy)"; exit 1; }
export SHM_LINK_UROCE="$UROCE"
# The whole run fits the rings: nothing may be missed for the counts to match.
export UROCE_CAPTURE_RING_KB=65536
"$UROCE" daemon start >/dev/null 2>&1 || { echo "FAIL: uroce daemon start"; exit 1; }

# The InfiniBand payload heuristics (RPC-over-RDMA, EoIB, ...) misread the test's payloads
# as their protocols: only the transport headers are checked.
H=""
for p in rpcordma infiniband.eoib fcoib infiniband_sdp iser lnet nvme-rdma smb_direct; do
	H="$H --disable-protocol $p"
done
tshark $H -r /dev/null 2>&1 | grep -q "No such protocol" && { echo "FAIL: tshark refuses $H"; exit 1; }
TS="tshark -d udp.port==4791,infiniband $H"

# start_capture FILE [AS_USER_PREFIX...]: uroce capture -w FILE in the background ($cap_pid),
# once it says it captures.
# as_nobody: NOBODY (a command prefix) and NB_UROCE, NB_PROG, NB_LIB: this build's uroce,
# shm_link, cm_wait and libraries copied where nobody can reach them.  A clone in /root
# (0700, as in a fresh Debian root) is out of nobody's reach; copies, not a bind mount, so
# that the rm -rf of $tmp can never reach into the build tree.
as_nobody() {
	NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
	mkdir -p "$tmp/nb/bin" "$tmp/nb/lib"
	cp "$UROCE" "$PROG" "$tmp/nb/bin/" || fail "copying the binaries for nobody"
	[ ! -x "$(dirname "$UROCE")/cm_wait" ] || cp "$(dirname "$UROCE")/cm_wait" "$tmp/nb/bin/"
	cp -P "$(dirname "$UROCE")/../lib/"lib*.so* "$tmp/nb/lib/" || fail "copying the libraries for nobody"
	chmod -R a+rX "$tmp/nb"
	chmod 777 "$tmp"
	NB_UROCE=$tmp/nb/bin/$(basename "$UROCE")
	NB_PROG=$tmp/nb/bin/$(basename "$PROG")
	NB_LIB=$tmp/nb/lib
	$NOBODY test -x "$NB_UROCE" || fail "nobody cannot run $NB_UROCE"
}
# start_capture FILE [PREFIX...]: `uroce capture -w FILE` in the background, under PREFIX
# (nobody's prefix runs nobody's copy of uroce).
start_capture() {
	_f=$1
	shift
	_u=$UROCE
	[ $# -eq 0 ] || _u=$NB_UROCE
	"$@" "$_u" capture -w "$_f" 2>"$_f.err" &
	cap_pid=$!
	wait_for 10 grep -q "capturing on" "$_f.err" || fail "the capture did not start: $(cat "$_f.err")"
}
stop_capture() {
	kill -INT "$cap_pid"
	wait "$cap_pid" || fail "uroce capture exited with $?"
	cat "$1.err"
	grep -q " 0 missed" "$1.err" || fail "the capture missed packets"
}
# total NAME: the device's total of counter NAME (every client of the run has gone).
total() {
	"$UROCE" stat 2>/dev/null | awk -v n="$1" '/ total / { for (i = 1; i < NF; i++) if ($i == n) s += $(i + 1) } END { print s + 0 }'
}
run_prog() {
	timeout 400 "$UROCE" run "$PROG" "$@" >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; fail "shm_link $* failed"; }
	grep PASS "$tmp/run.out"
}

# check_file FILE SENT: the checks every captured run passes.
check_file() {
	_f=$1 _sent=$2
	/usr/bin/python3 "$CHECK" "$_f" >"$tmp/check.out" 2>&1 || fail "ICRC check: $(cat "$tmp/check.out")"
	cat "$tmp/check.out"
	n=$($TS -r "$_f" 2>/dev/null | wc -l)
	ib=$($TS -r "$_f" -Y infiniband.bth 2>/dev/null | wc -l)
	bad=$($TS -r "$_f" -Y '_ws.malformed || _ws.expert.severity >= warning' 2>/dev/null | wc -l)
	echo "tshark: $n frames, $ib with a BTH, $bad malformed; uroce's counters: $_sent sent"
	[ "$n" -gt 1000 ] || fail "too few packets ($n)"
	expect_eq "frames with a BTH" "$ib" "$n"
	expect_eq "malformed frames" "$bad" 0
	expect_eq "captured packets against the packets sent" "$n" "$_sent"
	ops=$($TS -r "$_f" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c)
	# RC SEND F/M/L/only, WRITE F/M/L/only, READ request and responses, ACK, atomic ACK,
	# CMP_SWAP, FETCH_ADD, SEND_WITH_IMM, SEND_WITH_INV, WRITE_WITH_IMM; UC SEND and WRITE;
	# UD SEND and SEND_WITH_IMM.
	for op in 0 1 2 4 5 6 7 8 10 11 12 13 14 15 16 17 18 19 20 22 23 32 36 38 42 100 101; do
		echo "$ops" | awk -v o=$op '$2 == o { f = 1 } END { exit !f }' || fail "no packet with opcode $op"
	done
	# uroce decode: the same packets, in the same order, every ICRC ok.
	"$UROCE" decode "$_f" >"$tmp/dec" || fail "uroce decode failed"
	tail -1 "$tmp/dec"
	grep -q "^# .*: $n frames, $n RoCEv2 packets (ICRC ok $n, bad 0; malformed 0)" "$tmp/dec" ||
		fail "decode's summary: $(tail -1 "$tmp/dec")"
	# (tshark: QPN in hex unpadded, PSN in decimal; decode: both 0x%06x.)
	$TS -r "$_f" -T fields -E separator=' ' -e infiniband.bth.destqp -e infiniband.bth.psn 2>/dev/null |
		awk '{ sub(/^0x0*/, "", $1); print $1, $2 }' >"$tmp/ts.qp"
	awk 'function hex(s,  v, i) { v = 0; s = tolower(substr(s, 3))
	       for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
	       return v }
	     $1 != "#" { for (i = 1; i < NF; i++) { if ($i == "qp") q = $(i + 1); if ($i == "psn") p = $(i + 1) }
	       sub(/^0x0*/, "", q); print q, hex(p) }' "$tmp/dec" >"$tmp/dec.qp"
	[ -s "$tmp/dec.qp" ] || fail "decode printed no packets"
	cmp -s "$tmp/ts.qp" "$tmp/dec.qp" || fail "decode and tshark disagree on the packets' QPs and PSNs"
}

# corrupt FILE: one payload byte of the frame in the middle flipped -> the checks must fail.
negative_corrupt() {
	/usr/bin/python3 - "$1" "$tmp/bad.pcap" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
off, k, n = 24, 0, 0
while off + 16 <= len(d):            # count the records
    off += 16 + int.from_bytes(d[off + 8:off + 12], "little"); n += 1
off = 24
for _ in range(n // 2):
    off += 16 + int.from_bytes(d[off + 8:off + 12], "little")
d[off + 16 + 14 + 20 + 8 + 12 + 1] ^= 0x01   # a byte after the BTH
open(sys.argv[2], "wb").write(d)
PY
	if /usr/bin/python3 "$CHECK" "$tmp/bad.pcap" >"$tmp/bad.out" 2>&1; then
		fail "negative control: the ICRC check passed a corrupted capture"
	fi
	grep -q "icrc_bad 1 " "$tmp/bad.out" || fail "negative control: want exactly one bad ICRC: $(cat "$tmp/bad.out")"
	"$UROCE" decode "$tmp/bad.pcap" | tail -1 | grep -q "bad 1;" ||
		fail "negative control: uroce decode does not see the corrupted packet"
	echo "negative control: the corrupted copy fails: $(cat "$tmp/bad.out")"
}

# cm_seq FILE: the CM MADs (management class 7) in FILE, by name, one a line.
cm_seq() {
	$TS -r "$1" -Y 'infiniband.mad.mgmtclass == 0x07' -T fields -e infiniband.mad.attributeid 2>/dev/null |
		awk 'BEGIN { split("REQ MRA REJ REP RTU DREQ DREP SIDR_REQ SIDR_REP", nm, " ") }
		     { a = tolower($1); sub(/^0x0*/, "", a); k = index("0123456789", substr(a, 2, 1)) - 1
		       if (length(a) == 2 && substr(a, 1, 1) == "1" && k >= 0 && k <= 8) print nm[k + 1]; else print "attr" $1 }'
}
# cm_stat PREFIX DIR MSG: `uroce stat show cm`'s count of MSG (DIR sent or rcvd).
cm_stat() {
	$1 "$UROCE" stat show cm 2>/dev/null | awk -v d="$2" -v m="$3" '$1 == "cm" && $2 == d {
		for (i = 3; i < NF; i++) if ($i == m) print $(i + 1) }'
}
# check_cm FILE PREFIX DIRS: FILE holds the CM handshake and teardown of the run, in
# order, each ICRC right, as many of each MAD as the counters of DIRS (sent / sent+rcvd)
# of the daemon under PREFIX say.
check_cm() {
	_f=$1 _p=$2 _dirs=$3
	/usr/bin/python3 "$CHECK" "$_f" >"$tmp/check.out" 2>&1 || fail "ICRC check: $(cat "$tmp/check.out")"
	cat "$tmp/check.out"
	cm_seq "$_f" >"$tmp/cm.seq"
	echo "CM MADs in the capture: $(tr '\n' ' ' <"$tmp/cm.seq")"
	bad=$($TS -r "$_f" -Y 'infiniband.mad.mgmtclass == 0x07 && (_ws.malformed || _ws.expert.severity >= warning)' 2>/dev/null | wc -l)
	expect_eq "malformed CM frames" "$bad" 0
	# (tshark names the fields of REQ and REP only.)
	expect_eq "frames tshark dissects as a CM REQ" "$($TS -r "$_f" -Y infiniband.cm.req 2>/dev/null | wc -l)" "$(grep -c '^REQ$' "$tmp/cm.seq")"
	expect_eq "frames tshark dissects as a CM REP" "$($TS -r "$_f" -Y infiniband.cm.rep 2>/dev/null | wc -l)" "$(grep -c '^REP$' "$tmp/cm.seq")"
	# In order: the first of each after the first of the one before.
	awk 'BEGIN { split("REQ REP RTU DREQ DREP", want, " ") }
	     { if (!($1 in at)) at[$1] = NR }
	     END { for (i = 1; i <= 5; i++) { if (!(want[i] in at)) { print "no " want[i]; exit 1 }
			if (i > 1 && at[want[i]] < at[want[i - 1]]) { print want[i] " before " want[i - 1]; exit 1 } } }' \
		"$tmp/cm.seq" || fail "the CM exchange is not REQ, REP, RTU, DREQ, DREP"
	for m in REQ REP RTU DREQ DREP MRA REJ; do
		want=0
		for d in $_dirs; do
			v=$(cm_stat "$_p" "$d" "$m")
			[ -n "$v" ] || fail "no $d $m in uroce stat show cm"
			want=$((want + v))
		done
		expect_eq "$m frames against uroce stat show cm ($_dirs)" "$(grep -c "^$m\$" "$tmp/cm.seq")" "$want"
	done
	# The daemon's packets carry QP1's addressing: UD SEND Only (100) to QP 1.
	nq=$($TS -r "$_f" -Y 'infiniband.bth.destqp == 1 && infiniband.bth.opcode == 100 && infiniband.deth.srcqp == 1' 2>/dev/null | wc -l)
	expect_eq "QP1 frames (UD SEND Only, DETH SrcQP 1) against CM MADs" "$nq" "$(wc -l <"$tmp/cm.seq")"
}
# cm_rping PREFIX_S PREFIX_C SADDR [RUN...]: one rping connection (-C 5), the server under
# PREFIX_S, the client under PREFIX_C; RUN (default `$UROCE run`) runs each program.
cm_rping() {
	_s=$1 _c=$2 _a=$3
	shift 3
	[ $# -gt 0 ] || set -- "$UROCE" run
	$_s timeout 60 "$@" rping -s -a "$_a" -v -C 5 >"$tmp/srv" 2>&1 &
	_sp=$!
	$_s "$CMWAIT" -n 1 -t 30 || { cat "$tmp/srv"; fail "rping's server never listened"; }
	$_c timeout 60 "$@" rping -c -a "$_a" -v -C 5 >"$tmp/cli" 2>&1 || { cat "$tmp/cli"; fail "rping's client failed"; }
	wait $_sp || { cat "$tmp/srv"; fail "rping's server failed"; }
	grep -c ping "$tmp/cli" | sed 's/^/rping client: /; s/$/ pings/'
}

case $CASE in
shm | udp)
	if [ "$CASE" = udp ]; then
		export UROCE_LINK=udp
		tx=tx_packets
	else
		tx=shm_tx_packets
	fi
	start_capture "$tmp/all.pcap"
	run_prog ops "$CASE"
	sleep 0.2
	stop_capture "$tmp/all.pcap"
	check_file "$tmp/all.pcap" "$(total $tx)"
	other=$([ "$CASE" = udp ] && total shm_tx_packets || total tx_packets)
	expect_eq "packets sent on the other link" "$other" 0
	if [ "$CASE" = udp ]; then
		# GSO: the 1 MiB WRITEs left in sendmsg calls of many packets; the capture holds
		# their segments, none larger than one packet (MTU 1024 + headers), with the
		# IPv4 IDs the kernel gave them.
		max=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "max_payload") print $(i + 1) }' "$tmp/check.out")
		ids=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "nonzero_ipid") print $(i + 1) }' "$tmp/check.out")
		gso=$(total tx_gso_sends)
		echo "GSO sends $gso; largest UDP payload captured $max; segments with IPv4 ID > 0: $ids"
		[ "$gso" -gt 100 ] || fail "too few GSO sends ($gso): the run did not test segmentation"
		[ "$max" -le 1088 ] || fail "a frame of $max bytes: a GSO super-frame, not its segments"
		[ "$ids" -gt 0 ] || fail "no segment with IPv4 ID > 0"
	fi
	negative_corrupt "$tmp/all.pcap"
	# -c: stops by itself at COUNT.
	"$UROCE" capture -c 20 -w "$tmp/c20.pcap" 2>"$tmp/c20.err" &
	c20=$!
	wait_for 10 grep -q "capturing on" "$tmp/c20.err" || fail "-c capture did not start"
	run_prog ops "$CASE"
	wait_for 10 sh -c "! kill -0 $c20" || { kill "$c20"; fail "-c 20 did not stop"; }
	wait "$c20" || fail "-c capture exited with $?"
	expect_eq "frames with -c 20" "$($TS -r "$tmp/c20.pcap" 2>/dev/null | wc -l)" 20
	# -w -: a stream tshark reads from a pipe.
	( "$UROCE" capture -c 50 -w - 2>"$tmp/pipe.err" | $TS -r - -Y infiniband.bth 2>/dev/null | wc -l >"$tmp/pipe.n" ) &
	p=$!
	wait_for 10 grep -q "capturing on" "$tmp/pipe.err" || fail "the piped capture did not start"
	run_prog ops "$CASE"
	wait "$p"
	expect_eq "packets tshark read from the pipe" "$(cat "$tmp/pipe.n")" 50
	;;
fault)
	export UROCE_LINK=udp
	export UROCE_FAULT=drop=0.05,corrupt=0.02,seed=15
	start_capture "$tmp/f.pcap"
	run_prog ops udp rc
	sleep 0.2
	stop_capture "$tmp/f.pcap"
	/usr/bin/python3 "$CHECK" "$tmp/f.pcap" >"$tmp/check.out" 2>&1
	cat "$tmp/check.out"
	n=$($TS -r "$tmp/f.pcap" -Y infiniband.bth 2>/dev/null | wc -l)
	badicrc=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "icrc_bad") print $(i + 1) }' "$tmp/check.out")
	corrupt=$(total fault_corrupt)
	naks=$($TS -r "$tmp/f.pcap" -Y 'infiniband.aeth.syndrome >= 0x60' 2>/dev/null | wc -l)
	echo "captured $n; bad ICRC $badicrc, fault_corrupt $corrupt; NAKs $naks"
	expect_eq "captured packets against tx_packets" "$n" "$(total tx_packets)"
	[ "$corrupt" -gt 0 ] || fail "fault injection corrupted nothing"
	expect_eq "bad ICRCs in the capture against fault_corrupt" "$badicrc" "$corrupt"
	[ "$naks" -gt 0 ] || fail "no NAK in the capture"
	;;
missed)
	# Rings of 64 KiB cannot hold a 1 MiB WRITE's packets: the capture misses some, says
	# how many, and `uroce stat`'s capture_missed says the same.
	export UROCE_CAPTURE_RING_KB=64
	start_capture "$tmp/m.pcap"
	run_prog ops shm
	sleep 0.2
	kill -INT "$cap_pid"
	wait "$cap_pid" || fail "uroce capture exited with $?"
	cat "$tmp/m.pcap.err"
	said=$(sed -n 's/.* captured, \([0-9]*\) missed.*/\1/p' "$tmp/m.pcap.err")
	ctr=$(total capture_missed)
	echo "the capture says $said missed, capture_missed $ctr"
	[ "${said:-0}" -gt 0 ] || fail "nothing missed with 64 KiB rings"
	expect_eq "missed packets against capture_missed" "$said" "$ctr"
	/usr/bin/python3 "$CHECK" "$tmp/m.pcap" || fail "what was captured must still verify"
	;;
v6)
	# IPv6 (GID 1, ::1) on both links: ibv_rc_pingpong; the capture's frames are IPv6, their
	# ICRCs verify (check_pcap.py: zlib over the masked headers) and the count is what was
	# sent.
	for link in shm udp; do
		sent0=$(( $(total tx_packets) + $(total shm_tx_packets) ))
		start_capture "$tmp/v6$link.pcap"
		UROCE_LINK=$link "$UROCE" run stdbuf -oL ibv_rc_pingpong -g 1 -n 50 >"$tmp/srv" 2>&1 &
		s=$!
		# (it prints its address once it has its QP, right before it listens)
		wait_for 20 grep -q "local address" "$tmp/srv" || fail "$link: the server did not start"
		sleep 0.2
		UROCE_LINK=$link "$UROCE" run ibv_rc_pingpong -g 1 -n 50 127.0.0.1 >"$tmp/cli" 2>&1 ||
			{ cat "$tmp/cli"; fail "$link: the ibv_rc_pingpong client failed"; }
		wait $s || fail "$link: the ibv_rc_pingpong server failed"
		sleep 0.2
		stop_capture "$tmp/v6$link.pcap"
		sent=$(( $(total tx_packets) + $(total shm_tx_packets) - sent0 ))
		/usr/bin/python3 "$CHECK" "$tmp/v6$link.pcap" >"$tmp/check.out" 2>&1 || fail "$link: ICRC check"
		cat "$tmp/check.out"
		n=$($TS -r "$tmp/v6$link.pcap" -Y 'ipv6 && infiniband.bth' 2>/dev/null | wc -l)
		bad=$($TS -r "$tmp/v6$link.pcap" -Y '_ws.malformed || _ws.expert.severity >= warning' 2>/dev/null | wc -l)
		echo "$link: $n IPv6 frames with a BTH, $bad malformed, $sent sent"
		[ "$n" -ge 500 ] || fail "$link: too few IPv6 packets ($n)"
		expect_eq "$link: IPv6 packets against the packets sent" "$n" "$sent"
		expect_eq "$link: malformed" "$bad" 0
		grep -q "ipv6 $n\$" "$tmp/check.out" || fail "$link: not every frame is IPv6"
	done
	;;
veth)
	# Two hosts (network namespaces a and b joined by a veth pair, uroce1 on each, a daemon
	# each): a capture on each side of ibv_rc_pingpong with 64 KiB messages (GSO sends).
	# Each side sees what it sent and what it received from the other -- the received
	# packets as netio read them, GRO-coalesced datagrams split, each with the IPv4 ID its
	# sender gave it (recovered by the ICRC check) -- so every ICRC verifies, each capture
	# holds its host's tx_packets + rx_packets, and the two captures hold the same packets.
	netns_veth_setup || exit 1
	for x in a b; do
		eval pfx=\$NS_$(echo $x | tr ab AB)
		$pfx "$UROCE" capture -d uroce1 -w "$tmp/$x.pcap" 2>"$tmp/$x.pcap.err" &
		eval capx_$x=$!
		wait_for 10 grep -q "capturing on" "$tmp/$x.pcap.err" || fail "$x: the capture did not start"
	done
	$NS_A "$UROCE" run stdbuf -oL ibv_rc_pingpong -d uroce1 -g 0 -s 65536 -n 50 >"$tmp/srv" 2>&1 &
	s=$!
	wait_for 20 grep -q "local address" "$tmp/srv" || fail "the server did not start"
	sleep 0.2
	$NS_B "$UROCE" run ibv_rc_pingpong -d uroce1 -g 0 -s 65536 -n 50 "$ADDR_A" >"$tmp/cli" 2>&1 ||
		{ cat "$tmp/cli"; fail "the client failed"; }
	wait $s || { cat "$tmp/srv"; fail "the server failed"; }
	sleep 0.2
	for x in a b; do
		eval pfx=\$NS_$(echo $x | tr ab AB)
		eval kill -INT \$capx_$x
		eval wait \$capx_$x || fail "$x: uroce capture exited with $?"
		cat "$tmp/$x.pcap.err"
		/usr/bin/python3 "$CHECK" "$tmp/$x.pcap" >"$tmp/check.$x" 2>&1 || fail "$x: ICRC check"
		cat "$tmp/check.$x"
		n=$($TS -r "$tmp/$x.pcap" -Y infiniband.bth 2>/dev/null | wc -l)
		tot=$($pfx "$UROCE" stat 2>/dev/null | awk '/ total / { for (i = 1; i < NF; i++) if ($i == "tx_packets" || $i == "rx_packets") s += $(i + 1) } END { print s + 0 }')
		echo "$x: $n captured, tx_packets + rx_packets $tot"
		[ "$n" -gt 500 ] || fail "$x: too few packets ($n)"
		expect_eq "$x: captured against tx_packets + rx_packets" "$n" "$tot"
		$TS -r "$tmp/$x.pcap" -T fields -e ip.src -e ip.id -e udp.srcport -e infiniband.bth.psn 2>/dev/null |
			sort >"$tmp/$x.list"
	done
	cmp -s "$tmp/a.list" "$tmp/b.list" || fail "the two sides' captures differ"
	ids=$(awk '$1 == "192.0.2.1" && $2 != "0x0000" { n++ } END { print n + 0 }' "$tmp/b.list")
	echo "b received $ids segments with IPv4 ID > 0 from a"
	[ "$ids" -gt 0 ] || fail "no received GSO segment with its ID"
	;;
qpn)
	# -q: two ibv_rc_pingpong pairs at once; the capture of server A's QP holds the packets
	# to it and those it sent (to client A's QP), none of pair B's.
	for x in a b; do
		port=$([ $x = a ] && echo 18515 || echo 18516)
		"$UROCE" run stdbuf -oL ibv_rc_pingpong -g 0 -n 100 -p $port >"$tmp/srv.$x" 2>&1 &
		eval srv_$x=$!
	done
	wait_for 10 grep -q QPN "$tmp/srv.a" || fail "server a did not start"
	wait_for 10 grep -q QPN "$tmp/srv.b" || fail "server b did not start"
	qpn() { sed -n 's/.*local address: .*QPN 0x0*\([0-9a-f]*\),.*/\1/p' "$1" | head -1; }
	qa=$(qpn "$tmp/srv.a")
	"$UROCE" capture -q "0x$qa" -w "$tmp/q.pcap" 2>"$tmp/q.pcap.err" &
	cap_pid=$!
	wait_for 10 grep -q "capturing on" "$tmp/q.pcap.err" || fail "the capture did not start"
	for x in a b; do
		port=$([ $x = a ] && echo 18515 || echo 18516)
		"$UROCE" run stdbuf -oL ibv_rc_pingpong -g 0 -n 100 -p $port 127.0.0.1 >"$tmp/cli.$x" 2>&1 &
		eval cli_$x=$!
	done
	for p in $cli_a $cli_b $srv_a $srv_b; do
		wait $p || fail "an ibv_rc_pingpong exited with $?"
	done
	sleep 0.2
	stop_capture "$tmp/q.pcap"
	ca=$(qpn "$tmp/cli.a")
	qb=$(qpn "$tmp/srv.b")
	cb=$(qpn "$tmp/cli.b")
	$TS -r "$tmp/q.pcap" -T fields -e infiniband.bth.destqp 2>/dev/null | sed 's/^0x0*//' | sort | uniq -c >"$tmp/q.qps"
	echo "pair a: $qa <-> $ca, pair b: $qb <-> $cb; captured with -q 0x$qa (count qpn):"
	cat "$tmp/q.qps"
	expect_eq "destination QPs in the -q capture" "$(awk '{ print $2 }' "$tmp/q.qps" | sort | tr '\n' ' ')" \
		"$(printf '%s\n%s\n' "$qa" "$ca" | sort | tr '\n' ' ')"
	;;
cm)
	# The daemon's own QP1 packets: rping on 127.0.0.1, one daemon sending and receiving
	# every MAD (captured once: the received copy of a packet the capture has sent is
	# left out, as for the engines' packets).
	CMWAIT=$(dirname "$UROCE")/cm_wait
	start_capture "$tmp/cm.pcap"
	cm_rping "" "" 127.0.0.1
	sleep 0.3
	stop_capture "$tmp/cm.pcap"
	check_cm "$tmp/cm.pcap" "" sent
	# And rping's own packets (its processes live shorter than the capture's poll for new
	# rings: the daemon keeps a ring the capture switched on until the capture has it).
	nd=$($TS -r "$tmp/cm.pcap" -Y 'infiniband.bth.destqp != 1' 2>/dev/null | wc -l)
	sent=$(($(total tx_packets) + $(total shm_tx_packets)))
	echo "rping's packets: $nd captured, $sent sent"
	[ "$nd" -gt 0 ] || fail "none of rping's own packets captured"
	expect_eq "rping's packets captured against tx_packets + shm_tx_packets" "$nd" "$sent"
	# Who sees them: the MADs of a connection are its processes'.  A capture by nobody
	# of root's rping: none of them (nor rping's own packets).
	as_nobody
	start_capture "$tmp/nobody.pcap" $NOBODY
	cm_rping "" "" 127.0.0.1
	sleep 0.3
	stop_capture "$tmp/nobody.pcap"
	expect_eq "frames of root's rping nobody captured" "$($TS -r "$tmp/nobody.pcap" 2>/dev/null | wc -l)" 0
	# nobody's own rping (nobody's rdma_cm ids): every MAD of it.  The counters are the
	# daemon's totals, so they are taken as differences.
	for m in REQ REP RTU DREQ DREP; do eval b_$m=$(cm_stat "" sent $m); done
	start_capture "$tmp/own.pcap" $NOBODY
	cm_rping "" "" 127.0.0.1 $NOBODY env LD_LIBRARY_PATH="$NB_LIB"
	sleep 0.3
	stop_capture "$tmp/own.pcap"
	cm_seq "$tmp/own.pcap" >"$tmp/own.seq"
	echo "nobody's capture of its rping: $(tr '\n' ' ' <"$tmp/own.seq")"
	for m in REQ REP RTU DREQ DREP; do
		eval b=\$b_$m
		expect_eq "$m frames nobody captured of its rping" "$(grep -c "^$m\$" "$tmp/own.seq")" $(($(cm_stat "" sent $m) - b))
	done
	/usr/bin/python3 "$CHECK" "$tmp/own.pcap" || fail "ICRC check of nobody's capture"
	;;
cm_veth)
	# Two hosts, a daemon each: each capture holds what its daemon sent and received.
	netns_veth_setup || exit 1
	CMWAIT=$(dirname "$UROCE")/cm_wait
	# Daemons that stay when idle: their counters are read after the checks.
	$NS_A "$UROCE" daemon start >/dev/null 2>&1 || fail "daemon start in a"
	$NS_B "$UROCE" daemon start >/dev/null 2>&1 || fail "daemon start in b"
	for x in a b; do
		eval pfx=\$NS_$(echo $x | tr ab AB)
		$pfx "$UROCE" capture -d uroce1 -w "$tmp/$x.pcap" 2>"$tmp/$x.pcap.err" &
		eval capx_$x=$!
		wait_for 10 grep -q "capturing on" "$tmp/$x.pcap.err" || fail "$x: the capture did not start"
	done
	cm_rping "$NS_A" "$NS_B" "$ADDR_A"
	sleep 0.3
	for x in a b; do
		eval pfx=\$NS_$(echo $x | tr ab AB)
		eval kill -INT \$capx_$x
		eval wait \$capx_$x || fail "$x: uroce capture exited with $?"
		cat "$tmp/$x.pcap.err"
		grep -q " 0 missed" "$tmp/$x.pcap.err" || fail "$x: the capture missed packets"
		check_cm "$tmp/$x.pcap" "$pfx" "sent rcvd"
	done
	# Both sides saw the same MADs (each sent by one and received by the other).
	for x in a b; do
		$TS -r "$tmp/$x.pcap" -Y 'infiniband.mad.mgmtclass == 0x07' -T fields -e ip.src -e ip.dst \
			-e infiniband.mad.attributeid -e infiniband.mad.transactionid -e infiniband.invariant.crc 2>/dev/null >"$tmp/$x.cm"
	done
	cmp -s "$tmp/a.cm" "$tmp/b.cm" || { diff "$tmp/a.cm" "$tmp/b.cm"; fail "the two sides' CM packets differ"; }
	;;
uid)
	as_nobody
	start_capture "$tmp/nobody.pcap" $NOBODY
	run_prog ops shm
	sleep 0.2
	stop_capture "$tmp/nobody.pcap"
	expect_eq "packets of root's processes nobody captured" "$($TS -r "$tmp/nobody.pcap" 2>/dev/null | wc -l)" 0
	# The positive side: nobody's own processes.
	start_capture "$tmp/own.pcap" $NOBODY
	$NOBODY env SHM_LINK_UROCE="$NB_UROCE" LD_LIBRARY_PATH="$NB_LIB" timeout 150 \
		"$NB_PROG" ops shm >"$tmp/run.out" 2>&1 || { cat "$tmp/run.out"; fail "shm_link as nobody failed"; }
	grep PASS "$tmp/run.out"
	sleep 0.2
	stop_capture "$tmp/own.pcap"
	n=$($TS -r "$tmp/own.pcap" 2>/dev/null | wc -l)
	echo "nobody captured $n packets of its own processes"
	[ "$n" -gt 1000 ] || fail "nobody's capture of its own processes got $n packets"
	# And root sees nobody's.
	start_capture "$tmp/root.pcap"
	$NOBODY env SHM_LINK_UROCE="$NB_UROCE" LD_LIBRARY_PATH="$NB_LIB" timeout 150 \
		"$NB_PROG" ops shm >"$tmp/run.out" 2>&1 || fail "shm_link as nobody failed"
	sleep 0.2
	stop_capture "$tmp/root.pcap"
	r=$($TS -r "$tmp/root.pcap" 2>/dev/null | wc -l)
	echo "root captured $r packets of nobody's processes"
	[ "$r" -gt 1000 ] || fail "root's capture of nobody's processes got $r packets"
	;;
*)
	echo "capture.sh: unknown case $CASE"
	exit 2
	;;
esac
[ "$fails" -eq 0 ] && echo "PASS capture $CASE"
[ "$fails" -eq 0 ]
