#!/usr/bin/python3
"""Golden test: uroce's MAD/CM decoder against Wireshark's InfiniBand dissector.

usage: golden_tshark.py MAD_DUMP CAPTURE.pcap

Runs `MAD_DUMP CAPTURE` (tests/mad/mad_dump.c: name=value lines under Wireshark's field
names, plus its own encode(decode()) == bytes check) and `tshark -T pdml` on the same
file, then requires, for every MAD frame:
  * the same set of frames carrying MADs (ICMP errors quoting a MAD excluded: they are
    not MADs on the wire);
  * every field mad_dump prints equals tshark's value for that field;
  * every infiniband.mad.* / infiniband.cm.* field tshark shows is checked (or listed in
    NOT_CHECKED with the reason).

Wireshark 4.0 mis-dissects three REQ path fields (packet-infiniband.c adds the 20-bit
flow label as a 3-byte item under a 32-bit mask, and reserved/packet rate from the first
byte of the 32-bit word instead of its last byte).  For those, tshark still tells where
the 32-bit word starts (pos); the expected value is taken from the capture's bytes at
that position with IBA 12.6 Table 106's layout (flow label = bits 31..12, reserved =
11..6, packet rate = 5..0).
"""
import subprocess
import sys
import xml.etree.ElementTree as ET

# tshark fields deliberately not compared, with why.
NOT_CHECKED = {
    "infiniband.cm.req.ip_cm": "container of the ip_cm.* fields, which are checked",
}
WORD_FIXUPS = {  # field -> (shift, mask) applied to the big-endian 32-bit word at pos
    "flowlabel": (12, 0xFFFFF),
    "reserved0": (6, 0x3F),
    "pktrate": (0, 0x3F),
}


def read_pcap(path):
    """Frame bytes by 1-based number (classic pcap, either byte order)."""
    data = open(path, "rb").read()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "little"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = "big"
    else:
        raise SystemExit(f"{path}: not a classic pcap file")
    frames, off, n = {}, 24, 0
    while off + 16 <= len(data):
        caplen = int.from_bytes(data[off + 8:off + 12], order)
        n += 1
        frames[n] = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
    return frames


def norm(v):
    """Normalise a printed value: ints (0x.. or decimal) to int, bytes to hex, else str."""
    v = v.strip()
    if v.lower().startswith("0x"):
        try:
            return int(v, 16)
        except ValueError:
            pass
    if v.isdigit():
        return int(v)
    if ":" in v and all(len(p) == 2 for p in v.split(":")):
        return v.replace(":", "").lower()
    return v.lower()


def parse_dump(text):
    """frame -> {name: [values in order]}"""
    frames, cur = {}, None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition("=")
        if k == "frame":
            cur = frames.setdefault(int(v), {})
        else:
            cur.setdefault(k, []).append(v)
    return frames


def tshark_value(name, f, raw):
    """The value tshark gives for one occurrence of a field, normalised."""
    suffix = name.rsplit("_", 1)[-1] if "_" in name else ""
    if name.startswith("infiniband.cm.req.") and suffix in WORD_FIXUPS:
        pos = int(f.get("pos"))
        word = int.from_bytes(raw[pos:pos + 4], "big")
        shift, mask = WORD_FIXUPS[suffix]
        return (word >> shift) & mask
    return norm(f.get("show"))


def parse_pdml(xml_text):
    out = {}
    root = ET.fromstring(xml_text)
    for pkt in root.iter("packet"):
        num, fields = None, {}
        for f in pkt.iter("field"):
            name = f.get("name", "")
            if name == "frame.number":
                num = int(f.get("show"))
            if name.startswith("infiniband.mad.") or name.startswith("infiniband.cm."):
                fields.setdefault(name, []).append(f)
        if num is not None and fields:
            out[num] = fields
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dump_bin, cap = sys.argv[1], sys.argv[2]
    d = subprocess.run([dump_bin, cap], capture_output=True, text=True)
    sys.stderr.write(d.stderr)
    if d.returncode != 0:
        print(f"FAIL: mad_dump exited {d.returncode}")
        return 1
    ours = parse_dump(d.stdout)
    t = subprocess.run(["tshark", "-r", cap, "-o", "gui.max_tree_depth:64", "-d",
                        "udp.port==4791,infiniband", "-T", "pdml",
                        "-Y", "infiniband.mad && !icmp && !icmpv6"], capture_output=True, text=True)
    if t.returncode != 0:
        print(f"FAIL: tshark exited {t.returncode}: {t.stderr.strip()}")
        return 1
    theirs = parse_pdml(t.stdout)
    raw = read_pcap(cap)

    fails, checked, unchecked = [], 0, set()
    if set(ours) != set(theirs):
        fails.append(f"MAD frames differ: uroce {sorted(ours)} tshark {sorted(theirs)}")
    for num in sorted(set(ours) & set(theirs)):
        mine, ws = ours[num], theirs[num]
        for name, vals in mine.items():
            if name not in ws:
                fails.append(f"frame {num}: {name}: tshark does not show it (uroce {vals})")
                continue
            if len(ws[name]) != len(vals):
                fails.append(f"frame {num}: {name}: tshark shows it {len(ws[name])} times, "
                             f"uroce {len(vals)}")
                continue
            for val, f in zip(vals, ws[name]):
                if val.startswith("hex:"):
                    got = val[4:]
                    want = (f.get("value") or "").lower()  # full bytes ('show' may be cut)
                else:
                    got = norm(val)
                    want = tshark_value(name, f, raw[num])
                checked += 1
                if got != want:
                    fails.append(f"frame {num}: {name}: uroce {got!r} tshark {want!r}")
        for name in ws:
            if name not in mine and name not in NOT_CHECKED:
                unchecked.add(name)
    for name in sorted(unchecked):
        fails.append(f"tshark field not checked by the test: {name}")
    for f in fails:
        print("FAIL:", f)
    print(f"{cap}: {len(ours)} MADs, {checked} field values compared with tshark, "
          f"{len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
