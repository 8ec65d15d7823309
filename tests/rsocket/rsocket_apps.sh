#!/bin/sh
# rsocket_apps.sh UROCE TOPO CASE — rsockets on uroce (docs/rsockets.md): Debian's
# unmodified rstream, riostream and rcopy, udpong (SOCK_DGRAM over UD), and unmodified socket programs under
# LD_PRELOAD=librspreload.so, all through `uroce run`, server and client as separate
# processes, under tests/daemon/nsrun.sh (own namespaces and daemons).
#
#   TOPO lo:    both on 127.0.0.1 (device uroce0 on lo)
#   TOPO veth:  [netns a: 192.0.2.1] <--veth--> [netns b: 192.0.2.2], server in a
#
# Proof of path: every rsocket case reads uroce's own counters (`uroce stat show link
# DEV/1`, the device totals: UDP tx_bytes plus shared-memory shm_tx_bytes, summed over
# the namespaces) before and after, and they must have moved by at least the bytes the
# programs say they moved.  The *-tcp / *-nopreload cases are the negative controls:
# the same programs over kernel TCP (rstream -T s, no preload), where the counters must
# stay put (less than 64 KiB of movement; udpong-sock is udpong's own kernel-UDP mode), or the proof would prove nothing.
# Exit 0 pass, 1 fail, 77 skip.
set -u
UROCE=$1
TOPO=$2
CASE=$3
. "$(dirname "$0")/../daemon/lib.sh"
CMWAIT=$(dirname "$UROCE")/cm_wait
PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
tmp=$(mktemp -d)
spid=""
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

topo_setup "$TOPO" || exit 1
if [ "$TOPO" = veth ]; then D=uroce1; NSS="$S|$C"; else D=uroce0; NSS=""; fi

# tx bytes of device D in one namespace (prefix $1), links UDP and shared memory
tx_of() {
	_v=$($1 "$UROCE" stat show link $D/1 2>/dev/null |
		awk '$3 == "total" { for (i = 4; i < NF; i++) if ($i == "tx_bytes" || $i == "shm_tx_bytes") s += $(i + 1) }
		     END { printf "%.0f\n", s }')
	echo "${_v:-0}"
}
tx_sum() {
	if [ "$TOPO" = veth ]; then
		echo $(( $(tx_of "$S") + $(tx_of "$C") ))
	else
		tx_of ""
	fi
}

# start_server SECS CMD...: the server under $S in the background (spid, $tmp/srv)
start_server() {
	_secs=$1; shift
	echo "== server: $S uroce run $*"
	$S timeout "$_secs" "$UROCE" run stdbuf -oL "$@" >"$tmp/srv" 2>"$tmp/srv.err" &
	spid=$!
}
# wait_listen: until the server's daemon has an RDMA CM listener
wait_listen() {
	$S "$CMWAIT" -n 1 -t 30 || { fail "server never listened"; cat "$tmp/srv" "$tmp/srv.err"; exit 1; }
}
# wait_tcp PORT: until the server listens on kernel TCP PORT
wait_tcp() {
	_l() { $S ss -ltnH "sport = :$1" | grep -q LISTEN; }
	wait_for 20 _l "$1" || { fail "server never listened on TCP $1"; cat "$tmp/srv" "$tmp/srv.err"; exit 1; }
}
run_client() {
	_secs=$1; _out=$2; shift 2
	echo "== client: $C uroce run $*"
	$C timeout "$_secs" "$UROCE" run "$@" >"$_out" 2>"$_out.err"
	_crc=$?
	echo "-- client output ($_crc)"; cat "$_out" "$_out.err"
	return $_crc
}
wait_server() {
	wait "$spid"
	_src=$?
	spid=""
	echo "-- server output ($_src)"; cat "$tmp/srv" "$tmp/srv.err"
	return $_src
}
stop_server() {
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=""
	echo "-- server output"; cat "$tmp/srv" "$tmp/srv.err"
}
count() { cat "$2" "$2.err" 2>/dev/null | grep -c -- "$1"; }

# prove BYTES: the counters moved by at least BYTES since tx0
prove() {
	_moved=$(( $(tx_sum) - tx0 ))
	echo "uroce moved $_moved bytes (program data: $1)"
	[ "$_moved" -ge "$1" ] || fail "uroce's counters moved $_moved bytes, less than the $1 the programs moved: not over rsockets"
}
# disprove: the negative control, counters (nearly) still
disprove() {
	_moved=$(( $(tx_sum) - tx0 ))
	echo "uroce moved $_moved bytes (negative control)"
	[ "$_moved" -lt 65536 ] || fail "uroce's counters moved $_moved bytes over kernel TCP: the proof of path is broken"
}

# rstream's result lines: name bytes xfers iters total time ...; the bytes a run moved
# (each transfer goes both ways).  rstream prints sizes as 64k / 1m (powers of 1024) and
# counts as 1k (powers of 1000), rounded down: the sum is a lower bound.
rstream_bytes() {
	awk 'function v(x, b,  n) { n = x + 0
		if (x ~ /k$/) n *= b; else if (x ~ /m$/) n *= b * b; else if (x ~ /g$/) n *= b * b * b
		return n }
	     $1 != "name" && NF >= 8 && $2 ~ /^[0-9]/ { s += 2 * v($2, 1024) * v($3, 1000) * v($4, 1000) }
	     END { printf "%.0f\n", s }' "$1"
}

