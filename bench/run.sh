#!/bin/sh
# bench/run.sh — uroce's data-path benchmarks, each as a RATIO to a peer measured in the same run.
#
#   bench/run.sh [-b BUILD] [-r REPS] [-t SECS] [-p split|same|both] [BENCH...]
#
#   BUILD  build directory, already built (default: build/ under the source tree); nothing is
#          built here.  Needs BUILD/bin/{uroce,uroced,udp_pingpong,udp_pps,udp_roce_pp,udp_gso,
#          shm_ring,cpu_rtt}, BUILD/lib.
#   REPS   repetitions of each pair, uroce and peer interleaved (default 5); the median is kept
#   SECS   seconds measured per bandwidth / message-rate run, an integer (default 3; perftest
#          runs SECS+2 with a 1 s margin at each end, see below)
#   split  server pinned to CPU 0, client to CPU 1 (a wakeup across vCPUs costs 15-20 us here)
#   same   server and client both pinned to CPU 0
#   BENCH  write_bw write_lat send_bw (the UDP path, UROCE_LINK=udp), shm_write_bw shm_write_lat
#          shm_send_bw shm_read_bw shm_atomic_bw (the same-host shared-memory link,
#          UROCE_LINK=shm), veth_write_bw veth_write_lat veth_jumbo_write_bw (the UDP path
#          between two network namespaces joined by a veth pair, a uroced in each; see
#          below) (default: all these); ucx_put_bw ucx_tag_lat, or ucx for both, and
#          cm_connect (not in the default set: cm_connect needs uroced's connection manager
#          and BUILD/bin/{cm_wait,tcp_connrate}); qps_write_bw (shm) and qps_write_bw_udp
#          (not in the default set): ib_write_bw -q $QPS (default 1000) against the same
#          perftest with -q 1 in the same repetition (issue #16 section 3, target >= 0.9x)
#
# benchmark  uroce (Debian's unmodified perftest via `uroce run`)   peer (same pinning, same run)
# write_bw   ib_write_bw -x 0 -s 65536 -D SECS+2 -f 1, one RC QP      iperf3 -c 127.0.0.1 -t SECS, one TCP stream
#                                                                  and udp_gso -s uroce: the bytes of uroce's
#                                                                  64 KiB WRITEs handed to UDP in netio's shape,
#                                                                  no ICRC, protocol or ACKs (the kernel's share);
#                                                                  and udp_gso -c: the same with every packet's
#                                                                  CRC computed at both ends (the kernel's share
#                                                                  + the ICRC, the floor of a RoCEv2 sender)
# write_lat  ib_write_lat -x 0 -s 2 -n 20000 (busy polling)        udp_pingpong -z 2 -n 20000 (busy polling)
#                                                                  and, as a second reference, udp_pingpong -T:
#                                                                  a sleeping thread receives and hands over to
#                                                                  the spinning main thread (uroce's structure
#                                                                  before the poll lease; see bench/README.md);
#                                                                  and udp_roce_pp: uroce's packets and socket
#                                                                  options without uroce (the kernel's share);
#                                                                  and udp_roce_pp -u: the same through uroce's
#                                                                  socket design (a reuseport group steered by
#                                                                  QPN, a separate send socket, a second thread:
#                                                                  the kernel's share of uroce's structure)
# send_bw    ib_send_bw -x 0 -s 64 -D SECS+2 -f 1 (message rate)    udp_pps: 80-byte sendto() datagrams, counted
#                                                                  at the receiver (80 B = BTH + 64 + ICRC)
# ucx_put_bw ucx_perftest -d uroce0:1 -x rc_verbs -t put_bw           the same over UCX's tcp transport on
#            -D zcopy -s 65536 (UCT, MB/s overall)                 127.0.0.1 (-d lo -x tcp)
# ucx_tag_lat ucx_perftest -t tag_lat -s 8 (UCP, UCX_TLS=rc_v,         the same with UCX_TLS=tcp UCX_NET_DEVICES=lo
#            UCX_NET_DEVICES=uroce0:1; typical one-way us)
#            (both sides of a ucx pair run under `uroce run`: the same environment; over
#            the shared-memory link, UROCE_LINK=shm, the default between two processes)
# cm_connect cmtime -c 100 (rdmacm-utils): 100 RC connections set    tcp_connrate -n 100: 100 TCP connections
#            up in parallel through uroce's CM; the rate is 100 over   opened at once, each counted when the
#            the sum of its create id, resolve addr, resolve route,    client has read the byte the server's
#            create qp and connect steps (conn/s; no target)          accept() wrote (conn/s)
# rsocket_bw iperf3 -t SECS, client and server both under           iperf3 TCP, the same command without
#            LD_PRELOAD=librspreload.so (rsockets, issue #14) via      the preload or uroce (not in the
#            `uroce run`, UDP link; shm_rsocket_bw: the same over the   default set; needs BUILD/bin/cm_wait)
#            shared-memory link (sender's Gbit/s, like write_bw)
# The veth_* benchmarks are write_bw and write_lat between two hosts: [netns a: va 192.0.2.1]
# <--veth--> [netns b: vb 192.0.2.2], a uroced and a device uroce1 on each veth, server in a
# and client in b, and every peer across the same veth (issue #16 section 2).  veth_* keep
# the veth's default MTU, 1500 (RoCE path MTU 1024: a 64 KiB WRITE is 64 packets, and
# udp_gso runs -m 1024); veth_jumbo_write_bw sets MTU 9000 on both ends (path MTU 4096,
# as RoCE is usually deployed).
# The shm_* benchmarks run the same perftest over the shared-memory link (issue #16) against
# the same peers, and against two more measured in the same run:
#   shm_ring (bench/shm_ring.c): a plain two-process memfd ring, no RDMA -- the shared-
#            memory ceiling (bw: 64 KiB in 4 KiB records, two copies; lat: a ping-pong of
#            8 bytes; rate: 64-byte messages);
#   UCX's own shared memory: ucx_perftest -d memory -x posix -t put_bw -s 65536 and
#            -t am_lat -s 8 (what a user would pick instead on one host).
# shm_write_bw  ib_write_bw 64 KiB           iperf3 (target >= 3.0x); shm_ring bw; UCX put_bw
# shm_write_lat ib_write_lat 2 B             udp_pingpong (target <= 0.5x); shm_ring lat; UCX am_lat
# shm_send_bw   ib_send_bw 64 B, Mpps        udp_pps (target >= 10x); shm_ring rate
# shm_read_bw   ib_read_bw 64 KiB            iperf3 (reported); shm_ring bw
# shm_atomic_bw ib_atomic_bw (fetch-add), Mpps  udp_pps (reported)
#
# The CPUs' placement (split pinning): the host moves the two vCPUs between places that share
# a cache and places that do not, and far apart every sender the kernel copies for runs
# at about half, uroce, udp_gso and iperf3 alike (bench/RESULTS.md, 2026-12-05).  bench/cpu_rtt.c probes a cache
# line's round trip between the two CPUs before and after every run; the summary repeats the
# ratios over the runs whose CPUs stayed near (under 200 ns: 50-80 here) and over those that
# stayed far (320-370 here), as "[near]" and "[far]" rows.  A run the host moved both ways
# between the probes is not told apart.
# Every pair runs in a private user/network/pid namespace (tests/daemon/nsrun.sh) with lo
# only and its own uroced (UROCE_DAEMON=BUILD/bin/uroced, started on demand by `uroce run`),
# so nothing of the host's network or of other runs is involved.  Exit status: 0 when every
# run produced a figure, 1 otherwise (targets missed are reported, not failed).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)

