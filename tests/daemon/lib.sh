# lib.sh — helpers for the daemon's shell tests (sourced; POSIX sh).

fails=0

fail() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}

# expect_eq WHAT GOT WANT
expect_eq() {
	if [ "$2" != "$3" ]; then
		fail "$1: got [$2], want [$3]"
	fi
}

# wait_for SECONDS CMD...: run CMD until it succeeds, at most SECONDS.  For
# conditions the kernel or the daemon reaches asynchronously (carrier, an
# address appearing); the poll interval is not a synchronisation assumption.
wait_for() {
	limit=$(($(date +%s) + $1))
	shift
	while ! "$@" >/dev/null 2>&1; do
		if [ "$(date +%s)" -ge "$limit" ]; then
			return 1
		fi
		sleep 0.02
	done
	return 0
}

# run_pair SECS PORT "SERVER ARGS" "CLIENT ARGS": a Debian program pair under `uroce run`
# ($UROCE), the server in $S and, once it listens on TCP PORT (the programs' out-of-band
# exchange), the client in $C, each with a timeout of SECS; both outputs are printed.
# Counts a failure (fail) for a server that never listens or a side that exits non-zero.
# Needs $tmp (a scratch directory); $S and $C come from topo_setup.
run_pair() {
	_secs=$1 _port=$2 _srv=$3 _cli=$4
	echo "== server: $S uroce run $_srv"
	$S timeout "$_secs" "$UROCE" run $_srv >"$tmp/srv" 2>&1 &
	_spid=$!
	_listening() { $S ss -ltnH "sport = :$_port" | grep -q LISTEN; }
	if ! wait_for 20 _listening; then
		fail "server never listened"
		kill $_spid 2>/dev/null
		wait $_spid
		cat "$tmp/srv"
		return 1
	fi
	echo "== client: $C uroce run $_cli"
	$C timeout "$_secs" "$UROCE" run $_cli >"$tmp/cli" 2>&1
	_crc=$?
	wait $_spid
	_src=$?
	echo "-- server output"; cat "$tmp/srv"
	echo "-- client output"; cat "$tmp/cli"
	[ $_crc -eq 0 ] || fail "client exited $_crc"
	[ $_src -eq 0 ] || fail "server exited $_src"
	[ $_crc -eq 0 ] && [ $_src -eq 0 ]
}

# Two-host topology of the transport tests (run under nsrun.sh, which gives a private
# mount namespace):  [netns a: va 192.0.2.1] <--veth--> [netns b: vb 192.0.2.2], a device
# uroce1 on each veth (each netns gets its own uroced, started by `uroce link add`), and
# both ports ACTIVE (perftest refuses a port that is not).  Needs $UROCE.
# With the argument v6, va and vb also get 2001:db8::1/64 and 2001:db8::2/64 (nodad);
# with VETH_MTU set, both ends get that MTU.
# Sets NS_A / NS_B ("ip netns exec a" / "... b"), ADDR_A / ADDR_B.
# Exits 77 (ctest's skip code) where netns or veth are unavailable; returns 1 (after
# fail) when a device does not come up.
netns_veth_setup() {
	mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
	ip netns add a && ip netns add b || { echo "SKIP: no netns"; exit 77; }
	ip link add va netns a type veth peer name vb netns b || { echo "SKIP: no veth"; exit 77; }
	ip -n a link set lo up; ip -n b link set lo up
	# VETH_MTU, if set: both ends' MTU (bench/run.sh's jumbo-frame runs)
	if [ -n "${VETH_MTU:-}" ]; then
		ip -n a link set va mtu "$VETH_MTU"; ip -n b link set vb mtu "$VETH_MTU"
	fi
	ip -n a addr add 192.0.2.1/24 dev va; ip -n b addr add 192.0.2.2/24 dev vb
	if [ "${1:-}" = v6 ]; then
		ip -n a addr add 2001:db8::1/64 dev va nodad
		ip -n b addr add 2001:db8::2/64 dev vb nodad
	fi
	ip -n a link set va up; ip -n b link set vb up
	NS_A="ip netns exec a"; NS_B="ip netns exec b"; ADDR_A=192.0.2.1; ADDR_B=192.0.2.2
	$NS_A "$UROCE" link add uroce1 netdev va >/dev/null || { fail "link add in a"; return 1; }
	$NS_B "$UROCE" link add uroce1 netdev vb >/dev/null || { fail "link add in b"; return 1; }
	wait_for 20 port_active "$NS_A" uroce1 || { fail "a's port never became active"; return 1; }
	wait_for 20 port_active "$NS_B" uroce1 || { fail "b's port never became active"; return 1; }
	return 0
}

# port_active PREFIX DEV: DEV's port 1 is ACTIVE as seen from PREFIX's netns ("" = here).
port_active() {
	$1 "$UROCE" run ibv_devinfo -d "$2" 2>/dev/null | grep -q PORT_ACTIVE
}

# topo_setup TOPO: the server/client pair of a two-process test.
#   lo:   both here, server at 127.0.0.1, the default device (uroce0 on lo)
#   veth: netns_veth_setup; the server in netns a, the client in netns b, device uroce1
# Sets S / C (command prefixes for the server / client), SADDR (the server's address)
# and DEV ("-d uroce1" or "", for the Debian programs' command lines).  Exit/return codes
# as netns_veth_setup; 2 for an unknown TOPO.
topo_setup() {
	case $1 in
	veth)
		netns_veth_setup || return 1
		S=$NS_A; C=$NS_B; SADDR=$ADDR_A; DEV="-d uroce1" ;;
	lo)
		S=""; C=""; SADDR=127.0.0.1; DEV="" ;;
	*)
		echo "unknown topology $1"; exit 2 ;;
	esac
	return 0
}

# The GIDs the kernel says a netdev should have, sorted: ::ffff:a.b.c.d for each
# IPv4 address, each IPv6 address as is.  ($1 = netdev, optional ip -n NS.)
kernel_gids() {
	{
		ip ${2:-} -4 -o addr show dev "$1" | awk '{ sub("/.*", "", $4); print "::ffff:" $4 }'
		ip ${2:-} -6 -o addr show dev "$1" | awk '{ sub("/.*", "", $4); print $4 }'
	} | sort
}

# The GIDs uroce lists for a device, sorted.  ($1 = device)
uroce_gids() {
	$UROCE link show "$1" -d | awk '$1 == "gid" { print $3 }' | sort
}

# Field after KEY on the first line of uroce output containing it.
field() {
	awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }'
}

finish() {
	$UROCE daemon stop >/dev/null 2>&1
	if [ "$fails" -ne 0 ]; then
		echo "$fails check(s) failed" >&2
		exit 1
	fi
	echo "all checks passed"
	exit 0
}
