#!/bin/sh
# ucx_apps.sh UROCE TOPO CASE [BINDIR] — UCX and MPI on uroce (issue #13): Debian's
# ucx_info, ucx_perftest, Open MPI 4.1 and MPICH 4.0 programs, through `uroce run`, and
# proof that uroce carried the traffic.  Run by tests/daemon/nsrun.sh (private network,
# pid and mount namespaces: our own uroced(s), killed with the test).
#
#   TOPO lo:    one host, device uroce0 on lo, 127.0.0.1
#   TOPO veth:  two hosts  [netns a: veth0 192.0.2.1] <--veth--> [netns b: veth0 192.0.2.2],
#               a uroced and a device uroce1 (on veth0) in each; the same names on both
#               ends so that one UCX_NET_DEVICES and one hydra -iface fit both
#   BINDIR      where CMake put mpi_check.openmpi / mpi_check.mpich (MPI cases)
#
# Proof of path (prove): the run exits 0; no "UCX ERROR"/"UCX WARN" line; for UCP and MPI
# every ep_cfg line UCX prints at UCX_LOG_LEVEL=info names only TL/DEV:1 lanes (TL rc_verbs
# or ud_verbs, DEV the uroce device) or self/memory, and at least one such uroce lane;
# and uroce's own counters (`uroce stat show link DEV/1`, the device totals over every
# context, summed over the namespaces) moved by at least the bytes the program moved.
# UCX_TLS and UCX_NET_DEVICES are pinned in every run.  The neg-* cases are negative
# controls: the same kind of run with uroce's device hidden (--plain), over UCX's tcp, or
# MPICH left to pick shared memory, each of which the proof must reject.
set -u
UROCE=$1
TOPO=$2
CASE=$3
BIN=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../daemon/lib.sh"
AGENT=$here/ns_agent.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TMPDIR=$tmp
export TMPDIR
PORT=13400

# ------------------------------------------------------------------ topology
# ns_do NS CMD...: CMD in netns NS ("here" = this one).
ns_do() {
	_n=$1
	shift
	if [ "$_n" = here ]; then "$@"; else ip netns exec "$_n" "$@"; fi
}

case $TOPO in
lo)
	"$UROCE" daemon start >/dev/null || { fail "daemon start"; finish; }
	S=""; C=""; SADDR=127.0.0.1; DEV=uroce0; NSS=here ;;
veth)
	mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
	ip netns add a && ip netns add b || { echo "SKIP: no netns"; exit 77; }
	ip link add veth0 netns a type veth peer name veth0 netns b || { echo "SKIP: no veth"; exit 77; }
	for n in a b; do ip -n $n link set lo up; done
	ip -n a addr add 192.0.2.1/24 dev veth0; ip -n b addr add 192.0.2.2/24 dev veth0
	ip -n a link set veth0 up; ip -n b link set veth0 up
	for n in a b; do
		ip netns exec $n "$UROCE" daemon start >/dev/null || fail "daemon start in $n"
		ip netns exec $n "$UROCE" link add uroce1 netdev veth0 >/dev/null || fail "link add in $n"
		wait_for 20 port_active "ip netns exec $n" uroce1 || fail "$n's uroce1 never became active"
	done
	[ $fails -eq 0 ] || finish
	S="ip netns exec a"; C="ip netns exec b"; SADDR=192.0.2.1; DEV=uroce1; NSS="a b" ;;
*)
	echo "unknown topology $TOPO"; exit 2 ;;
esac