# ---------------------------------------------------------------- inside the namespace
if [ "${1:-}" = --inner ]; then
	BENCH=$2 PIN=$3 REPS=$4 SECS=$5 BUILD=$6 OUT=$7
	UROCE=$BUILD/bin/uroce
	export UROCE_DAEMON=$BUILD/bin/uroced
	# The link: the UDP benchmarks measure the socket path, the shm_* ones the same-host
	# shared-memory link (both processes are on one host here); UCX's run over the link a
	# user of one host gets by default, the shared-memory one (issue #13: after that link,
	# UCX over uroce must beat UCX over tcp).
	case $BENCH in shm_* | qps_write_bw | ucx_*) export UROCE_LINK=shm ;; *) export UROCE_LINK=udp ;; esac
	# KIND: what runs (veth_write_bw runs write_bw); HOST: the server's address; NSA/NSB:
	# the server's and client's network namespace prefix; DEVARG: perftest's device
	KIND=$BENCH HOST=127.0.0.1 NSA="" NSB="" DEVARG="" PMTU=4096
	case $BENCH in veth_*)
		KIND=${BENCH#veth_} KIND=${KIND#jumbo_} HOST=192.0.2.1
		NSA="ip netns exec a" NSB="ip netns exec b" DEVARG="-d uroce1"
		vmtu=1500
		case $BENCH in veth_jumbo_*) vmtu=9000 ;; esac
		# the transport tests' two-host topology (a uroced and uroce1 in each netns, ports
		# ACTIVE), in nsrun.sh's private mount namespace
		. "$SRC/tests/daemon/lib.sh"
		UROCE=$BUILD/bin/uroce VETH_MTU=$vmtu netns_veth_setup || { echo "run.sh: veth setup failed"; exit 1; }
		PMTU=$($NSA "$BUILD/bin/uroce" run ibv_devinfo -d uroce1 -v | awk '$1 == "active_mtu:" { print $2 }')
		;;
	esac
	# Two busy-pollers sharing one CPU hand over only when the scheduler's slice ends, so the
	# same-CPU latency run is short (both uroce and the peer): it measures the scheduler.
	if [ "$PIN" = split ]; then SCPU=0 CCPU=1 LITERS=20000; else SCPU=0 CCPU=0 LITERS=500; fi
	S="$NSA taskset -c $SCPU timeout 120"
	C="$NSB taskset -c $CCPU timeout 120"
	# 1,000 QPs take perftest half a minute or more to set up on a loaded machine.
	case $BENCH in qps_*) S="taskset -c $SCPU timeout 600" C="taskset -c $CCPU timeout 600" ;; esac
	log=$(dirname "$OUT")/log.$BENCH.$PIN
	: >"$log"
	[ -n "$NSA" ] && echo "== veth MTU $vmtu, RoCE path MTU $PMTU" >>"$log"

	# Poll until a port listens (bounded): the client starts only after the server is ready.
	wait_port() { # PROTO(t|u) PORT
		i=0
		while ! $NSA ss -${1}lnH "sport = :$2" | grep -q .; do
			i=$((i + 1))
			[ $i -gt 1000 ] && return 1
			sleep 0.01
		done
	}
	# kern_share TAG PORTOFF [-c]: one udp_gso pair (the receiver's figure, as TAG)
	kern_share() {
		echo "== rep $rep udp_gso $3" >>"$log"
		$S "$BUILD/bin/udp_gso" -r $3 -p $((port + $2)) -d "$SECS" -m $PMTU >"$OUT.srv" 2>&1 &
		spid=$!
		wait_port u $((port + $2)) &&
			$C "$BUILD/bin/udp_gso" -t $HOST $3 -p $((port + $2)) -d "$SECS" -s uroce -m $PMTU >"$OUT.cli" 2>&1
		wait $spid
		cat "$OUT.srv" "$OUT.cli" >>"$log"
		emit "$1" $rep "$(sed -n 's/^udp_gso recv gbps=\([0-9.]*\).*/\1/p' <"$OUT.srv")"
	}
	# field N of the client's line whose first field is SIZE (perftest's result row)
	pt_field() { awk -v s="$1" -v f="$2" '$1 == s && NF >= f { v = $f } END { if (v != "") print v }'; }
	# only numbers count (perftest prints "inf" when its cycle count failed)
	put() { case $3 in '' | *[!0-9.]*) return ;; esac; echo "$BENCH $PIN $1 $2 $3" >>"$OUT"; }
	# Where the host had the two vCPUs (bench/cpu_rtt.c): a cache line's round trip between
	# the server's and the client's CPU, in ns; nothing with both on one CPU.
	place() { [ "$SCPU" != "$CCPU" ] && "$BUILD/bin/cpu_rtt" -a $SCPU -b $CCPU 2>/dev/null | sed -n 's/.* ns=\([0-9.]*\)$/\1/p'; }
	# emit TAG REP FIGURE, right after the run that gave it: the figure, and the placement
	# around that run (plh_TAG the longer and pll_TAG the shorter of the round trips probed
	# before and after it: the host may move the vCPUs during a run)
	emit() {
		put "$@"
		pa=$(place)
		[ -n "$pa" ] && [ -n "$pl_last" ] || { pl_last=$pa; return; }
		put "plh_$1" "$2" "$(echo "$pl_last $pa" | awk '{ print ($1 > $2 ? $1 : $2) }')"
		put "pll_$1" "$2" "$(echo "$pl_last $pa" | awk '{ print ($1 < $2 ? $1 : $2) }')"
		pl_last=$pa
	}

	# ucx_side TAG ENV ARGS COL: a ucx_perftest pair under `uroce run` with ENV; emits field
	# COL of the client's Final: row (UCX's own tcp transport is the peer's side).
	ucx_side() {
		echo "== rep $rep $1: $2 ucx_perftest $3" >>"$log"
		$S env $2 "$UROCE" run ucx_perftest -p $uport $3 >"$OUT.srv" 2>&1 &
		spid=$!
		if wait_port t $uport; then
			$C env $2 "$UROCE" run ucx_perftest -p $uport $3 127.0.0.1 >"$OUT.cli" 2>&1
		else
			echo "server never listened" >"$OUT.cli"
		fi
		wait $spid
		cat "$OUT.srv" "$OUT.cli" >>"$log"
		emit "$1" $rep "$(awk -v f="$4" '$1 == "Final:" { v = $f } END { print v }' <"$OUT.cli")"
		uport=$((uport + 1))
	}

	[ -z "$NSA" ] && "$UROCE" daemon start >>"$log" 2>&1
	port=18515
	uport=13600
	rep=1
	while [ $rep -le "$REPS" ]; do
		pl_last=$(place)
		port=$((port + 1))
		if [ "$BENCH" = cm_connect ]; then
			# uroce: cmtime's server runs until killed; the client sets up CONNS
			# connections and prints each step's total time
			CONNS=100
			echo "== rep $rep cmtime -c $CONNS" >>"$log"
			$S "$UROCE" run cmtime -p $port >"$OUT.srv" 2>&1 &
			spid=$!
			if "$BUILD/bin/cm_wait" -t 20 >>"$log" 2>&1; then
				$C "$UROCE" run cmtime -s 127.0.0.1 -p $port -c $CONNS >"$OUT.cli" 2>&1
			else
				echo "no CM listener (does this uroced have the connection manager?)" >"$OUT.cli"
			fi
			kill $spid 2>/dev/null
			wait $spid 2>/dev/null
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit uroce $rep "$(awk -v n=$CONNS -F: '
				$1 ~ /^(create id|resolve addr|resolve route|create qp|connect) *$/ {
					split($2, f, " "); ms += f[1]; k++ }
				END { if (k == 5 && ms > 0) printf "%.1f", n * 1000 / ms }' <"$OUT.cli")"
			# the peer: as many TCP connections, opened at once
			echo "== rep $rep peer tcp_connrate -n $CONNS" >>"$log"
			$S "$BUILD/bin/tcp_connrate" -s -p $((port + 1000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port t $((port + 1000)) &&
				$C "$BUILD/bin/tcp_connrate" -c 127.0.0.1 -p $((port + 1000)) -n $CONNS >"$OUT.cli" 2>&1
			kill $spid 2>/dev/null
			wait $spid 2>/dev/null
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit peer $rep "$(sed -n 's/^tcp_connrate .* rate=\([0-9.]*\).*/\1/p' <"$OUT.cli")"
			rep=$((rep + 1))
			continue
		fi
		if [ "$BENCH" = rsocket_bw ] || [ "$BENCH" = shm_rsocket_bw ]; then
			# uroce: unmodified iperf3 on rsockets (librspreload), both sides; the
			# server's rlisten is an RDMA CM listener, which cm_wait sees
			pre="env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"
			echo "== rep $rep iperf3 over rsockets" >>"$log"
			$S "$UROCE" run $pre iperf3 -s -1 -p $port >"$OUT.srv" 2>&1 &
			spid=$!
			if "$BUILD/bin/cm_wait" -t 20 >>"$log" 2>&1; then
				$C "$UROCE" run $pre iperf3 -c 127.0.0.1 -p $port -t "$SECS" -J >"$OUT.cli" 2>&1
			else
				echo "no CM listener (does this uroced have the connection manager?)" >"$OUT.cli"
				kill $spid 2>/dev/null
			fi
			wait $spid 2>/dev/null
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit uroce $rep "$(jq -r '.end.sum_sent.bits_per_second / 1e9' <"$OUT.cli" 2>/dev/null)"
			# the peer: the same iperf3 over kernel TCP, pinned the same way
			echo "== rep $rep peer iperf3 TCP" >>"$log"
			$S iperf3 -s -1 -p $((port + 1000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port t $((port + 1000)) &&
				$C iperf3 -c 127.0.0.1 -p $((port + 1000)) -t "$SECS" -J >"$OUT.cli" 2>&1
			wait $spid
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit peer $rep "$(jq -r '.end.sum_sent.bits_per_second / 1e9' <"$OUT.cli" 2>/dev/null)"
			rep=$((rep + 1))
			continue
		fi
		case $BENCH in
		ucx_put_bw)
			# Final: iterations, latency typical/average/overall, bandwidth average/overall
			a="-t put_bw -D zcopy -s 65536 -n 20000 -w 1000"
			ucx_side uroce "" "-d uroce0:1 -x rc_verbs $a" 7
			ucx_side peer "" "-d lo -x tcp $a" 7
			rep=$((rep + 1))
			continue ;;
		ucx_tag_lat)
			a="-t tag_lat -s 8 -n $LITERS -w 100"
			ucx_side uroce "UCX_TLS=rc_v UCX_NET_DEVICES=uroce0:1" "$a" 3
			ucx_side peer "UCX_TLS=tcp UCX_NET_DEVICES=lo" "$a" 3
			rep=$((rep + 1))
			continue ;;
		esac
		case $KIND in
		# perftest -D measures between a margin (-f) after the start and a margin before
		# the end: -D SECS+2 -f 1 measures SECS seconds, like the peer's run.
		write_bw | shm_write_bw) args="-x 0 -F --report_gbits -s 65536 -D $((SECS + 2)) -f 1 -p $port"; tool=ib_write_bw; size=65536; col=4 ;;
		qps_write_bw | qps_write_bw_udp) args="-x 0 -F --report_gbits -s 65536 -D $((SECS + 2)) -f 1 -q ${QPS:-1000} -p $port"; tool=ib_write_bw; size=65536; col=4 ;;
		send_bw | shm_send_bw) args="-x 0 -F -s 64 -D $((SECS + 2)) -f 1 -p $port"; tool=ib_send_bw; size=64; col=5 ;;
		write_lat | shm_write_lat) args="-x 0 -F -s 2 -n $LITERS -p $port"; tool=ib_write_lat; size=2; col=5 ;;
		shm_read_bw) args="-x 0 -F --report_gbits -s 65536 -D $((SECS + 2)) -f 1 -p $port"; tool=ib_read_bw; size=65536; col=4 ;;
		shm_atomic_bw) args="-x 0 -F -A FETCH_AND_ADD -D $((SECS + 2)) -f 1 -p $port"; tool=ib_atomic_bw; size=8; col=5 ;;
		esac
		# uroce: perftest server and client
		args="$args $DEVARG"
		echo "== rep $rep $tool $args" >>"$log"
		$S "$UROCE" run $tool $args >"$OUT.srv" 2>&1 &
		spid=$!
		if wait_port t $port; then
			$C "$UROCE" run $tool $args $HOST >"$OUT.cli" 2>&1
		else
			echo "server never listened" >"$OUT.cli"
		fi
		wait $spid
		cat "$OUT.srv" "$OUT.cli" >>"$log"
		# the client's figure; for ib_write_lat the server measures the same round trips,
		# and stands in when the client's is not a number
		v=$(pt_field $size $col <"$OUT.cli")
		case $v in '' | *[!0-9.]*) case $KIND in *write_lat) v=$(pt_field $size $col <"$OUT.srv") ;; esac ;; esac
		emit uroce $rep "$v"

		# the peer, pinned the same way
		echo "== rep $rep peer" >>"$log"
		case $KIND in
		qps_write_bw | qps_write_bw_udp)
			# the same perftest with one QP, same link and pinning (issue #16: the
			# aggregate of many QPs against one QP's)
			a1="-x 0 -F --report_gbits -s 65536 -D $((SECS + 2)) -f 1 -q 1 -p $((port + 1000))"
			$S "$UROCE" run ib_write_bw $a1 >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port t $((port + 1000)) &&
				$C "$UROCE" run ib_write_bw $a1 127.0.0.1 >"$OUT.cli" 2>&1
			wait $spid
			v=$(pt_field 65536 4 <"$OUT.cli")
			;;
		write_bw | shm_write_bw | shm_read_bw)
			$S iperf3 -s -1 -p $((port + 1000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port t $((port + 1000)) &&
				$C iperf3 -c $HOST -p $((port + 1000)) -t "$SECS" -J >"$OUT.cli" 2>&1
			wait $spid
			# sender side over the sender's duration, decimal Gbit/s: like perftest's client,
			# which counts completed writes over its own run (--report_gbits is 10^9 bit/s)
			v=$(jq -r '.end.sum_sent.bits_per_second / 1e9' <"$OUT.cli" 2>/dev/null)
			;;
		write_lat | shm_write_lat)
			$S "$BUILD/bin/udp_pingpong" -s -p $((port + 1000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port u $((port + 1000)) &&
				$C "$BUILD/bin/udp_pingpong" -c $HOST -p $((port + 1000)) -z 2 -n $LITERS -w 100 >"$OUT.cli" 2>&1
			wait $spid
			v=$(sed -n 's/.* t_typical=\([0-9.]*\).*/\1/p' <"$OUT.cli")
			;;
		send_bw | shm_send_bw | shm_atomic_bw)
			$S "$BUILD/bin/udp_pps" -r -p $((port + 1000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port u $((port + 1000)) &&
				$C "$BUILD/bin/udp_pps" -t 127.0.0.1 -p $((port + 1000)) -z 80 -d "$SECS" >"$OUT.cli" 2>&1
			wait $spid
			v=$(sed -n 's/^udp_pps recv .* mpps=\([0-9.]*\).*/\1/p' <"$OUT.srv")
			;;
		esac
		cat "$OUT.srv" "$OUT.cli" >>"$log"
		emit peer $rep "$v"
		if [ "$KIND" = write_bw ]; then
			# the kernel's share: the same bytes in netio's shape, nothing else (udp_gso);
			# then with the ICRC computed at both ends (udp_gso -c): what a RoCEv2 sender
			# cannot avoid on top of it, so the floor of this path
			kern_share kern 3000 ""
			kern_share kcrc 3500 -c
		fi
		# The shared-memory ceiling (shm_ring, no RDMA) and UCX's shared memory, same pinning.
		ring=
		case $BENCH in
		shm_write_bw | shm_read_bw) ring="bw -s 65536 -k 4096 -d $SECS" ;;
		shm_write_lat) ring="lat -s 8 -n $LITERS" ;;
		shm_send_bw) ring="rate -s 64 -d $SECS" ;;
		esac
		if [ -n "$ring" ]; then
			echo "== rep $rep shm_ring $ring" >>"$log"
			timeout 120 "$BUILD/bin/shm_ring" $ring -P $SCPU,$CCPU >"$OUT.cli" 2>&1
			cat "$OUT.cli" >>"$log"
			case $BENCH in
			*_bw) v=$(sed -n 's/^shm_ring bw .* gbps=\([0-9.]*\).*/\1/p' <"$OUT.cli") ;;
			shm_write_lat) v=$(sed -n 's/.* t_typical=\([0-9.]*\).*/\1/p' <"$OUT.cli") ;;
			esac
			[ "$BENCH" = shm_send_bw ] && v=$(sed -n 's/^shm_ring rate .* mpps=\([0-9.]*\).*/\1/p' <"$OUT.cli")
			emit ceil $rep "$v"
		fi
		ucx=
		case $BENCH in
		shm_write_bw) ucx="-t put_bw -s 65536 -n 200000" ;;
		shm_write_lat) ucx="-t am_lat -s 8 -n $((LITERS * 5))" ;;
		esac
		if [ -n "$ucx" ]; then
			# ucx_perftest's MB are 2^20 bytes; its latency tests report the one-way time,
			# median in the 50.0%ile column (as perftest's t_typical).
			echo "== rep $rep ucx_perftest -d memory -x posix $ucx" >>"$log"
			$S ucx_perftest -p $((port + 4000)) -d memory -x posix $ucx >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port t $((port + 4000)) &&
				$C ucx_perftest -p $((port + 4000)) -d memory -x posix $ucx 127.0.0.1 >"$OUT.cli" 2>&1
			wait $spid
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			case $BENCH in
			shm_write_bw) v=$(awk '$1 == "Final:" { printf "%.3f", $6 * 1048576 * 8 / 1e9 }' <"$OUT.cli") ;;
			shm_write_lat) v=$(awk '$1 == "Final:" { print $3 }' <"$OUT.cli") ;;
			esac
			emit ucx $rep "$v"
		fi
		if [ "$KIND" = write_lat ]; then
			# the hand-off structure: each datagram received by a sleeping thread and
			# handed to the spinning main thread (udp_pingpong -T), same pinning
			echo "== rep $rep hand-off floor" >>"$log"
			$S "$BUILD/bin/udp_pingpong" -s -T -p $((port + 2000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port u $((port + 2000)) &&
				$C "$BUILD/bin/udp_pingpong" -c $HOST -T -p $((port + 2000)) -z 2 -n $LITERS -w 100 >"$OUT.cli" 2>&1
			wait $spid
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit floor $rep "$(sed -n 's/.* t_typical=\([0-9.]*\).*/\1/p' <"$OUT.cli")"
			# the kernel's share: uroce's packets (a WRITE and the held ACK in one GSO
			# send) and receive socket options, without uroce (udp_roce_pp)
			echo "== rep $rep kernel share" >>"$log"
			$S "$BUILD/bin/udp_roce_pp" -s -p $((port + 3000)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port u $((port + 3000)) &&
				$C "$BUILD/bin/udp_roce_pp" -c $HOST -p $((port + 3000)) -n $LITERS -w 100 >"$OUT.cli" 2>&1
			wait $spid
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit kern $rep "$(sed -n 's/.* t_typical=\([0-9.]*\).*/\1/p' <"$OUT.cli")"
			# the same with uroce's socket design (udp_roce_pp -u): a steered reuseport
			# group, a separate send socket, a second thread
			echo "== rep $rep kernel share, uroce's sockets" >>"$log"
			$S "$BUILD/bin/udp_roce_pp" -s -u -p $((port + 3100)) >"$OUT.srv" 2>&1 &
			spid=$!
			wait_port u $((port + 3100)) &&
				$C "$BUILD/bin/udp_roce_pp" -c $HOST -u -p $((port + 3100)) -n $LITERS -w 100 >"$OUT.cli" 2>&1
			wait $spid
			cat "$OUT.srv" "$OUT.cli" >>"$log"
			emit kdes $rep "$(sed -n 's/.* t_typical=\([0-9.]*\).*/\1/p' <"$OUT.cli")"
		fi
		rep=$((rep + 1))
	done
	if [ -n "$NSA" ]; then
		$NSA "$UROCE" daemon stop >>"$log" 2>&1
		$NSB "$UROCE" daemon stop >>"$log" 2>&1
	else
		"$UROCE" daemon stop >>"$log" 2>&1
	fi
	rm -f "$OUT.srv" "$OUT.cli"
	exit 0
fi

# ---------------------------------------------------------------- outside: drive and summarise
BUILD=$SRC/build REPS=5 SECS=3 PINS="split same" PIN_SET=0
while getopts b:r:t:p: opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 2 ;;
	r) REPS=$OPTARG ;;
	t) SECS=$OPTARG ;;
	p) PIN_SET=1; case $OPTARG in split | same) PINS=$OPTARG ;; both) PINS="split same" ;; *) exit 2 ;; esac ;;
	*) sed -n '2,/^set -u$/{/^set -u$/d;p}' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
