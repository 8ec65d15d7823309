#!/bin/sh
# attrs.sh UROCE ATTRS — issue #17 (11): the device and port attributes (attrs.c), and the
# same values as Debian's unmodified `ibv_devinfo -v` prints them through `uroce run`.
# Runs under nsrun.sh (own user, network, pid and mount namespaces).
#   uroce0 on lo (multicast on, a route for 224.0.0.0/4), net.ipv4.igmp_max_memberships
#   set to 24 in this namespace: `attrs all` and every line of ibv_devinfo -v;
#   a fresh netns (the sysctl at its default): max_mcast_grp 20;
#   a veth (10 Gb/s): active_width 1X, active_speed FDR10 (10.0 Gbps), as Soft-RoCE maps it.
set -u
UROCE=$1
ATTRS=$2
. "$(dirname "$0")/../daemon/lib.sh"
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibverbs-utils not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export UROCE
# An ASan build of the library needs the ASan runtime first in uninstrumented programs.
asan=$(ldd "$(dirname "$UROCE")/../lib/libibverbs.so.1" | awk '/libasan/ {print $3}')
if [ -n "$asan" ]; then
	export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
fi

ip link set lo multicast on
ip route add 224.0.0.0/4 dev lo 2>/dev/null
GROUPS_MAX=24
echo $GROUPS_MAX >/proc/sys/net/ipv4/igmp_max_memberships ||
	{ echo "SKIP: cannot set net.ipv4.igmp_max_memberships"; exit 77; }

# The limits that memory bounds, from a fixed budget (docs/verbs.md "Limits"; attrs.c).
export UROCE_MEM_BUDGET_MB=1024
echo "== attrs all"
ATTRS_MCAST_GRP=$GROUPS_MAX timeout 120 "$UROCE" run "$ATTRS" all >"$tmp/attrs" 2>&1
rc=$?
cat "$tmp/attrs"
expect_eq "attrs all" "$rc" 0
flags=$(awk '$1 == "device_cap_flags" { print $2 }' "$tmp/attrs")
printed() { awk -v k="$1" '$1 == k { print $2 }' "$tmp/attrs"; }

# ---- Debian's ibv_devinfo -v: KEY VALUE as it prints them (device, then port 1)
timeout 20 "$UROCE" run ibv_devinfo -v -d uroce0 >"$tmp/devinfo" 2>&1 || fail "ibv_devinfo exited $?"
cat "$tmp/devinfo"
# devinfo KEY: the value on the first line "KEY: value" (tabs and spaces trimmed).
devinfo() {
	awk -v k="$1" '{ sub(/^[ \t]+/, "") }
		index($0, k ":") == 1 { v = substr($0, length(k) + 2); sub(/^[ \t]+/, "", v); print v; exit }' \
		"$tmp/devinfo"
}
while read -r key want; do
	expect_eq "ibv_devinfo $key" "$(devinfo "$key")" "$want"
done <<EOF
transport InfiniBand (0)
vendor_id 0xffffff
vendor_part_id 0
hw_ver 0x0
phys_port_cnt 1
max_mr_size 0xffffffffffffffff
page_size_cap 0xfffff000
max_qp 65536
max_qp_wr 65536
device_cap_flags $flags
max_sge 32
max_sge_rd 32
max_cq $(printed max_cq)
max_cqe 1048576
max_mr $(printed max_mr)
max_pd $(printed max_pd)
max_qp_rd_atom 128
max_ee_rd_atom 0
max_res_rd_atom 258048
max_qp_init_rd_atom 128
max_ee_init_rd_atom 0
atomic_cap ATOMIC_HCA (1)
max_ee 0
max_rdd 0
max_mw $(printed max_mw)
max_raw_ipv6_qp 0
max_raw_ethy_qp 0
max_mcast_grp $GROUPS_MAX
max_mcast_qp_attach 65536
max_total_mcast_qp_attach $((GROUPS_MAX * 65536))
max_ah 4194304
max_fmr 0
max_srq $(printed max_srq)
max_srq_wr 65536
max_srq_sge 32
max_pkeys 1
local_ca_ack_delay 15
state PORT_ACTIVE (4)
max_mtu 4096 (5)
active_mtu 4096 (5)
sm_lid 0
port_lid 0
port_lmc 0x00
link_layer Ethernet
max_msg_sz 0x80000000
port_cap_flags 0x00010000
port_cap_flags2 0x0000
max_vl_num 1 (1)
bad_pkey_cntr 0x0
qkey_viol_cntr 0x5
sm_sl 0
pkey_tbl_len 1
gid_tbl_len 32
subnet_timeout 0
init_type_reply 0
active_width 4X (2)
active_speed 25.0 Gbps (32)
phys_state LINK_UP (5)
EOF
[ -n "$flags" ] || fail "attrs printed no device_cap_flags"
for f in BAD_QKEY_CNTR UD_AV_PORT_ENFORCE MEM_MGT_EXTENSIONS MEM_WINDOW_TYPE_2B; do
	grep -qx "[[:space:]]*$f" "$tmp/devinfo" || fail "ibv_devinfo does not list $f"
done
# Left out on purpose (docs/verbs.md): the bits of rxe's 0x01223c76 that uroce lacks.
for f in AUTO_PATH_MIG CHANGE_PHY_PORT; do
	grep -qx "[[:space:]]*$f" "$tmp/devinfo" && fail "ibv_devinfo lists $f"
done
grep -q '^[[:space:]]*max_mcast_grp' "$tmp/devinfo" || fail "no max_mcast_grp line"

# ---- a namespace with the sysctl at its default: 20 groups (Linux's default)
mount -t tmpfs tmpfs /run || { echo "SKIP: cannot mount /run"; exit 77; }
ip netns add fresh || { echo "SKIP: no netns"; exit 77; }
ip -n fresh link set lo up
expect_eq "max_mcast_grp at the default sysctl" \
	"$(ip netns exec fresh "$UROCE" run ibv_devinfo -v | awk '$1 == "max_mcast_grp:" { print $2 }')" 20

# ---- a veth: Soft-RoCE's rate for its 10 Gb/s
ip link add va type veth peer name vb || { echo "SKIP: no veth"; exit 77; }
ip link set va up
ip link set vb up
"$UROCE" link add uroce1 netdev va >/dev/null || fail "link add uroce1"
timeout 20 "$UROCE" run "$ATTRS" rate uroce1 1 8 || fail "veth rate"
expect_eq "ibv_devinfo veth active_speed" \
	"$("$UROCE" run ibv_devinfo -v -d uroce1 | awk -F'\t+' '/active_speed:/ { print $3 }')" \
	"10.0 Gbps (8)"
finish
