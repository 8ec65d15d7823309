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