BENCHES=$(echo "${*:-write_bw write_lat send_bw veth_write_bw veth_write_lat veth_jumbo_write_bw shm_write_bw shm_write_lat shm_send_bw shm_read_bw shm_atomic_bw}" | sed 's/\<ucx\>/ucx_put_bw ucx_tag_lat/')
for f in bin/uroce bin/uroced bin/udp_pingpong bin/udp_pps bin/udp_roce_pp bin/udp_gso bin/shm_ring bin/cpu_rtt; do
	[ -x "$BUILD/$f" ] || { echo "run.sh: $BUILD/$f missing: build first (cmake --build $BUILD)"; exit 2; }
done
for t in ib_write_bw ib_write_lat ib_send_bw ib_read_bw ib_atomic_bw iperf3 ucx_perftest taskset jq; do
	command -v $t >/dev/null || { echo "run.sh: $t not installed"; exit 2; }
done
case " $BENCHES " in *"rsocket_bw "*)
	[ -x "$BUILD/bin/cm_wait" ] || { echo "run.sh: $BUILD/bin/cm_wait missing: build first (cmake --build $BUILD)"; exit 2; }
	[ -r /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so ] || { echo "run.sh: librspreload.so (librdmacm1) not installed"; exit 2; } ;;
esac
case " $BENCHES " in *" cm_connect "*)
	for f in bin/cm_wait bin/tcp_connrate; do
		[ -x "$BUILD/$f" ] || { echo "run.sh: $BUILD/$f missing: build first (cmake --build $BUILD)"; exit 2; }
	done
	command -v cmtime >/dev/null || { echo "run.sh: cmtime (rdmacm-utils) not installed"; exit 2; } ;;
