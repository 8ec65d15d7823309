#!/bin/sh
# instr.sh — instructions uroce's user-space data path spends per ib_write_lat hop, counted
# by callgrind: a figure this machine's noise does not move (bench/README.md).
#
#   bench/instr.sh [-b BUILD]... [-n ITERS] [-l udp|shm|both] [-k lat|bw]
#
# For each BUILD (default build; several -b: their figures side by side, to compare two
# commits built in two trees), Debian's unmodified perftest runs between two processes of
# one host, pinned (server CPU 0, client CPU 1), one of them under
# `valgrind --tool=callgrind`, in private namespaces with only lo and a uroced of their own
# (tests/daemon/nsrun.sh), over the UDP path (UROCE_LINK=udp) and/or the shared-memory link.
#
# -k lat (default): ib_write_lat -s 2 -n ITERS (default 5000), the client under callgrind.
# Each hop of the ping-pong is one post of a 2-byte RDMA WRITE (which also carries the held
# ACK of the peer's last WRITE) and one receive of the peer's WRITE and ACK.  Printed per
# iteration, from callgrind's inclusive counts:
#   post   ibv_post_send: the verbs call, the requester, the ICRC, netio or the ring
#   recv   the receive of the hop's two packets: UDP netio.c rx_one (validation, ICRC
#          check, responder and completer); shm engine.c rx_one (responder and completer:
#          the ring's own reads and the validation are inlined into its poll, which also
#          counts the empty polls, and are left out)
#   hop    post + recv
# -k bw: ib_write_bw -s 65536 -m 1024 -n ITERS (default 1000: 64 packets a WRITE), twice:
# the client (the sender) under callgrind, then the server (the receiver).  Printed per
# packet:
#   send   the sender's ibv_post_send and uroce_transport_poll, inclusive: all the work of
#          the sender's thread (perftest polls its CQ between posts, and the poll sends
#          what autocork parked, receives the ACKs, completes), its empty polls included,
#          so this one moves with timing (751-964 in five runs of one build)
#   s_icrc ISA-L's part of it (the ICRC over each packet)
#   recv   the receiver's rx_one, as for lat (UDP: the ICRC check included)
#   r_icrc ISA-L's part of it
# Not counted (but in bw's send): the empty polls while a side waits (they depend on timing, under valgrind
# above all), the kernel, perftest itself.  Exit 0 when every run produced a figure.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = --inner ]; then
	# inside nsrun.sh: $2 build, $3 link, $4 iterations, $5 callgrind output file,
	# $6 kind (lat, bw-cli: the client under callgrind, bw-srv: the server)
	B=$2 LINK=$3 N=$4 OUT=$5 KIND=$6
	export UROCE_LINK="$LINK" UROCE_DAEMON="$B/bin/uroced"
	VG="valgrind --tool=callgrind --callgrind-out-file=$OUT"
	case $KIND in
	lat) args="ib_write_lat -x 0 -F -s 2 -n $N -p 18515" sv="" cv=$VG ;;
	bw-cli) args="ib_write_bw -x 0 -F -s 65536 -m 1024 -n $N -p 18515" sv="" cv=$VG ;;
	bw-srv) args="ib_write_bw -x 0 -F -s 65536 -m 1024 -n $N -p 18515" sv=$VG cv="" ;;
	esac
	taskset -c 0 "$B/bin/uroce" run $sv $args >"$OUT.srv" 2>&1 &
	spid=$!
	# perftest's server listens once it is up (under valgrind that takes seconds)
	sleep 2
	[ -n "$sv" ] && sleep 4
	taskset -c 1 "$B/bin/uroce" run $cv $args 127.0.0.1 >"$OUT.cli" 2>&1 || true
	wait $spid || true
	exit 0
fi

BUILDS="" N="" LINKS="udp shm" KIND=lat
while getopts b:n:l:k: o; do
	case $o in
	b) BUILDS="$BUILDS $(cd "$OPTARG" && pwd)" ;;
	n) N=$OPTARG ;;
	l) case $OPTARG in both) LINKS="udp shm" ;; udp | shm) LINKS=$OPTARG ;; *) exit 2 ;; esac ;;
	k) case $OPTARG in lat | bw) KIND=$OPTARG ;; *) exit 2 ;; esac ;;
	*) echo "usage: bench/instr.sh [-b BUILD]... [-n ITERS] [-l udp|shm|both] [-k lat|bw]" >&2; exit 2 ;;
	esac
