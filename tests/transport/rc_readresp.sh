#!/bin/sh
# rc_readresp.sh UROCE RC_READRESP CASE... — issue #17: a uroce RC QP against a scripted
# responder (rc_readresp.c).  Run by tests/daemon/nsrun.sh (private network and mount
# namespaces): the QP lives here, on device uroce1 over veth va (192.0.2.1); the peer's
# socket lives in netns b on vb (192.0.2.2), where nothing of uroce runs.
set -u
UROCE=$1
PROG=$2
shift 2
. "$(dirname "$0")/../daemon/lib.sh"

mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
ip netns add b || { echo "SKIP: no netns"; exit 77; }
ip link add va type veth peer name vb netns b || { echo "SKIP: no veth"; exit 77; }
ip -n b link set lo up
ip addr add 192.0.2.1/24 dev va
ip -n b addr add 192.0.2.2/24 dev vb
ip link set va up
ip -n b link set vb up
"$UROCE" link add uroce1 netdev va >/dev/null || { fail "link add uroce1"; finish; }
wait_for 20 port_active "" uroce1 || { fail "uroce1's port never became active"; finish; }

RC_READRESP_PEER_NS=/run/netns/b RC_READRESP_DEV=uroce1 timeout 300 "$UROCE" run "$PROG" "$@" ||
	fail "rc_readresp $*"
finish