# Bytes uroce sent on DEV in netns NS: the device's totals over every context, on both
# of its links: UDP (tx_bytes) and, between two processes of one namespace, the
# shared-memory ring (shm_tx_bytes).
tx_of() {
	_v=$(ns_do "$1" "$UROCE" stat show link $DEV/1 |
		awk '$3 == "total" { for (i = 4; i < NF; i++) if ($i == "tx_bytes" || $i == "shm_tx_bytes") s += $(i + 1) }
		     END { printf "%.0f\n", s }')
	echo "${_v:-0}"
}

# Remember every namespace's count (before_NS) and their sum (before).
tx_before() {
	before=0
	for _n in $NSS; do
		_v=$(tx_of $_n)
		eval "before_$_n=$_v"
		before=$((before + _v))
	done
}

# ------------------------------------------------------------------ proof
# prove LOG MIN_BYTES KIND [TL]: KIND uct (no UCP endpoints) or ucp (ep_cfg lines, at least
# one on TL if given).  Uses tx_before's counts and $run_rc.  Sets pf to the
# number of failed proof checks and prints each.
prove() {
	_log=$1 _min=$2 _kind=$3 _tl=${4:-}
	pf=0
	_no() { echo "PROOF: $*"; pf=$((pf + 1)); }
	[ "$run_rc" -eq 0 ] || _no "the run exited $run_rc"
	if grep -E 'UCX +(ERROR|WARN)' "$_log" >"$tmp/errs"; then
		_no "UCX errors or warnings:"; head -5 "$tmp/errs"
	fi
	if [ "$_kind" = ucp ]; then
		grep -o 'ep_cfg\[[0-9]*\]: .*' "$_log" | sed 's/^ep_cfg\[[0-9]*\]: //' >"$tmp/epcfg"
		if [ ! -s "$tmp/epcfg" ]; then
			_no "no ep_cfg line (UCX_LOG_LEVEL=info)"
		else
			grep -o '([^)]*)' "$tmp/epcfg" | tr -d '()' | tr ' ' '\n' | grep -v '^$' | sort -u >"$tmp/lanes"
			grep -Evx "(rc_verbs|ud_verbs)/$DEV:1|self/memory[0-9]*" "$tmp/lanes" >"$tmp/badlanes"
			[ ! -s "$tmp/badlanes" ] || _no "lanes not on uroce: $(tr '\n' ' ' <"$tmp/badlanes")"
			grep -Eqx "${_tl:-(rc_verbs|ud_verbs)}/$DEV:1" "$tmp/lanes" ||
				_no "no ${_tl:-rc_verbs/ud_verbs} lane on $DEV:1 in: $(tr '\n' ' ' <"$tmp/lanes")"
			echo "ep_cfg lanes: $(tr '\n' ' ' <"$tmp/lanes")"
		fi
	fi
	_moved=0
	for _n in $NSS; do
		_d=$(($(tx_of $_n) - $(eval echo "\$before_$_n")))
		_moved=$((_moved + _d))
		# Two hosts: both sides sent on their uroce device (the ranks did not end up in one
		# namespace talking to itself).  ucx_info -e is one process (MOVERS=a).
		case " ${MOVERS:-$NSS} " in
		*" $_n "*) [ "$_n" = here ] || [ "$_d" -gt 0 ] || _no "uroce's counters in netns $_n did not move" ;;
		esac
	done
	echo "uroce $DEV tx_bytes + shm_tx_bytes moved $_moved, the program moved at least $_min"
	[ "$_moved" -ge "$_min" ] && [ "$_moved" -gt 0 ] || _no "uroce's counters moved $_moved bytes < $_min"
}

# ------------------------------------------------------------------ runs
# perftest NAME SIDE-ENV "ARGS" MIN KIND [TL] [RUN-OPTS]: ucx_perftest server and client
# under `uroce run RUN-OPTS`, each with SIDE-ENV (VAR=value ...).
perftest() {
	_env=$1 _args=$2 _min=$3 _kind=$4 _tl=${5:-} _ropt=${6:-}
	tx_before
	_srv="env $_env ucx_perftest -p $PORT $_args"
	echo "== server: $S uroce run $_ropt $_srv"
	$S timeout 100 "$UROCE" run $_ropt $_srv >"$tmp/srv" 2>&1 &
	_spid=$!
	_listening() { $S ss -ltnH "sport = :$PORT" | grep -q LISTEN; }
	if ! wait_for 30 _listening; then
		echo "server never listened"
		kill $_spid 2>/dev/null
		wait $_spid
		run_rc=1
	else
		echo "== client: $C uroce run $_ropt $_srv $SADDR"
		$C timeout 100 "$UROCE" run $_ropt $_srv "$SADDR" >"$tmp/cli" 2>&1
		run_rc=$?
		wait $_spid
		_src=$?
		[ $run_rc -ne 0 ] || run_rc=$_src
	fi
	echo "-- server output"; cat "$tmp/srv"
	echo "-- client output"; cat "$tmp/cli"
	cat "$tmp/srv" "$tmp/cli" >"$tmp/all"
	grep -q '^Final:' "$tmp/cli" || [ $run_rc -ne 0 ] || run_rc=3
	prove "$tmp/all" "$_min" "$_kind" "$_tl"
}