esac
[ "$(nproc)" -ge 2 ] || PINS=same

work=$(mktemp -d "${TMPDIR:-/tmp}/uroce-bench.XXXXXX") || exit 1
res=$work/results
: >"$res"
# The tree the build was configured from (it may be an export of a commit, not this checkout).
bsrc=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
commit=$(git -C "${bsrc:-$SRC}" describe --always --dirty 2>/dev/null || cat "$bsrc/COMMIT" 2>/dev/null || echo "not a git tree")
commit="${bsrc:-?} ($commit)"
echo "# uroce bench $(date -u '+%Y-%m-%d %H:%M UTC') source $commit, build $BUILD (libibverbs.so.1 built $(date -u -r "$BUILD/lib/libibverbs.so.1" '+%H:%M UTC'))"
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, kernel $(uname -r); $REPS reps, ${SECS}s runs; logs in $work"
# Other work on the machine moves both sides of a ratio, not always equally: say how busy it was.
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
want=0
for b in $BENCHES; do
	for p in $PINS; do
		# UCX's tcp transport with both sides on one CPU hands over at the scheduler tick
		# (4 ms per tag_lat round trip) and its put_bw fails ("Connection reset by remote
		# peer"): the ucx pairs run split unless -p asks for same.
		case $b:$p:$PIN_SET in ucx_*:same:0) continue ;; esac
		"$SRC/tests/daemon/nsrun.sh" "$SRC/bench/run.sh" --inner "$b" "$p" "$REPS" "$SECS" "$BUILD" "$res" \
			>>"$work/log.nsrun" 2>&1
		# figures expected: uroce and peer per rep, plus the reference runs
		case $b in
		# figures per repetition: uroce and its peer, plus the reference lines
		# (write_lat: the hand-off floor and the kernel share; write_bw: the kernel
		# share without and with the ICRC; shm_write_bw/_lat: shm_ring and UCX;
		# shm_send_bw/_read_bw: shm_ring)
		write_lat | veth_write_lat) want=$((want + 5 * REPS)) ;;
		shm_write_bw | shm_write_lat) want=$((want + 4 * REPS)) ;;
		write_bw | veth_write_bw | veth_jumbo_write_bw) want=$((want + 4 * REPS)) ;;
		shm_send_bw | shm_read_bw) want=$((want + 3 * REPS)) ;;
		*) want=$((want + 2 * REPS)) ;;
		esac
	done
