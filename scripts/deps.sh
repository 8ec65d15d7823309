#!/bin/sh
# deps.sh — make sure the Debian packages uroce needs are installed.
#
#   scripts/deps.sh build     what building needs
#   scripts/deps.sh demo      building and the main job (./run-demo.sh)
#   scripts/deps.sh test      building, the main job and the tests (tests run real tools:
#                             tshark, scapy, ibverbs-utils, perftest, ... through uroce)
#   scripts/deps.sh bench     the above and bench/run.sh's peers (iperf3, jq, ...)
#   scripts/deps.sh ci        everything .ci/run needs (the fresh-root stage's debootstrap)
#
# The packages are the libraries and modules below plus the package of every command
# scripts/tools.txt lists for those parts, so a command the scripts run is installed by
# construction (scripts/check-tools.py checks that list against the scripts and dpkg).
# As root, missing packages are installed with apt-get (non-interactive).  Otherwise the
# apt-get line is printed and the script fails.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

# Libraries, headers and Python modules: what no command stands for.
BUILD_LIBS="libibverbs-dev librdmacm-dev libisal-dev libpcap-dev libcmocka-dev zlib1g-dev"
TEST_LIBS="libclang-rt-14-dev python3 python3-scapy python3-pyverbs ibverbs-providers \
libibverbs1 librdmacm1 libucx0 ucx-utils libfabric1 openmpi-bin libopenmpi3 \
libopenmpi-dev libmpich-dev python3-mpi4py"

case "${1:-build}" in
build) parts="build"; want="$BUILD_LIBS" ;;
demo) parts="build demo"; want="$BUILD_LIBS" ;;
test) parts="build demo test"; want="$BUILD_LIBS $TEST_LIBS" ;;
bench) parts="build demo test bench"; want="$BUILD_LIBS $TEST_LIBS" ;;
ci) parts="build demo test bench ci"; want="$BUILD_LIBS $TEST_LIBS" ;;
*) echo "usage: $0 build|demo|test|bench|ci" >&2; exit 2 ;;
esac
for part in $parts; do
	want="$want $(awk -v p="$part" '!/^#/ && NF == 3 {
		n = split($3, a, ","); for (i = 1; i <= n; i++) if (a[i] == p) print $2 }' \
		"$here/tools.txt")"
done

missing=""
for p in $(printf '%s\n' $want | sort -u); do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "uroce needs these Debian packages:$missing" >&2
	echo "install them with:" >&2
	echo "  sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# An apt index that is days old can miss current package versions: refresh once.
apt-get update -qq >&2
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2