# mpi LAUNCHER-CMD... : the launcher's output in $tmp/all, its status in run_rc.
mpi() {
	tx_before
	echo "== $*"
	# A launcher still running at 110 s is about to be killed (exit 124): record then what
	# each thread of the MPI processes waits in, so that a hang at shutdown (seen once
	# under ASan across namespaces, not reproduced in 13 ASan runs since) leaves a trace.
	# (It looks once a second, so that what it leaves behind when killed is a sleep of 1 s.)
	( _i=0
	  while [ $_i -lt 110 ]; do sleep 1; _i=$((_i + 1)); done
	  echo "== still running after 110 s (pid ppid tid stat wchan command):"
	  # every thread of the namespace, unfiltered: in the one hang recorded (local CI,
	  # 2026-12-03) a filter on the MPI programs' names matched nothing
	  ps -eLo pid,ppid,tid,stat,wchan:32,args ) >"$tmp/hang" 2>&1 &
	_wd=$!
	timeout 120 "$@" >"$tmp/all" 2>&1
	run_rc=$?
	kill $_wd 2>/dev/null
	wait $_wd 2>/dev/null
	cat "$tmp/all"
	[ $run_rc -ne 124 ] || cat "$tmp/hang"
}

# Open MPI 4.1: pml ucx and osc ucx only (Debian's openmpi-mca-params.conf excludes both
# by default), btl self, no libfabric MTL, ranks not bound (engine threads inherit it).
OMPI="mpirun.openmpi --allow-run-as-root -np 2 --bind-to none --mca osc ucx --mca btl self
	--mca mtl ^ofi,psm,psm2"
OMPI_PML="--mca pml ucx --mca opal_common_ucx_devices any"
OMPI_UCX="-x UCX_TLS=rc_v,self -x UCX_NET_DEVICES=$DEV:1 -x UCX_LOG_LEVEL=info"
# Open MPI across namespaces: one slot per "host", orted in b through the agent.
printf '192.0.2.1 slots=1\n192.0.2.2 slots=1\n' >"$tmp/hosts"
OMPI_VETH="--hostfile $tmp/hosts --mca plm_rsh_agent $AGENT --mca oob_tcp_if_include 192.0.2.0/24"
# MPICH 4.0 (ch4:ucx): as if every rank were on another node.
MPICH_UCX="-genv MPIR_CVAR_NOLOCAL 1 -genv UCX_TLS rc_v -genv UCX_NET_DEVICES $DEV:1 -genv UCX_LOG_LEVEL info"
MPICH_VETH="-launcher ssh -launcher-exec $AGENT -hosts 192.0.2.1,192.0.2.2 -n 2 -ppn 1 -iface veth0"

# ompi_run [MCA...] -- PROG...: one host: `uroce run mpirun ...`; two: mpirun in a, every
# rank wrapped in `uroce run` (ip netns exec in the agent remounts /sys).  MCA replaces
# $OMPI_PML when given.
ompi_run() {
	_extra=""
	while [ "$1" != -- ]; do _extra="$_extra $1"; shift; done
	shift
	[ -n "$_extra" ] || _extra=$OMPI_PML
	if [ "$TOPO" = lo ]; then
		mpi "$UROCE" run $OMPI $_extra $OMPI_UCX "$@"
	else
		mpi $S $OMPI $_extra $OMPI_VETH $OMPI_UCX "$UROCE" run "$@"
	fi
}

