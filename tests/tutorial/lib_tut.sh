# lib_tut.sh — what the tutorial's tests share (sourced after tests/daemon/lib.sh; POSIX sh).
# Needs $UROCE (the CLI) and $tmp (a scratch directory).

# expect_line FILE LINE: FILE holds LINE exactly (a line the chapter shows).
expect_line() {
	grep -qxF -- "$2" "$1" || fail "$(basename "$1") lacks the line [$2]"
}

# expect_match FILE ERE: some line of FILE matches the extended regular expression ERE.
expect_match() {
	grep -qE -- "$2" "$1" || fail "$(basename "$1") has no line matching [$2]"
}

# tut_pair PORT PROG [ARGS...]: PROG as the server under `uroce run` and, once it listens on
# TCP PORT, PROG $SADDR (127.0.0.1 unless set) as the client; the server runs under the
# command prefix $S, the client under $C (both "" unless set: here).  Outputs in $tmp/srv
# and $tmp/cli, printed.
tut_pair() {
	_port=$1
	shift
	${S:-} timeout 60 "$UROCE" run "$@" -p "$_port" >"$tmp/srv" 2>&1 &
	_spid=$!
	_listening() { ${S:-} ss -ltnH "sport = :$_port" | grep -q LISTEN; }
	wait_for 20 _listening || fail "the server never listened on $_port"
	${C:-} timeout 60 "$UROCE" run "$@" -p "$_port" "${SADDR:-127.0.0.1}" >"$tmp/cli" 2>&1 ||
		fail "the client exited $?"
	wait $_spid || fail "the server exited $?"
	echo "-- server"; cat "$tmp/srv"
	echo "-- client"; cat "$tmp/cli"
}

# probe: one UDP datagram to $PROBE_ADDR (127.0.0.1 unless set) port 4792, which the
# capture's filter takes too; sent from the network namespace $PROBE_NS ("": here).
probe() {
	${PROBE_NS:-} /usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"probe", (sys.argv[1], 4792))' "${PROBE_ADDR:-127.0.0.1}"
}

# probes_in FILE: how many probes FILE holds so far.
probes_in() {
	[ -s "$1" ] || { echo 0; return; }
	env -u LD_PRELOAD tshark -r "$1" -Y 'udp.port == 4792' 2>/dev/null | wc -l
}

# capture_start FILE [IFACE [PREFIX]]: dumpcap on IFACE (lo by default; run under PREFIX, e.g.
# "ip netns exec a") for UDP 4791, and 4792 for the probes, as pcap; returns once a probe
# shows in FILE, so nothing of what follows is missed.
capture_start() {
	_cap=$1
	${3:-} env -u LD_PRELOAD dumpcap -q -P -i "${2:-lo}" -f 'udp port 4791 or udp port 4792' -w "$_cap" \
		>"$tmp/dumpcap.log" 2>&1 &
	_dpid=$!
	_probed() { probe; [ "$(probes_in "$_cap")" -gt 0 ]; }
	wait_for 30 _probed || { fail "dumpcap never captured its probe"; cat "$tmp/dumpcap.log"; }
}

# capture_stop: stop dumpcap once everything sent so far is in the file.  The kernel hands
# captured packets to dumpcap in blocks, and a block not yet handed over when dumpcap stops is
# lost: so send probes until one more shows in the file (it follows every earlier packet in
# the kernel's buffer), and only then stop dumpcap and wait until it has exited.
capture_stop() {
	_before=$(probes_in "$_cap")
	_flushed() { probe; [ "$(probes_in "$_cap")" -gt "$_before" ]; }
	wait_for 30 _flushed || fail "dumpcap never wrote the closing probe"
	kill -INT $_dpid
	wait $_dpid
}

# ucap_start FILE [ARGS...]: `uroce capture ARGS... -w FILE` (docs/daemon.md "Capturing":
# both links, the shared-memory one included) in the background, under the command prefix
# $CAP (e.g. "ip netns exec a"; "" unless set); returns once it says it captures.
# The capture asks uroced for new processes' rings every 100 ms and once more when it
# stops; a process that exits before that still has its ring handed over (uroced keeps it)
# and a ring handed late does not write a packet twice (capture_short.sh checks both).
ucap_start() {
	_ucap=$1
	shift
	${CAP:-} "$UROCE" daemon start >/dev/null 2>&1 || fail "uroce daemon start"
	${CAP:-} "$UROCE" capture "$@" -w "$_ucap" 2>"$_ucap.err" &
	_ucpid=$!
	wait_for 10 grep -q "capturing on" "$_ucap.err" || fail "uroce capture did not start: $(cat "$_ucap.err")"
}

# ucap_stop: stop the capture (SIGINT: it reads the rings once more and writes what is
# pending), check that it missed nothing, and verify every frame's ICRC independently of
# uroce (tests/capture/check_pcap.py, scapy).  Sets $ucap_n to the frames captured.
ucap_stop() {
	kill -INT "$_ucpid"
	wait "$_ucpid" || fail "uroce capture exited with $?"
	cat "$_ucap.err"
	grep -q " 0 missed" "$_ucap.err" || fail "the capture missed packets"
	/usr/bin/python3 "$(dirname "$0")/../capture/check_pcap.py" "$_ucap" >"$_ucap.chk" 2>&1 ||
		fail "ICRC check: $(cat "$_ucap.chk")"
	cat "$_ucap.chk"
	ucap_n=$(sed -n 's/.* \([0-9]*\) packets captured.*/\1/p' "$_ucap.err")
}

# ucap_opcodes FILE: the BTH opcode numbers of FILE's frames, as tshark reads them, on one line.
ucap_opcodes() {
	env -u LD_PRELOAD tshark -r "$1" -d udp.port==4791,infiniband -Y infiniband.bth \
		-T fields -e infiniband.bth.opcode 2>/dev/null | tr '\n' ' '
}

# total NAME: the device's total of `uroce stat`'s counter NAME (every client has gone), as
# seen under the command prefix $CAP.
total() {
	${CAP:-} "$UROCE" stat 2>/dev/null | awk -v n="$1" '/ total / { for (i = 1; i < NF; i++) if ($i == n) s += $(i + 1) } END { print s + 0 }'
}