done

# one line per benchmark and pinning: medians, their ratio, the spread of per-rep ratios
awk -v reps="$REPS" -v NEAR=200 '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
# the median of a reference peer runs for key k ("" if none; their count in nf)
function ref(k, tag,    r, F) {
	nf = 0
	for (r = 1; r <= reps; r++) if ((k, tag, r) in v) F[++nf] = v[k, tag, r]
	return nf ? median(F, nf) : ""
}
# Where the CPUs were during repetition r of the TAG run for key k: "near" (both round trips
# probed around it under NEAR ns), "far" (both at or over it), "moved", or "" (not probed).
function where(k, tag, r) {
	if (!((k, "plh_" tag, r) in v)) return ""
	return v[k, "plh_" tag, r] < NEAR ? "near" : v[k, "pll_" tag, r] >= NEAR ? "far" : "moved"
}
# The median of the TAG runs for key k whose CPUs were w all the time; their count in nsel.
function placed(k, tag, w,    r, F) {
	nsel = 0
	for (r = 1; r <= reps; r++)
		if (((k, tag, r) in v) && where(k, tag, r) == w) F[++nsel] = v[k, tag, r]
	return nsel ? median(F, nsel) : ""
}
function line(b, p, name, x, y, note, nx, ny) {
	printf "%-10s %-5s %-12s %9.4g %9.4g %5s %7.3fx  %-15s %s  (%d/%d reps)\n", b, p, name, x, y, unit[b],
		(y > 0 ? x / y : 0), "", note, nx, ny
}
{ key = $1 " " $2; if (!(key in seen)) { seen[key] = 1; order[++nk] = key } v[key, $3, $4] = $5 }
END {
	unit["write_bw"] = "Gb/s"; unit["write_lat"] = "us"; unit["send_bw"] = "Mpps"; unit["cm_connect"] = "c/s"
	peer["write_bw"] = "iperf3 TCP"; peer["write_lat"] = "udp_pingpong"; peer["send_bw"] = "udp_pps 80B"
	goal["write_bw"] = ">= 1.0"; goal["write_lat"] = "<= 1.5"; goal["send_bw"] = "(none)"
	unit["ucx_put_bw"] = "MB/s"; unit["ucx_tag_lat"] = "us"
	peer["ucx_put_bw"] = "ucx tcp"; peer["ucx_tag_lat"] = "ucx tcp"
	goal["ucx_put_bw"] = "> 1.0"; goal["ucx_tag_lat"] = "< 1.0"
	peer["cm_connect"] = "tcp connect"; goal["cm_connect"] = "(none)"
	unit["rsocket_bw"] = unit["shm_rsocket_bw"] = "Gb/s"
	peer["rsocket_bw"] = peer["shm_rsocket_bw"] = "iperf3 TCP"
	goal["rsocket_bw"] = "(report)"; goal["shm_rsocket_bw"] = "> 1.0"
	kern["write_bw"] = "udp_gso"; kern["write_lat"] = "udp_roce_pp"
	# between two namespaces over veth (issue #16 section 2): the peers cross the same veth
	unit["veth_write_bw"] = unit["veth_jumbo_write_bw"] = "Gb/s"; unit["veth_write_lat"] = "us"
	peer["veth_write_bw"] = peer["veth_jumbo_write_bw"] = "iperf3 TCP"; peer["veth_write_lat"] = "udp_pingpong"
	kern["veth_write_bw"] = kern["veth_jumbo_write_bw"] = "udp_gso"; kern["veth_write_lat"] = "udp_roce_pp"
	goal["veth_write_bw"] = goal["veth_jumbo_write_bw"] = ">= 1.0 (and >= 0.9 of udp_gso)"
	goal["veth_write_lat"] = "(<= 1.2 of udp_roce_pp)"
	unit["qps_write_bw"] = unit["qps_write_bw_udp"] = "Gb/s"
	peer["qps_write_bw"] = peer["qps_write_bw_udp"] = "same, -q 1"
	goal["qps_write_bw"] = goal["qps_write_bw_udp"] = ">= 0.9"
	unit["shm_write_bw"] = unit["shm_read_bw"] = "Gb/s"; unit["shm_write_lat"] = "us"
	unit["shm_send_bw"] = unit["shm_atomic_bw"] = "Mpps"
	peer["shm_write_bw"] = peer["shm_read_bw"] = "iperf3 TCP"; peer["shm_write_lat"] = "udp_pingpong"
	peer["shm_send_bw"] = peer["shm_atomic_bw"] = "udp_pps 80B"
	goal["shm_write_bw"] = ">= 3.0"; goal["shm_write_lat"] = "<= 0.5"; goal["shm_send_bw"] = ">= 10"
	goal["shm_read_bw"] = goal["shm_atomic_bw"] = "(report)"
	ceil["shm_write_bw"] = ceil["shm_read_bw"] = "shm_ring bw"; ceil["shm_write_lat"] = "shm_ring lat"
	ceil["shm_send_bw"] = "shm_ring rate"
	ucx["shm_write_bw"] = "ucx put_bw"; ucx["shm_write_lat"] = "ucx am_lat"
	printf "%-10s %-5s %-12s %9s %9s %5s %8s  %-15s %s\n", "bench", "pin", "peer", "uroce", "peer", "unit", "ratio", "per-rep ratios", "target"
	for (k = 1; k <= nk; k++) {
		split(order[k], kk, " "); b = kk[1]; p = kk[2]
		nu = np = nr = 0; lo = hi = ""
		for (r = 1; r <= reps; r++) {
			if ((order[k], "uroce", r) in v) U[++nu] = v[order[k], "uroce", r]
			if ((order[k], "peer", r) in v) P[++np] = v[order[k], "peer", r]
			if (((order[k], "uroce", r) in v) && ((order[k], "peer", r) in v) && v[order[k], "peer", r] > 0) {
				x = v[order[k], "uroce", r] / v[order[k], "peer", r]
				if (lo == "" || x < lo) lo = x; if (hi == "" || x > hi) hi = x
			}
		}
		mu = nu ? median(U, nu) : 0; mp = np ? median(P, np) : 0
		printf "%-10s %-5s %-12s %9.4g %9.4g %5s %7.3fx  %6.3f-%-6.3f  %s  (%d/%d reps)\n", b, p, peer[b], mu, mp, unit[b],
			(mp > 0 ? mu / mp : 0), lo, hi, goal[b], nu, np
		# reference lines: uroce over the hand-off floor (write_lat) and over the kernel
		# share (write_lat, write_bw), and the kernel share over the plain peer
		if ((mf = ref(order[k], "floor")) != "")
			line(b, p, "udp_pp -T", mu, mf, "(hand-off floor)", nu, nf)
		if ((mf = ref(order[k], "kern")) != "") {
			line(b, p, kern[b], mu, mf, "(kernel share)", nu, nf)
			line(b, p, "(kernel)", mf, mp, "(" kern[b] " / " peer[b] ")", nf, np)
		}
		# write_lat: over the kernel share with uroce socket design as well (udp_roce_pp
		# -u), and what that design costs the kernel
		if ((md = ref(order[k], "kdes")) != "") {
			line(b, p, "roce_pp -u", mu, md, "(kernel share, uroce sockets)", nu, nf)
			if (mf != "" && mf > 0)
				line(b, p, "(sockets)", md, mf, "(udp_roce_pp -u / udp_roce_pp)", nf, nf)
		}
		# write_bw: over the kernel share with the ICRC computed at both ends (udp_gso
		# -c), the floor a RoCEv2 sender cannot go below on this path
		if ((mf = ref(order[k], "kcrc")) != "")
			line(b, p, "udp_gso -c", mu, mf, "(kernel share + ICRC)", nu, nf)
		# the shm benchmarks: uroce as a fraction of the shared-memory ceiling (shm_ring),
		# and against the shared memory of UCX
		if ((mf = ref(order[k], "ceil")) != "")
			line(b, p, ceil[b], mu, mf, "(fraction of the shm ceiling)", nu, nf)
		if ((mf = ref(order[k], "ucx")) != "")
			line(b, p, ucx[b], mu, mf, "(UCX posix shared memory)", nu, nf)
		# the same ratios over the runs whose CPUs stayed near, then far (cpu_rtt): the
		# host placing the two vCPUs apart slows every sender the kernel copies for
		split("", at)
		for (r = 1; r <= reps; r++) at[where(order[k], "uroce", r)]++
		if (at["near"] + at["far"] + at["moved"])
			printf "%-10s %-5s [placement] uroce runs with the CPUs near %d, far %d, moved during the run %d (a cache line round trip under %d ns is near)\n", b, p, at["near"], at["far"], at["moved"], NEAR
		for (c = 1; c <= 2; c++) {
			w = c == 1 ? "near" : "far"
			if ((pu = placed(order[k], "uroce", w)) == "") continue
			npu = nsel
			pp = placed(order[k], "peer", w); npp = nsel
			if (pp != "")
				line(b, p, "[" w "] " peer[b], pu, pp, "(runs with the CPUs " w ")", npu, npp)
			if ((pk = placed(order[k], "kern", w)) != "") {
				npk = nsel
				line(b, p, "[" w "] " kern[b], pu, pk, "(kernel share, CPUs " w ")", npu, npk)
				if (pp != "")
					line(b, p, "[" w "] (kernel)", pk, pp, "(" kern[b] " / " peer[b] ", CPUs " w ")", npk, npp)
			}
		}
	}
}' "$res"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
n=$(awk '$3 !~ /^pl[hl]_/' "$res" | wc -l)
[ "$n" -eq "$want" ] || { echo "# only $n of $want runs produced a figure: see $work/log.*"; exit 1; }
exit 0
