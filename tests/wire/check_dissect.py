#!/usr/bin/python3
"""Independent dissection of uroce-encoded packets.

usage: check_dissect.py GEN_DISSECT WORKDIR

Runs GEN_DISSECT (tests/wire/gen_dissect.c), which writes WORKDIR/dissect.pcap
with one packet per RC/UC/UD opcode (IPv4, then IPv6) and prints the field
values it intended.  Then:
  * tshark (Debian's Wireshark) dissects the file; every BTH field and every
    extension-header field it knows must equal the intended value, fields of
    headers the opcode does not carry must be absent, and no frame may be
    flagged malformed;
  * scapy (scapy.contrib.roce, Debian's /usr/bin/python3) recomputes each IPv4
    ICRC (BTH.compute_icrc, and a rebuild with icrc=None); scapy 2.5 has no
    IPv6 ICRC, so IPv6 frames are checked with zlib here (same A17.3.3 rules).
Exit 0 all agree, 1 on any disagreement or a missing tshark or scapy.
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib


COLS = ("frame family opcode dqpn psn se ackreq padcnt pkey mig reth_va reth_rkey reth_len "
        "aeth_syn aeth_msn atm_va atm_rkey atm_swap atm_cmp atmack deth_qkey deth_srcqp imm ieth "
        "payload_len").split()

# expected column -> tshark field.  tshark shows the AtomicETH VA/R_Key with the RETH fields.
TSHARK = [
    ("opcode", "infiniband.bth.opcode"),
    ("dqpn", "infiniband.bth.destqp"),
    ("psn", "infiniband.bth.psn"),
    ("se", "infiniband.bth.se"),
    ("mig", "infiniband.bth.m"),
    ("ackreq", "infiniband.bth.a"),
    ("padcnt", "infiniband.bth.padcnt"),
    ("pkey", "infiniband.bth.p_key"),
    ("reth_va", "infiniband.reth.va"),
    ("reth_rkey", "infiniband.reth.r_key"),
    ("reth_len", "infiniband.reth.dmalen"),
    ("aeth_syn", "infiniband.aeth.syndrome"),
    ("aeth_msn", "infiniband.aeth.msn"),
    ("atm_swap", "infiniband.atomiceth.swapdt"),
    ("atm_cmp", "infiniband.atomiceth.cmpdt"),
    ("atmack", "infiniband.atomicacketh.origremdt"),
    ("deth_qkey", "infiniband.deth.q_key"),
    ("deth_srcqp", "infiniband.deth.srcqp"),
    ("imm", "infiniband.immdt"),
    ("ieth", "infiniband.ieth"),
]
EXTRA = ["frame.number", "_ws.expert"]

# Opcodes newer than tshark 4.0's dissector (IBA 1.5 memory placement): it shows
# the BTH but not their ETHs.  Their ETHs are checked by scapy's ICRC and by
# uroce's own round-trip tests instead.
TSHARK_UNKNOWN = {0x1C, 0x1D}


def num(s, col=""):
    s = s.strip()
    if s in ("", "-"):
        return None
    if s in ("True", "False"):
        return int(s == "True")
    if col in ("imm", "ieth") and not s.startswith("0x"):
        return int(s.replace(":", ""), 16)  # tshark shows FT_BYTES as hex digits
    return int(s, 0)


def fail(msg, errors):
    errors.append(msg)
    print("FAIL:", msg)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    gen, work = sys.argv[1], sys.argv[2]
    tshark = shutil.which("tshark")
    if not tshark:
        print("FAIL: tshark not installed (scripts/deps.sh test installs it)")
        return 1
    try:
        from scapy.all import rdpcap, raw, Ether, IP, IPv6, UDP  # noqa: F401
        from scapy.contrib.roce import BTH
    except ImportError as e:
        print("FAIL: scapy not available (package python3-scapy):", e)
        return 1

    os.makedirs(work, exist_ok=True)
    pcap = os.path.join(work, "dissect.pcap")
    out = subprocess.run([gen, pcap], check=True, capture_output=True, text=True).stdout
    exp = [dict(zip(COLS, line.split("\t"))) for line in out.splitlines() if line.strip()]
    if not exp:
        print("FAIL: generator produced nothing")
        return 1

    args = [tshark, "-n", "-r", pcap, "-d", "udp.port==4791,infiniband", "--disable-protocol", "rpcordma",
            "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"]
    for f in EXTRA + [t for _, t in TSHARK]:
        args += ["-e", f]
    res = subprocess.run(args, capture_output=True, text=True)
    if res.returncode != 0:
        print("FAIL: tshark:", res.stderr)
        return 1
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    errors = []
    if len(rows) != len(exp):
        fail("tshark saw %d frames, generator wrote %d" % (len(rows), len(exp)), errors)

    checked = 0
    for e, r in zip(exp, rows):
        frame, expert = r[0], r[1]
        got = dict(zip([c for c, _ in TSHARK], r[2:]))
        oc = int(e["opcode"], 0)
        if "Malformed" in expert:
            fail("frame %s opcode 0x%02x: tshark says malformed: %s" % (frame, oc, expert), errors)
        for col, field in TSHARK:
            want = num(e["atm_va"] if col == "reth_va" and e["atm_va"] != "-" else
                       e["atm_rkey"] if col == "reth_rkey" and e["atm_rkey"] != "-" else e[col])
            have = num(got.get(col, ""), col)
            if oc in TSHARK_UNKNOWN and not col.startswith(("opcode", "dqpn", "psn", "se", "mig", "ackreq",
                                                              "padcnt", "pkey")):
                continue
            if want != have:
                fail("frame %s opcode 0x%02x %s: intended %s, tshark %s" %
                     (frame, oc, col, e[col], got.get(col, "")), errors)
            elif want is not None:
                checked += 1
    print("tshark: %d frames, %d field values agree" % (len(rows), checked))

    # ICRC: scapy for IPv4, zlib here for IPv6.
    n4 = n6 = 0
    for i, p in enumerate(rdpcap(pcap)):
        udp = p[UDP]
        payload = bytes(udp.payload)
        wire = payload[-4:]
        if IP in p:
            bth = p[BTH]
            calc = bth.compute_icrc(None)
            if calc != wire:
                fail("frame %d: scapy ICRC %s, packet %s" % (i + 1, calc.hex(), wire.hex()), errors)
            q = p.copy()
            q[BTH].icrc = None
            if raw(q) != raw(p):
                fail("frame %d: scapy rebuild with icrc=None differs" % (i + 1), errors)
            n4 += 1
        else:
            ip6 = bytearray(raw(p[IPv6])[:40])
            ip6[0] |= 0x0F
            ip6[1:4] = b"\xff\xff\xff"
            ip6[7] = 0xFF
            u = bytearray(raw(udp)[:8])
            u[6:8] = b"\xff\xff"
            bthb = bytearray(payload[:12])
            bthb[4] = 0xFF
            calc = struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip6) + bytes(u) + bytes(bthb) + payload[12:-4]))
            if calc != wire:
                fail("frame %d (IPv6): ICRC %s, packet %s" % (i + 1, calc.hex(), wire.hex()), errors)
            n6 += 1
    print("ICRC: %d IPv4 frames agree with scapy (compute_icrc and rebuild), %d IPv6 frames with zlib" % (n4, n6))
    if n4 == 0 or n6 == 0:
        fail("expected both IPv4 and IPv6 frames", errors)
    print("%s: %d disagreements" % ("FAILED" if errors else "OK", len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