done
[ -n "$N" ] || { [ "$KIND" = lat ] && N=5000 || N=1000; }
[ -n "$BUILDS" ] || BUILDS=$(cd "$SRC/build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-instr.XXXXXX")
if [ "$KIND" = lat ]; then
	echo "# uroce instructions per ib_write_lat hop (callgrind), $N iterations; $(date -u '+%Y-%m-%d %H:%M UTC'); files in $work"
	printf '%-5s %8s %8s %8s  %s\n' link post recv hop build
else
	echo "# uroce instructions per packet of ib_write_bw -s 65536 -m 1024 (callgrind), $N WRITEs of 64 packets; $(date -u '+%Y-%m-%d %H:%M UTC'); files in $work"
	printf '%-5s %8s %8s %8s %8s  %s\n' link send s_icrc recv r_icrc build
fi
rc=0
# run LINK BUILD KIND OUT: one callgrind run; 1 when it left no profile
run() {
	"$SRC/tests/daemon/nsrun.sh" "$SRC/bench/instr.sh" --inner "$2" "$1" "$N" "$4" "$3" \
		>>"$work/log" 2>&1 || true
	if [ ! -s "$4" ]; then
		echo "instr.sh: no callgrind output for $1, $2 (see $work/log, $4.cli)" >&2
		return 1
	fi
}
# figures FILE RX: the inclusive counts of ibv_post_send, the transport's poll and RX,
# and the self counts of ISA-L, summed over the profile's functions (a name may carry the
# suffix of a clone the compiler made: rx_one.constprop.0 in a build with LTO)
figures() {
	{ callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | sed 's/^/I /'
	  callgrind_annotate --inclusive=no --threshold=100 "$1" 2>/dev/null | sed 's/^/S /'; } |
		awk -v rx="$2" -v sfx='(\\.(constprop|isra|lto_priv|part)\\.[0-9]+)* \\[' '
		function num(s) { gsub(",", "", s); return s + 0 }
		$1 == "I" && $0 ~ "qp.c:uroce_qp_post_send" sfx && num($2) > post { post = num($2) }
		$1 == "I" && $0 ~ "engine.c:uroce_transport_poll" sfx && num($2) > poll { poll = num($2) }
		$1 == "I" && $0 ~ rx sfx && num($2) > recv { recv = num($2) }
		$1 == "S" && /libisal/ { isal += num($2) }
		END { printf "%d %d %d %d\n", post, poll, recv, isal }'
}
for link in $LINKS; do
	case $link in udp) rx='netio.c:rx_one' ;; *) rx='engine.c:rx_one' ;; esac
	for b in $BUILDS; do
		out=$work/cg.$link.$(echo "$b" | tr / _)
		if [ "$KIND" = lat ]; then
			run "$link" "$b" lat "$out" || { rc=1; continue; }
			set -- $(figures "$out" "$rx")
			if [ "$1" = 0 ] || [ "$3" = 0 ]; then
				printf '%-5s missing figures  %s\n' "$link" "$b"; rc=1; continue
			fi
			printf '%-5s %8d %8d %8d  %s\n' "$link" $(($1 / N)) $(($3 / N)) $((($1 + $3) / N)) "$b"
		else
			run "$link" "$b" bw-cli "$out.tx" || { rc=1; continue; }
			run "$link" "$b" bw-srv "$out.rx" || { rc=1; continue; }
			set -- $(figures "$out.tx" "$rx") $(figures "$out.rx" "$rx")
			# $1 post, $2 poll, $4 ISA-L of the sender; $7 rx_one, $8 ISA-L of the
			# receiver
			if [ "$1" = 0 ] || [ "$7" = 0 ]; then
				printf '%-5s missing figures  %s\n' "$link" "$b"; rc=1; continue
			fi
			pk=$((N * 64))
			printf '%-5s %8d %8d %8d %8d  %s\n' "$link" $((($1 + $2) / pk)) $(($4 / pk)) \
				$(($7 / pk)) $(($8 / pk)) "$b"
		fi
	done
done
exit $rc
