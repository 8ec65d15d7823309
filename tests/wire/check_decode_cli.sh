#!/bin/sh
# check_decode_cli.sh GEN_DISSECT UROCE WORKDIR — `uroce decode` flags broken packets.
# gen_dissect --malformed writes six frames (see gen_dissect.c); each must be reported
# with the right verdict, and the summary must count them.
set -u
gen=$1 uroce=$2 work=$3
mkdir -p "$work" || exit 1
"$gen" --malformed "$work/malformed.pcap" || { echo "FAIL: generator"; exit 1; }
out=$("$uroce" decode "$work/malformed.pcap") || { echo "FAIL: uroce decode exit $?"; exit 1; }
printf '%s\n' "$out"
fail=0
expect() { # frame-index regex
	line=$(printf '%s\n' "$out" | awk -v i="$1" '$1 == i')
	if ! printf '%s\n' "$line" | grep -Eq -- "$2"; then
		echo "FAIL: frame $1 should match /$2/: $line"
		fail=1
	fi
}
expect 1 'RC_SEND_ONLY qp 0x000011 psn 0x000123 AckReq payload 64 icrc ok$'
expect 2 'RC_SEND_ONLY .* icrc BAD$'
expect 3 'RC_RDMA_WRITE_ONLY .*icrc ok MALFORMED HDR_TRUNCATED$'
expect 4 'RESERVED_0x15 .*MALFORMED OPCODE_RESERVED$'
expect 5 'RC_SEND_ONLY .*MALFORMED PAD_EXCEEDS_PAYLOAD$'
expect 6 'MALFORMED TOO_SHORT \(8 bytes\)$'
printf '%s\n' "$out" | grep -Eq '6 RoCEv2 packets \(ICRC ok 4, bad 1; malformed 4\)' ||
	{ echo "FAIL: summary"; fail=1; }
[ $fail = 0 ] && echo OK
exit $fail
