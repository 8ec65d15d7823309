#!/bin/sh
# cpu_split.sh — where the sending core's time goes in a write_bw pair, per Gbit sent, for
# uroce and for its peers in the same run: what is left to gain in uroce's own work, and
# what no RoCEv2 sender on this kernel path can avoid (bench/README.md).
#
#   bench/cpu_split.sh [-b BUILD] [-t SECS] [BENCH]
#
# BENCH is write_bw, veth_write_bw (the default) or veth_jumbo_write_bw.  One repetition of
# `bench/run.sh -r 1 -t SECS -p split BENCH` (default SECS 5) runs under
# `perf record -C 1 -F 499`: the core the clients (the senders) are pinned to, sampled 499
# times a second.  Each sender's samples are taken from 1 s after its first to 1 s before
# its last (perftest's margins), and divided by the rate run.sh measured for it and by that
# span, so that a row reads "samples of the sending core per Gbit sent", comparable between
# senders that ran at different rates.  Columns:
#   copy     the kernel's _copy_from_iter (user buffer into the socket's skbs)
#   kernel   the rest of the kernel on that core (UDP/IP, GSO, the veth, and the receive
#            softirq of the packets, which runs on the sending core)
#   icrc     ISA-L (uroce's ICRC; udp_gso -c's CRC)
#   own      the sender's own user space: uroce's libibverbs.so.1 and libc for uroce, the
#            program itself for the peers
#   app      perftest itself (its code and its __vdso_gettimeofday: uroce never calls it)
#   busy     the share of the span the core was busy with that sender
# The last line: the rate uroce would have with `own` at zero, and that as a ratio to
# iperf3 in the same run.  Exit 0 when every sender had samples.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build SECS=5
while getopts b:t: o; do
	case $o in
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	t) SECS=$OPTARG ;;
	*) echo "usage: bench/cpu_split.sh [-b BUILD] [-t SECS] [BENCH]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
BENCH=${1:-veth_write_bw}
case $BENCH in write_bw | veth_write_bw | veth_jumbo_write_bw) ;; *) echo "cpu_split.sh: $BENCH is not a write_bw bench" >&2; exit 2 ;; esac
work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-cpusplit.XXXXXX")
perf record -q -C 1 -F 499 -o "$work/perf.data" -- \
	"$SRC/bench/run.sh" -b "$BUILD" -r 1 -t "$SECS" -p split "$BENCH" >"$work/run.txt" 2>&1 || true
# run.sh's rows: "BENCH split iperf3 TCP U P ...", "BENCH split udp_gso U P ...",
# "BENCH split udp_gso -c U P ..."
rates=$(awk -v b="$BENCH" '$1 == b && $3 == "iperf3" { print "uroce", $5; print "iperf3", $6 }
	$1 == b && $3 == "udp_gso" && $4 == "-c" { print "udp_gso_c", $6; next }
	$1 == b && $3 == "udp_gso" { print "udp_gso", $5 }' "$work/run.txt")
[ -n "$rates" ] || { echo "cpu_split.sh: no rates from run.sh (see $work/run.txt)" >&2; exit 1; }
echo "# $(grep -m1 '^# uroce bench' "$work/run.txt" | sed 's/^# //')"
echo "# sending core (CPU 1), perf samples per Gbit sent (499 Hz: one sample is 2 ms of CPU); files in $work"
perf script -i "$work/perf.data" -F comm,time,ip,sym,dso 2>/dev/null | awk -v rates="$rates" '
BEGIN {
	n = split(rates, r, "[ \n]")
	for (i = 1; i + 1 <= n; i += 2) rate[r[i]] = r[i + 1]
}
{
	comm = $1; t = $2 + 0; sym = $4; dso = $NF
	if (comm == "ib_write_bw") who = "uroce"
	else if (comm == "iperf3") who = "iperf3"
	else if (comm == "udp_gso") {
		# two runs, plain then -c: told apart by the gap between them
		if (lastg && t - lastg > 0.5) gsorun++
		lastg = t
		who = "gso" gsorun
	} else next
	k = NR; W[k] = who; T[k] = t
	if (dso == "([kernel.kallsyms])") C[k] = sym == "_copy_from_iter" ? "copy" : "kernel"
	else if (dso ~ /libisal/) C[k] = "icrc"
	else if (who == "uroce" && (dso ~ /libibverbs|libc\.so/ || (dso == "([vdso])" && sym != "__vdso_gettimeofday"))) C[k] = "own"
	else if (who == "uroce") C[k] = "app"
	else C[k] = "own"
	if (!(who in first)) first[who] = t
	last[who] = t
}
END {
	# the udp_gso run with ISA-L samples is the -c one
	for (k in W) if (W[k] ~ /^gso/ && C[k] == "icrc") crcrun = W[k]
	for (k in W) {
		w = W[k]
		if (w ~ /^gso/) w = (w == crcrun) ? "udp_gso_c" : "udp_gso"
		W[k] = w
	}
	for (k in W) {
		w = W[k]
		if (!(w in lo)) { lo[w] = T[k]; hi[w] = T[k] }
		if (T[k] < lo[w]) lo[w] = T[k]
		if (T[k] > hi[w]) hi[w] = T[k]
	}
	for (k in W) {
		w = W[k]
		if (T[k] < lo[w] + 1 || T[k] > hi[w] - 1) continue
		S[w, C[k]]++; N[w]++
	}
	printf "%-10s %7s %5s %7s %7s %7s %7s %7s %7s\n", "sender", "Gb/s", "busy", "total", "copy", "kernel", "icrc", "own", "app"
	nw = split("uroce udp_gso_c udp_gso iperf3", order, " ")
	bad = 0
	for (i = 1; i <= nw; i++) {
		w = order[i]
		span = hi[w] - lo[w] - 2
		if (!(w in N) || span <= 0 || !(w in rate) || rate[w] <= 0) { printf "%-10s no samples\n", w; bad = 1; continue }
		g = rate[w] * span
		printf "%-10s %7.2f %4.0f%% %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f\n", (w == "udp_gso_c" ? "udp_gso -c" : w),
		       rate[w], 100 * N[w] / (499 * span), N[w] / g, S[w, "copy"] / g, S[w, "kernel"] / g,
		       S[w, "icrc"] / g, S[w, "own"] / g, S[w, "app"] / g
		tot[w] = N[w] / g; own[w] = S[w, "own"] / g; busy[w] = N[w] / (499 * span)
	}
	# Only a sender whose core was saturated runs at the rate its work per Gbit allows.
	if (!bad && busy["uroce"] < 0.9)
		printf "the sending core of uroce was busy %.0f%% of the time: no projection\n", 100 * busy["uroce"]
	else if (!bad && tot["uroce"] > own["uroce"]) {
		z = rate["uroce"] * tot["uroce"] / (tot["uroce"] - own["uroce"])
		printf "uroce with no user-space work of its own: %.2f Gb/s, %.3fx iperf3 (uroce ran at %.3fx)\n",
		       z, z / rate["iperf3"], rate["uroce"] / rate["iperf3"]
	}
	exit bad
}'