mpich_run() {
	_ucx=$1
	shift
	if [ "$TOPO" = lo ]; then
		mpi "$UROCE" run mpiexec.mpich -n 2 $_ucx "$@"
	else
		mpi $S mpiexec.hydra $MPICH_VETH $_ucx "$UROCE" run "$@"
	fi
}

need_bin() {
	[ -x "$BIN/$1" ] || { fail "$BIN/$1 was not built (mpicc.${1#mpi_check.} missing? install libopenmpi-dev / libmpich-dev)"; finish; }
}

# expect_out PATTERN WHAT: the run's output has a line matching PATTERN.
expect_out() {
	grep -Eq "$1" "$tmp/all" || fail "$2: no line matching /$1/"
}

check_proof() {
	[ "$pf" -eq 0 ] || fail "proof of path: $pf check(s) failed"
}

UCT_RC="-d $DEV:1 -x rc_verbs"
UCT_UD="-d $DEV:1 -x ud_verbs"
PIN_RC="UCX_TLS=rc_v UCX_NET_DEVICES=$DEV:1 UCX_LOG_LEVEL=info"
PIN_UD="UCX_TLS=ud_v UCX_NET_DEVICES=$DEV:1 UCX_LOG_LEVEL=info"
MIB=1048576

case $CASE in
info-d)
	$S "$UROCE" run ucx_info -d >"$tmp/all" 2>&1
	run_rc=$?
	cat "$tmp/all"
	expect_eq "ucx_info -d status" $run_rc 0
	awk -v d="$DEV" '/# Memory domain:/ { md = $4 } /Transport:/ { tl = $3 } /Device:/ && md == d { print tl, $3 }' \
		"$tmp/all" | sort >"$tmp/tl"
	expect_eq "transports on $DEV" "$(tr '\n' ' ' <"$tmp/tl")" "rc_verbs $DEV:1 ud_verbs $DEV:1 "
	grep -q "Component: ib" "$tmp/all" || fail "no ib component"
	;;
info-e)
	tx_before
	# One process, two workers connected through the network address (the server's side).
	MOVERS=$([ $TOPO = lo ] && echo here || echo a)
	$S env $PIN_RC "$UROCE" run ucx_info -e -u t -P inter >"$tmp/all" 2>&1
	run_rc=$?
	cat "$tmp/all"
	expect_out "lane\[0\]: +0:rc_verbs/$DEV:1" "ucx_info -e lane"
	prove "$tmp/all" 1 ucp rc_verbs; check_proof ;;