for ns in "$S" "$C"; do
	$ns "$UROCE" run true
	$ns "$CMWAIT" -n 0 -t 30 || { echo "FAIL: no uroced with a CM"; exit 1; }
done
tx0=$(tx_sum)

case $CASE in
rstream|rstream-all|rstream-b|rstream-n|rstream-a|rstream-v|rstream-k)
	case $CASE in
	rstream) opts="-C 1000 -S 65536" ;;
	rstream-all) opts="-S all" ;;
	rstream-b) opts="-T b -C 1000 -S 65536" ;;
	rstream-n) opts="-T n -C 1000 -S 65536" ;;
	rstream-a) opts="-T a -C 1000 -S 65536" ;;
	rstream-v) opts="-T v -C 200 -S 100000" ;;
	rstream-k) opts="-k 1 -C 50 -S 4096" ;;
	esac
	# -S all takes ~190 s across veth on a loaded 2-CPU machine (CMakeLists gives it 480)
	secs=200
	[ "$CASE" = rstream-all ] && secs=440
	start_server $secs rstream -b "$SADDR" $opts
	wait_listen
	run_client $secs "$tmp/cli" rstream -s "$SADDR" $opts || fail "client exited $?"
	wait_server || fail "server exited $?"
	n=$(rstream_bytes "$tmp/cli")
	[ "$n" -gt 0 ] || fail "no result line from the client"
	[ "$(rstream_bytes "$tmp/srv")" = "$n" ] || fail "server and client results differ"
	prove "$n"
	;;
rstream-tcp)
	# negative control: rstream's own TCP mode (-T s) moves nothing over uroce
	start_server 100 rstream -T s -b "$SADDR" -C 1000 -S 65536
	wait_tcp 7471
	run_client 100 "$tmp/cli" rstream -T s -s "$SADDR" -C 1000 -S 65536 || fail "client exited $?"
	wait_server || fail "server exited $?"
	[ "$(rstream_bytes "$tmp/cli")" -gt 0 ] || fail "no result line from the client"
	disprove
	;;
riostream|riostream-all|riostream-v)
	case $CASE in
	riostream) opts="-C 1000 -S 65536" ;;
	riostream-all) opts="-S all" ;;
	riostream-v) opts="-T v -C 200 -S 100000" ;;
	esac
	start_server 200 riostream -b "$SADDR" $opts
	wait_listen
	run_client 200 "$tmp/cli" riostream -s "$SADDR" $opts || fail "client exited $?"
	wait_server || fail "server exited $?"
	n=$(rstream_bytes "$tmp/cli")
	[ "$n" -gt 0 ] || fail "no result line from the client"
	prove "$n"
	;;
rcopy)
	# 100 MiB of random data copied to the server, checksums compared
	head -c $((100 << 20)) /dev/urandom >"$tmp/src"
	(cd "$tmp" && start_server 200 rcopy)
	wait_listen
	run_client 200 "$tmp/cli" rcopy "$tmp/src" "$SADDR:$tmp/dst" || fail "client exited $?"
	stop_server
	a=$(sha256sum <"$tmp/src"); b=$(sha256sum <"$tmp/dst" 2>/dev/null)
	expect_eq "sha256 of the copy" "$b" "$a"
	prove $((100 << 20))
	;;
