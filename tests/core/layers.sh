#!/bin/sh
# layers.sh LIBDIR — lower layers never call upward (docs/ARCHITECTURE.md "Layers").
#
# The static libraries, bottom to top: uroce_wire and uroce_ipc, then uroce_core, then
# uroce_transport, then uroce_verbs.  Each library's undefined symbols must not be defined
# by a library above it: the transports reach the verbs layer only through the hooks of
# src/core/upcall.h, and src/core reaches nothing above it.  Before the cut (the
# transports calling uroce_cq_push, uroce_query_gid, uroce_qp_error, ... by name) this
# printed 13 such symbols and failed.
set -u
dir=$1
defs() { nm -g --defined-only "$dir/liburoce_$1.a" | awk 'NF == 3 { print $3 }' | sort -u; }
undefs() { nm -u "$dir/liburoce_$1.a" | awk '{ print $NF }' | sort -u; }
fail=0
check() { # LOWER UPPER...
	low=$1
	shift
	for up in "$@"; do
		bad=$(undefs "$low" | comm -12 - "$tmp/$up.def")
		if [ -n "$bad" ]; then
			echo "layers: uroce_$low calls up into uroce_$up:" $bad
			fail=1
		fi
	done
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
for l in wire ipc core transport verbs; do
	[ -f "$dir/liburoce_$l.a" ] || { echo "layers: $dir/liburoce_$l.a missing"; exit 1; }
	defs $l >"$tmp/$l.def"
done
check wire core transport verbs
check ipc core transport verbs
check core transport verbs
check transport verbs
# The check must see something: the transports do call the core (a CQ push at least).
undefs transport | grep -qx uroce_cqring_push || { echo "layers: uroce_transport does not call uroce_cqring_push?"; fail=1; }
[ $fail = 0 ] && echo "layers: ok (wire, ipc < core < transport < verbs)"
exit $fail