# --- UCT level: rc_verbs, then ud_verbs
uct-rc-put_bw)  perftest "" "$UCT_RC -t put_bw -D zcopy -s 65536 -n 2000 -w 100" $((65536 * 2000)) uct; check_proof ;;
uct-rc-put_lat) perftest "" "$UCT_RC -t put_lat -s 8 -n 2000 -w 100" $((8 * 2 * 2000)) uct; check_proof ;;
uct-rc-get)     perftest "" "$UCT_RC -t get -D zcopy -s 65536 -n 1000 -w 100" $((65536 * 1000)) uct; check_proof ;;
uct-rc-am_lat)  perftest "" "$UCT_RC -t am_lat -s 8 -n 2000 -w 100" $((8 * 2 * 2000)) uct; check_proof ;;
uct-rc-am_bw)   perftest "" "$UCT_RC -t am_bw -D bcopy -s 4096 -n 2000 -w 100" $((4096 * 2000)) uct; check_proof ;;
uct-rc-fadd)    perftest "" "$UCT_RC -t fadd -n 2000 -w 100" $((8 * 2000)) uct; check_proof ;;
uct-rc-cswap)   perftest "" "$UCT_RC -t cswap -n 2000 -w 100" $((8 * 2000)) uct; check_proof ;;
uct-ud-am_lat)  perftest "" "$UCT_UD -t am_lat -s 8 -n 2000 -w 100" $((8 * 2 * 2000)) uct; check_proof ;;
uct-ud-am_bw)   perftest "" "$UCT_UD -t am_bw -D bcopy -s 512 -n 2000 -w 100" $((512 * 2000)) uct; check_proof ;;
# --- UCP level: UCX_TLS=rc_v (rc_verbs + ud_verbs for wireup), then ud_v
ucp-rc-* | ucp-ud-*)
	tl=$(echo "$CASE" | cut -d- -f2)
	t=$(echo "$CASE" | cut -d- -f3)
	if [ "$tl" = rc ]; then pin=$PIN_RC; want=rc_verbs; else pin=$PIN_UD; want=ud_verbs; fi
	case $t in
	tag_lat)   args="-t tag_lat -s 8 -n 2000 -w 100"; min=$((8 * 2 * 2000)) ;;
	tag_bw)    args="-t tag_bw -s $MIB -n 100 -w 10"; min=$((MIB * 100)) ;;
	ucp_put)   args="-t ucp_put_bw -s 65536 -n 500 -w 50"; min=$((65536 * 500)) ;;
	ucp_get)   args="-t ucp_get -s 65536 -n 500 -w 50"; min=$((65536 * 500)) ;;
	stream_bw) args="-t stream_bw -s 65536 -n 500 -w 50"; min=$((65536 * 500)) ;;
	*) echo "unknown case $CASE"; exit 2 ;;
	esac
	perftest "$pin" "$args" $min ucp $want; check_proof ;;
# --- Open MPI 4.1
ompi-ring)
	ompi_run -- /usr/bin/python3 -m mpi4py.bench ringtest -n $MIB -l 50
	expect_out '^time for 50 loops = .* \(2 processes, 1048576 bytes\)' "ringtest"
	prove "$tmp/all" $((MIB * 50 * 2)) ucp rc_verbs; check_proof ;;
ompi-hello)
	ompi_run -- /usr/bin/python3 -m mpi4py.bench helloworld
	expect_out '^Hello, World! I am process 0 of 2 on ' "helloworld rank 0"
	expect_out '^Hello, World! I am process 1 of 2 on ' "helloworld rank 1"
	prove "$tmp/all" 1 ucp rc_verbs; check_proof ;;
ompi-netpipe)
	ompi_run -- NPopenmpi -i -u $MIB -o /dev/null
	n=$(grep -c 'Integrity check passed' "$tmp/all")
	echo "NetPIPE: $n sizes checked"
	[ "$n" -ge 20 ] || fail "NetPIPE: $n integrity checks passed, want every size up to 1 MiB"
	! grep -qi 'integrity check failed' "$tmp/all" || fail "NetPIPE: an integrity check failed"
	prove "$tmp/all" $((MIB * 2)) ucp rc_verbs; check_proof ;;
ompi-check)
	need_bin mpi_check.openmpi
	ompi_run -- "$BIN/mpi_check.openmpi"
	expect_out '^mpi_check: [0-9]+ checks passed, 0 failed' "mpi_check"
	b=$(sed -n 's/^mpi_check: .* failed, \([0-9]*\) bytes sent by rank 0$/\1/p' "$tmp/all")
	prove "$tmp/all" "${b:-1}" ucp rc_verbs; check_proof ;;
ompi-driver)
	# pml ucx chosen over ob1 by the device/driver link of the tree (its basename, "uroce",
	# matches opal_common_ucx_devices), not forced.
	ompi_run --mca pml ucx,ob1 --mca opal_common_ucx_devices uroce --mca opal_common_ucx_verbose 2 \
		--mca pml_ucx_verbose 2 -- /usr/bin/python3 -m mpi4py.bench helloworld
	expect_out "driver '.*/uroce' matched by 'uroce'" "device/driver match"
	expect_out 'returning priority 51' "pml ucx priority"
	expect_out '^Hello, World! I am process 1 of 2 on ' "helloworld rank 1"
	prove "$tmp/all" 1 ucp rc_verbs; check_proof ;;