preload-iperf3|preload-iperf3-bidir|nopreload-iperf3|preload-iperf3-udp|nopreload-iperf3-udp)
	# iperf3 client and server both under librspreload (-n 200M one way; --bidir: both
	# ways at once for 2 s, the ssh-style case); the bytes the server received, from the
	# client's JSON, must show in uroce's counters.  The negative control is the same run
	# without the preload (kernel TCP).
	# (after an LD_PRELOAD already there: the ASan runtime under the sanitizer build)
	pre="env LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$PRELOAD"
	case $CASE in nopreload-*) pre="" ;; esac
	what="-n 200M"
	[ "$CASE" = preload-iperf3-bidir ] && what="--bidir -t 2"
	# -u: iperf3's UDP test, its datagram socket a SOCK_DGRAM rsocket under the preload;
	# 50 Mbit/s for 2 s in 1000-byte datagrams (with the 8-byte ds_header they fit veth's
	# 1024-byte RoCE MTU: a UD message is one packet)
	case $CASE in *-udp) what="-u -b 50M -t 2 -l 1000" ;; esac
	start_server 100 $pre iperf3 -s -1 -B "$SADDR" -p 5201
	if [ -n "$pre" ]; then wait_listen; else wait_tcp 5201; fi
	run_client 100 "$tmp/cli" $pre iperf3 -c "$SADDR" -p 5201 $what -J || fail "client exited $?"
	wait_server || fail "server exited $?"
	# sum_received: the server's count of one direction; with --bidir the reverse
	# direction's is sum_received_bidir_reverse
	n=$(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["end"]
print(e["sum_received"]["bytes"] + e.get("sum_received_bidir_reverse", {}).get("bytes", 0))' "$tmp/cli" 2>/dev/null)
	n=${n:-0}
	echo "iperf3: $n bytes received"
	if [ "$CASE" = preload-iperf3-bidir ] || [ "${CASE%-udp}" != "$CASE" ]; then
		[ "$n" -ge $((1 << 20)) ] || fail "iperf3 $what moved only $n bytes"
	else
		[ "$n" -ge $((100 << 20)) ] || fail "iperf3 says the server received $n bytes of the 200 MiB sent"
	fi
	if [ -n "$pre" ]; then prove "$n"; else disprove; fi
	;;
udpong|udpong-e|udpong-b|udpong-a|udpong-sock)
	# SOCK_DGRAM rsockets (UD QPs): Debian's udpong, the server bound to SADDR (without
	# -b it takes getaddrinfo's first answer, ::1), custom runs of 1000-byte datagrams.
	# -T e: every datagram echoed; the plain case streams them one way (some may be
	# dropped, as UDP; the server's count is what arrived).  -T s is the negative
	# control: the same program over kernel UDP sockets.
	case $CASE in
	udpong) opts="-C 10000 -S 1000" ;;
	udpong-e) opts="-T e -C 2000 -S 1000" ;;
	udpong-b) opts="-T b -T e -C 2000 -S 1000" ;;
	udpong-a) opts="-T a -T e -C 2000 -S 1000" ;;
	udpong-sock) opts="-T s -C 10000 -S 1000" ;;
	esac
	start_server 150 udpong -b "$SADDR" $opts
	_u() { $S ss -lunH "sport = :7174" | grep -q .; }
	wait_for 20 _u || { fail "server never bound UDP 7174"; cat "$tmp/srv" "$tmp/srv.err"; exit 1; }
	run_client 120 "$tmp/cli" udpong -s "$SADDR" $opts || fail "client exited $?"
	stop_server
	# the result line: name bytes xfers total time ...; bytes (a plain number here) times
	# xfers (1k = 1000, rounded down): a lower bound of the data moved
	n=$(awk '$1 == "custom" { x = $3 + 0; if ($3 ~ /k$/) x *= 1000; else if ($3 ~ /m$/) x *= 1000000
		printf "%.0f\n", x * $2 }' "$tmp/cli")
	n=${n:-0}
	echo "udpong: $n bytes of datagrams"
	[ "$n" -gt 0 ] || fail "no result line from the client"
	if [ "$CASE" = udpong-sock ]; then disprove; else prove "$n"; fi
	;;
nopreload-socat)
	# negative control of the proof with a second program: socat over kernel TCP
	head -c $((32 << 20)) /dev/urandom >"$tmp/src"
	start_server 100 socat -u TCP-LISTEN:6000,bind=$SADDR,reuseaddr CREATE:$tmp/dst
	wait_tcp 6000
	run_client 100 "$tmp/cli" socat -u OPEN:$tmp/src TCP:$SADDR:6000 || fail "client exited $?"
	wait_server || fail "server exited $?"
	a=$(sha256sum <"$tmp/src"); b=$(sha256sum <"$tmp/dst" 2>/dev/null)
	expect_eq "sha256 of the copy" "$b" "$a"
	disprove
	;;
*)
	echo "unknown case $CASE"; exit 2 ;;
esac

$S "$CMWAIT" -s -t 2 2>/dev/null
[ "$C" != "$S" ] && $C "$CMWAIT" -s -t 2 2>/dev/null
if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "PASS $TOPO $CASE"
exit 0
