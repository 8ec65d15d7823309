#!/bin/sh
# ud_apps.sh UROCE TOPO CASE — Debian's unmodified programs over uroce's UD transport,
# server and client as two processes, run by tests/daemon/nsrun.sh.
#   TOPO lo:   both on 127.0.0.1;  TOPO veth: two netns joined by veth (needs root: else 77)
#   CASE ud-SIZE[-e]-ITERS (ibv_ud_pingpong), uc-SIZE[-e]-ITERS (ibv_uc_pingpong), or
#        TOOL-UD / TOOL-UC (perftest TOOL -c UD/UC, all sizes -a; TOOL-UD-mcast adds -M).
# The topology comes from tests/daemon/lib.sh (topo_setup, shared with rc_apps.sh); the
# client starts once the server's TCP port listens (no fixed sleeps).
set -u
UROCE=$1
TOPO=$2
CASE=$3
. "$(dirname "$0")/../daemon/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UROCE_RC_STATS=1

topo_setup "$TOPO" || exit 1

port=18515
case $CASE in
ud-*|uc-*) # ud-SIZE[-e]-ITERS: ibv_ud_pingpong (-s is the payload, the GRH area comes on
	   # top); uc-...: ibv_uc_pingpong
	set -- $(echo "$CASE" | tr - ' ')
	size=$2; ev=""; iters=$3
	[ "$3" = e ] && { ev=-e; iters=$4; }
	srv="ibv_$1_pingpong $DEV -g 0 -s $size -n $iters $ev"
	cli="$srv $SADDR" ;;
ib_*)
	set -- $(echo "$CASE" | tr - ' ')
	# -a -n 5 as rc_apps.sh: a passive side progresses only through uroce's thread, so
	# latency runs are slow on a loaded 2-core machine.
	srv="$1 $DEV -x 0 -F -c $2 -a -n 5"
	# UC SEND has no flow control and no retransmission: a message lost to a full socket
	# buffer would leave ib_send_bw's server waiting forever, so keep the window small.
	# The same for a WRITE latency run: -a goes to 8 MiB messages (thousands of packets in
	# one burst, more than a socket buffer holds), and the passive side would spin forever on
	# a message that lost a packet; one size that fits comfortably instead.
	[ "$1-$2" = ib_send_bw-UC ] && srv="$1 $DEV -x 0 -F -c UC -s 4096 -n 200 -t 16"
	[ "$1-$2" = ib_write_lat-UC ] && srv="$1 $DEV -x 0 -F -c UC -s 65536 -n 200"
	# -mcast: perftest's --mcg with an IPv4-mapped RoCEv2 multicast GID (239.1.2.3)
	[ "${3:-}" = mcast ] && srv="$1 $DEV -x 0 -F -c UD -g -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:2:3 -n 200"
	cli="$srv $SADDR" ;;
*)
	echo "unknown case $CASE"; exit 2 ;;
esac

run_pair 120 $port "$srv" "$cli"
[ $fails -eq 0 ] || exit 1
echo PASS