ompi-shim)
	# The same ringtest with every `uroce run` on the LD_PRELOAD shim (the fallback where
	# namespaces are refused): mpirun, orted and the ranks inherit it.
	UROCE_RUN_MODE=shim
	export UROCE_RUN_MODE
	ompi_run -- /usr/bin/python3 -c 'import os; os.write(1, ("rank view %s\n" % os.environ.get("UROCE_RUN")).encode())
from mpi4py import bench; bench.main(["ringtest", "-n", "1048576", "-l", "20"])'
	expect_out '^time for 20 loops = ' "ringtest"
	[ "$(grep -c '^rank view shim$' "$tmp/all")" -eq 2 ] || fail "both ranks on the shim"
	prove "$tmp/all" $((MIB * 20 * 2)) ucp rc_verbs; check_proof ;;
# --- MPICH 4.0 (mpi4py in Debian is built for Open MPI only)
mpich-netpipe)
	mpich_run "$MPICH_UCX" NPmpich2 -i -u $MIB -o /dev/null
	n=$(grep -c 'Integrity check passed' "$tmp/all")
	echo "NetPIPE: $n sizes checked"
	[ "$n" -ge 20 ] || fail "NetPIPE: $n integrity checks passed"
	! grep -qi 'integrity check failed' "$tmp/all" || fail "NetPIPE: an integrity check failed"
	prove "$tmp/all" $((MIB * 2)) ucp rc_verbs; check_proof ;;
mpich-check)
	need_bin mpi_check.mpich
	mpich_run "$MPICH_UCX" "$BIN/mpi_check.mpich"
	expect_out '^mpi_check: [0-9]+ checks passed, 0 failed' "mpi_check"
	b=$(sed -n 's/^mpi_check: .* failed, \([0-9]*\) bytes sent by rank 0$/\1/p' "$tmp/all")
	prove "$tmp/all" "${b:-1}" ucp rc_verbs; check_proof ;;
# --- negative controls: the proof must reject each of these
neg-uct-plain)
	# uroce's device hidden from UCX (no /dev/infiniband): the UCT run cannot use it.
	perftest "" "$UCT_RC -t put_bw -D zcopy -s 65536 -n 200 -w 10" $((65536 * 200)) uct "" --plain
	[ "$pf" -gt 0 ] || fail "negative control: a run with the device hidden passed the proof" ;;
neg-ucp-plain)
	perftest "$PIN_RC" "-t tag_bw -s $MIB -n 20 -w 2" $((MIB * 20)) ucp rc_verbs --plain
	[ "$pf" -gt 0 ] || fail "negative control: a run with the device hidden passed the proof" ;;
neg-ucp-tcp)
	# The same UCP run over UCX's tcp transport completes, and the proof says so.
	perftest "UCX_TLS=tcp UCX_NET_DEVICES=$( [ $TOPO = lo ] && echo lo || echo veth0) UCX_LOG_LEVEL=info" \
		"-t tag_bw -s $MIB -n 20 -w 2" $((MIB * 20)) ucp rc_verbs
	expect_eq "the tcp run itself" "$run_rc" 0
	[ "$pf" -gt 0 ] || fail "negative control: a run over tcp passed the proof" ;;
neg-mpich-shm)
	# MPICH with UCX_TLS left open puts its ranks on shared memory (sysv/cma), even across
	# network namespaces: the run passes, the proof must not.
	mpich_run "-genv MPIR_CVAR_NOLOCAL 1 -genv UCX_NET_DEVICES $DEV:1 -genv UCX_LOG_LEVEL info" \
		NPmpich2 -i -u 65536 -o /dev/null
	expect_eq "the shared-memory run itself" "$run_rc" 0
	prove "$tmp/all" $((65536 * 2)) ucp rc_verbs
	[ "$pf" -gt 0 ] || fail "negative control: MPICH over shared memory passed the proof" ;;
*)
	echo "unknown case $CASE"; exit 2 ;;
esac
finish
