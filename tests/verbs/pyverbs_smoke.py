#!/usr/bin/python3
"""pyverbs (Debian's python3-pyverbs, compiled against rdma-core 44) through our
libibverbs.so.1: it wraps nearly every verb, so it checks the ABI from a second,
independent consumer.  A missing pyverbs is a failure (scripts/deps.sh test installs it)."""
import errno
import sys

try:
    import pyverbs.device as d
    import pyverbs.enums as e
    from pyverbs.pyverbs_error import PyverbsRDMAError
    from pyverbs.pd import PD
    from pyverbs.cq import CQ, CqInitAttrEx, CQEX, CompChannel
    from pyverbs.mr import MR
    from pyverbs.qp import QPCap, QPInitAttr, QPAttr, QP
    from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
    from pyverbs.addr import AHAttr, GlobalRoute, AH
except ImportError as exc:
    print("FAIL: pyverbs not available (package python3-pyverbs):", exc)
    sys.exit(1)


def expect_errno(want, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except PyverbsRDMAError as exc:
        assert exc.error_code == want, f"{fn.__name__}: errno {exc.error_code}, expected {want}"
        return
    raise AssertionError(f"{fn.__name__} succeeded, expected errno {want}")


names = [dev.name.decode() for dev in d.get_device_list()]
assert "uroce0" in names, names
ctx = d.Context(name="uroce0")
attr = ctx.query_device()
assert attr.fw_version.startswith("uroce "), attr.fw_version
assert attr.max_qp_wr > 0 and attr.max_qp_rd_atom > 0
assert ctx.query_device_ex().orig_attr.max_cqe == attr.max_cqe
port = ctx.query_port(1)
assert port.state == e.IBV_PORT_ACTIVE and port.link_layer == e.IBV_LINK_LAYER_ETHERNET
assert str(ctx.query_gid(1, 0)) == "0000:0000:0000:0000:0000:ffff:7f00:0001"
assert ctx.query_gid_type(1, 0) == 1          # sysfs numbering: RoCE v2

pd = PD(ctx)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
assert mr.lkey == mr.rkey and mr.lkey != 0
expect_errno(errno.EINVAL, MR, pd, 4096, e.IBV_ACCESS_REMOTE_WRITE)
ch = CompChannel(ctx)
cq = CQ(ctx, 16, None, ch, 0)
cqx = CQEX(ctx, CqInitAttrEx(cqe=16, wc_flags=e.IBV_WC_STANDARD_FLAGS))
srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
assert qp.qp_state == e.IBV_QPS_RESET and qp.qp_num > 1
qp.to_init(QPAttr(port_num=1))
assert qp.qp_state == e.IBV_QPS_INIT
# INIT -> RTS skips RTR: not a transition.
expect_errno(errno.EINVAL, qp.modify, QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
ah = AH(pd, attr=AHAttr(gr=GlobalRoute(dgid=ctx.query_gid(1, 0), sgid_index=0), is_global=1, port_num=1))
for obj in (ah, qp, srq, cq, cqx, ch, mr, pd, ctx):
    obj.close()
print("PASS")
