#!/bin/sh
# fake_apps.sh UROCE FAKE CASE — tests/cm_apps/cm_apps.sh's lo cases, with the
# library's connection manager records served by fake_uroced_cm (FAKE) instead of
# uroced's: Debian's rdmacm-utils, qperf and perftest exercise librdmacm.so.1 before
# (and independently of) the daemon half.  Verbs still go to a real uroced.  Run by
# tests/daemon/nsrun.sh.
set -u
UROCE=$1
FAKE=$2
CASE=$3
real=uroce-real-$$
fake=uroce-fakecm-$$
tmp=$(mktemp -d)
: >"$tmp/fake"
UROCE_IPC_NAME=$fake "$FAKE" "$real" "$fake" >"$tmp/fake" 2>"${FAKE_LOG:-/dev/null}" &
fpid=$!
trap 'kill $fpid 2>/dev/null; rm -rf "$tmp"' EXIT
i=0
while ! grep -q ready "$tmp/fake"; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 $fpid 2>/dev/null; then
		echo "FAIL: the fake daemon did not start"; cat "$tmp/fake"; exit 1
	fi
	sleep 0.05
done
export UROCE_IPC_NAME=$fake
sh "$(dirname "$0")/../cm_apps/cm_apps.sh" "$UROCE" lo "$CASE"
