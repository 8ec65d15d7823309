#!/bin/sh
# instr.sh — instructions uroce's user-space data path spends per ib_write_lat hop, counted
# by callgrind: a figure this machine's noise does not move (bench/README.md).
#
#   bench/instr.sh [-b BUILD]... [-n ITERS] [-l udp|shm|both]
#
# For each BUILD (default build; several -b: their figures side by side, to compare two
# commits built in two trees), Debian's unmodified ib_write_lat -s 2 -n ITERS (default
# 5000) runs between two processes of one host: the server natively, pinned to CPU 0, the
# client under `valgrind --tool=callgrind`, pinned to CPU 1, in private namespaces with only
# lo and a uroced of their own (tests/daemon/nsrun.sh), over the UDP path (UROCE_LINK=udp)
# and/or the shared-memory link.  Each hop of the ping-pong is one post of a 2-byte RDMA
# WRITE (which also carries the held ACK of the peer's last WRITE) and one receive of the
# peer's WRITE and ACK.  Printed per iteration, from callgrind's inclusive counts:
#   post   ibv_post_send: the verbs call, the requester, the ICRC, netio or the ring
#   recv   the receive of the hop's two packets: UDP netio.c rx_one (validation, ICRC
#          check, responder and completer); shm engine.c rx_one (responder and completer:
#          the ring's own reads and the validation are inlined into its poll, which also
#          counts the empty polls, and are left out)
#   hop    post + recv
# Not counted: the empty polls while the client waits (they depend on timing, under
# valgrind above all), the kernel, perftest itself.  Exit 0 when every run produced a figure.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = --inner ]; then
	# inside nsrun.sh: $2 build, $3 link, $4 iterations, $5 callgrind output file
	B=$2 LINK=$3 N=$4 OUT=$5
	export UROCE_LINK="$LINK" UROCE_DAEMON="$B/bin/uroced"
	taskset -c 0 "$B/bin/uroce" run ib_write_lat -x 0 -F -s 2 -n "$N" -p 18515 >"$OUT.srv" 2>&1 &
	spid=$!
	sleep 2
	taskset -c 1 "$B/bin/uroce" run valgrind --tool=callgrind --callgrind-out-file="$OUT" \
		ib_write_lat -x 0 -F -s 2 -n "$N" -p 18515 127.0.0.1 >"$OUT.cli" 2>&1 || true
	wait $spid || true
	exit 0
fi

BUILDS="" N=5000 LINKS="udp shm"
while getopts b:n:l: o; do
	case $o in
	b) BUILDS="$BUILDS $(cd "$OPTARG" && pwd)" ;;
	n) N=$OPTARG ;;
	l) case $OPTARG in both) LINKS="udp shm" ;; udp | shm) LINKS=$OPTARG ;; *) exit 2 ;; esac ;;
	*) echo "usage: bench/instr.sh [-b BUILD]... [-n ITERS] [-l udp|shm|both]" >&2; exit 2 ;;
	esac
done
[ -n "$BUILDS" ] || BUILDS=$(cd "$SRC/build" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-instr.XXXXXX")
echo "# uroce instructions per ib_write_lat hop (callgrind), $N iterations; $(date -u '+%Y-%m-%d %H:%M UTC'); files in $work"
printf '%-5s %8s %8s %8s  %s\n' link post recv hop build
rc=0
for link in $LINKS; do
	for b in $BUILDS; do
		out=$work/cg.$link.$(echo "$b" | tr / _)
		"$SRC/tests/daemon/nsrun.sh" "$SRC/bench/instr.sh" --inner "$b" "$link" "$N" "$out" \
			>>"$work/log" 2>&1 || true
		if [ ! -s "$out" ]; then
			echo "instr.sh: no callgrind output for $link, $b (see $work/log, $out.cli)" >&2
			rc=1
			continue
		fi
		case $link in udp) rx='netio.c:rx_one' ;; *) rx='engine.c:rx_one' ;; esac
		callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null |
			awk -v n="$N" -v rx="$rx" -v link="$link" -v b="$b" '
			function num(s) { gsub(",", "", s); return s + 0 }
			$0 ~ "qp.c:uroce_qp_post_send \\[" && num($1) > post { post = num($1) }
			$0 ~ rx " \\[" && num($1) > recv { recv = num($1) }
			END {
				if (!post || !recv) { printf "%-5s missing figures  %s\n", link, b; exit 1 }
				printf "%-5s %8d %8d %8d  %s\n", link, post / n, recv / n, (post + recv) / n, b
			}' || rc=1
	done
done
exit $rc
