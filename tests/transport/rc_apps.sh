#!/bin/sh
# rc_apps.sh UROCE TOPO CASE — Debian's unmodified RDMA programs over uroce's RC transport,
# server and client as two processes.  Run by tests/daemon/nsrun.sh (private user, network,
# pid and mount namespaces: our own uroced(s), killed with the test).
#
#   TOPO lo:    both processes on 127.0.0.1 (device uroce0 on lo)
#   TOPO veth:  two hosts: [netns a: va 192.0.2.1] <--veth--> [netns b: vb 192.0.2.2],
#               a uroced and a device uroce1 in each
#
# CASE names a program and its options (see the case statement).  The test fails when
# either side exits non-zero or does not finish within its bound (no fixed sleeps: the
# client starts once the server's TCP port listens).  UROCE_RC_STATS=1 makes each QP
# print its RC counters at teardown, kept in the log for the reader.
set -u
UROCE=$1
TOPO=$2
CASE=$3
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UROCE_RC_STATS=1

# The two topologies (lo, or netns a/b joined by veth): tests/daemon/lib.sh.
topo_setup "$TOPO" || exit 1

port=18515
# Under the sanitizers (ASan preloaded into the foreign programs) everything runs several
# times slower: a tenth of the iterations, at least 100.
scale() { case "${LD_PRELOAD:-}" in *asan*) n=$(($1 / 10)); [ $n -lt 100 ] && n=100; echo $n ;; *) echo $1 ;; esac; }
case $CASE in
pp-*)      # pp-SIZE[-e]-ITERS: ibv_rc_pingpong
	set -- $(echo "$CASE" | tr - ' ')
	size=$2; ev=""; iters=$3
	[ "$3" = e ] && { ev=-e; iters=$4; }
	iters=$(scale $iters)
	srv="ibv_rc_pingpong $DEV -g 0 -s $size -n $iters $ev"
	cli="$srv $SADDR" ;;
srq)
	srv="ibv_srq_pingpong $DEV -g 0 -q 16 -n 500"
	cli="$srv $SADDR" ;;
ib_*)      # ib_TOOL[-old]: perftest with -a (all sizes), small -n for CI time
	tool=$(echo "$CASE" | sed 's/-old$//')
	old=""; [ "$tool" != "$CASE" ] && old=--use_old_post_send
	extra="-a -n 5"
	case $tool in
	ib_atomic_bw_cs) tool=ib_atomic_bw; extra="-A CMP_AND_SWAP -n 200" ;;
	ib_atomic_bw)    extra="-A FETCH_AND_ADD -n 200" ;;
	ib_atomic_lat)   extra="-n 200" ;;
	esac
	srv="$tool $DEV -x 0 -F $extra $old"
	cli="$srv $SADDR" ;;
*)
	echo "unknown case $CASE"; exit 2 ;;
esac

run_pair 200 $port "$srv" "$cli"
[ $fails -eq 0 ] && echo "PASS $TOPO $CASE"
exit $([ $fails -eq 0 ] && echo 0 || echo 1)
