#!/usr/bin/python3
"""Compare the dynamic exports of a drop-in library with the reference (Debian) one.

usage: check_exports.py OURS REFERENCE [--skip-nondefault] [--require-node NODE]...
                                       [--require-object NAME]...

Checks, each counted as one passed/failed item:
  * SONAME is identical;
  * every version node of REFERENCE (readelf -V, .gnu.version_d) exists in OURS with the
    same parent, and OURS defines no node that REFERENCE lacks;
  * every default symbol name@@NODE defined by REFERENCE is defined by OURS as name@@NODE
    with the same symbol type (FUNC/OBJECT); for an OBJECT also the same size;
  * every non-default symbol name@NODE of REFERENCE is defined by OURS too, unless
    --skip-nondefault is given (then it is listed as skipped: docs/versioning.md explains
    why the drop-in libibverbs leaves out the 34 old-ABI compat twins);
  * OURS exports no symbol that REFERENCE does not (nothing leaks past the version script);
  * --require-node / --require-object: named nodes / OBJECT symbols must be present in
    REFERENCE and OURS (guards the assumptions the drop-in is built on).

Exit status: 0 all passed, 1 something failed (a REFERENCE that is not installed too).
Only binutils' readelf is used, so the comparison does not depend on loading either
library.
"""
import os
import re
import subprocess
import sys



def readelf(*args):
    out = subprocess.run(["readelf", "-W", *args], check=True, capture_output=True,
                         text=True, env=dict(os.environ, LC_ALL="C"))
    return out.stdout


def version_defs(path):
    """{node: parent or None} for every non-BASE version definition, plus the SONAME."""
    nodes, soname, cur = {}, None, None
    in_defs = False
    for line in readelf("-V", path).splitlines():
        if line.startswith("Version definition section"):
            in_defs = True
            continue
        if line.startswith("Version needs section") or line.startswith("Version symbols section"):
            in_defs = False
            continue
        if not in_defs:
            continue
        m = re.search(r"Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)", line)
        if m:
            flags, name = m.groups()
            if flags == "BASE":
                cur = None
                soname = name
            else:
                cur = name
                nodes[name] = None
            continue
        m = re.search(r"Parent \d+: (\S+)", line)
        if m and cur:
            nodes[cur] = m.group(1)
    return soname, nodes


def defined_symbols(path, nodes):
    """{(name, version, is_default): (type, size)} for every defined dynamic symbol.

    Unversioned exports get version None.  The ABS marker symbols some linkers emit for
    each version node (name == node) are not symbols of the ABI and are skipped.
    """
    syms = {}
    for line in readelf("--dyn-syms", path).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit():
            continue
        _, _, size, typ, bind, _, ndx, name = f[:8]
        if ndx == "UND" or bind not in ("GLOBAL", "WEAK", "UNIQUE"):
            continue
        if "@@" in name:
            base, ver = name.split("@@", 1)
            default = True
        elif "@" in name:
            base, ver = name.split("@", 1)
            default = False
        else:
            base, ver, default = name, None, True
        if ndx == "ABS" and ver is None and base in nodes:
            continue
        size = int(size, 0) if size.startswith("0x") else int(size)
        syms[(base, ver, default)] = (typ, size)
    return syms


def main(argv):
    args = argv[1:]
    skip_nondefault = "--skip-nondefault" in args
    req_nodes, req_objects, pos = [], [], []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--skip-nondefault":
            pass
        elif a in ("--require-node", "--require-object") and i + 1 < len(args):
            (req_nodes if a == "--require-node" else req_objects).append(args[i + 1])
            i += 1
        else:
            pos.append(a)
        i += 1
    if len(pos) != 2:
        print(__doc__)
        return 2
    ours, ref = pos
    if not os.path.exists(ref):
        print(f"FAIL: reference library {ref} is not installed (scripts/deps.sh test installs it)")
        return 1
    if not os.path.exists(ours):
        print(f"FAIL: {ours} does not exist (not built?)")
        return 1

    passed, failed, skipped = 0, [], []

    def check(ok, what):
        nonlocal passed
        if ok:
            passed += 1
        else:
            failed.append(what)

    ref_soname, ref_nodes = version_defs(ref)
    our_soname, our_nodes = version_defs(ours)
    check(ref_soname == our_soname, f"SONAME: ours {our_soname!r}, reference {ref_soname!r}")

    for node, parent in ref_nodes.items():
        if node not in our_nodes:
            check(False, f"version node {node} missing")
        else:
            check(our_nodes[node] == parent,
                  f"version node {node}: parent {our_nodes[node]} (reference {parent})")
    for node in our_nodes:
        if node not in ref_nodes:
            check(False, f"version node {node} is not in the reference")
    for node in req_nodes:
        check(node in ref_nodes and node in our_nodes,
              f"required version node {node} missing (reference: {node in ref_nodes})")

    ref_syms = defined_symbols(ref, ref_nodes)
    our_syms = defined_symbols(ours, our_nodes)

    for (name, ver, default), (typ, size) in sorted(ref_syms.items(), key=lambda kv: kv[0][:2]):
        label = f"{name}{'@@' if default else '@'}{ver}"
        mine = our_syms.get((name, ver, default))
        if not default and skip_nondefault and mine is None:
            skipped.append(label)
            continue
        if mine is None:
            # Say whether it exists under another version: the usual mistake.
            other = [f"{n}{'@@' if d else '@'}{v}" for (n, v, d) in our_syms if n == name]
            check(False, f"missing {label} ({typ})" + (f"; have {', '.join(other)}" if other else ""))
            continue
        if mine[0] != typ:
            check(False, f"{label}: type {mine[0]}, reference {typ}")
        elif typ == "OBJECT" and mine[1] != size:
            check(False, f"{label}: OBJECT size {mine[1]}, reference {size}")
        else:
            check(True, label)

    for key in sorted(our_syms, key=lambda k: (k[0], str(k[1]))):
        if key not in ref_syms:
            name, ver, default = key
            check(False, f"extra export {name}{'@@' if default else '@'}{ver} (not in the reference)")

    for name in req_objects:
        hits = [k for k, v in our_syms.items() if k[0] == name and v[0] == "OBJECT"]
        check(bool(hits), f"required data object {name} is not exported as OBJECT")

    print(f"ours:      {ours} (SONAME {our_soname}, {len(our_nodes)} nodes, {len(our_syms)} symbols)")
    print(f"reference: {ref} (SONAME {ref_soname}, {len(ref_nodes)} nodes, {len(ref_syms)} symbols)")
    if skipped:
        print(f"skipped {len(skipped)} non-default compat symbols (not exported on purpose): "
              + " ".join(skipped))
    for f in failed:
        print(f"FAIL: {f}")
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
