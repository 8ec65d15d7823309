#!/bin/sh
# deps.sh — make sure the Debian packages uroce needs are installed.
#
#   scripts/deps.sh build     what building needs
#   scripts/deps.sh test      what building and the tests need (tests run real tools:
#                             tshark, scapy, ibverbs-utils, perftest, ... through uroce)
#
# As root, missing packages are installed with apt-get (non-interactive).  Otherwise the
# apt-get line is printed and the script fails.
set -eu

BUILD_PKGS="cmake make gcc pkg-config libibverbs-dev librdmacm-dev libisal-dev libpcap-dev \
libcmocka-dev zlib1g-dev iproute2"
TEST_PKGS="clang libclang-rt-14-dev binutils python3 ibverbs-providers tshark python3-scapy ibverbs-utils rdmacm-utils perftest qperf \
iperf3 python3-pyverbs libucx0 ucx-utils libfabric1 openmpi-bin libopenmpi3 util-linux"

case "${1:-build}" in
build) want="$BUILD_PKGS" ;;
test) want="$BUILD_PKGS $TEST_PKGS" ;;
*) echo "usage: $0 build|test" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
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
