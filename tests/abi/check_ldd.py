#!/usr/bin/python3
"""Do unmodified Debian RDMA consumers load against the drop-in libraries?

usage: check_ldd.py LIBDIR

For every ELF file of the consumer packages below, runs `ldd -r` twice: once as
installed (baseline) and once with LD_LIBRARY_PATH=LIBDIR.  `ldd -r` makes the dynamic
loader bind every symbol without running the program, so it reports exactly what would
stop a -z now binary from starting ("undefined symbol: X, version V") and a missing
version node ("version `V' not found"), also for lazily bound plugins such as UCX's
modules.  An ELF passes when
  * the run with LIBDIR shows no "undefined symbol", "version ... not found" or
    "=> not found" line that the baseline run does not show (Python extension modules
    legitimately leave the interpreter's Py* symbols undefined; those appear in both
    runs and are not failures), and
  * every libibverbs.so.1 / librdmacm.so.1 in its dependency tree maps into LIBDIR, for
    each of the two libraries that LIBDIR contains.

A package that is not installed is a failure (scripts/deps.sh test installs them all), so a
machine that lacks one cannot pass with a weaker check.  The apt list is in
docs/versioning.md.

Exit status: 0 all ELFs passed, 1 otherwise.
"""
import fnmatch
import os
import re
import subprocess
import sys

RDMA_LIBS = ("libibverbs.so.1", "librdmacm.so.1")

# (package, selection).  "all": every ELF the package ships.  "needs": only ELFs whose
# DT_NEEDED names libibverbs.so.1 or librdmacm.so.1.  A list: ELFs whose file name
# matches one of the glob patterns.
PACKAGES = [
    ("ibverbs-utils", "all"),
    ("rdmacm-utils", "all"),
    ("perftest", "all"),
    ("qperf", "all"),
    ("python3-pyverbs", "all"),
    ("libucx0", ["libuct_ib*.so*", "libuct_rdmacm*.so*"]),
    ("libfabric1", "needs"),
    ("libopenmpi3", "needs"),
    ("openmpi-bin", "needs"),
    # The rsocket LD_PRELOAD shim ships with Debian's librdmacm1, runs on top of ours.
    ("librdmacm1", ["librspreload*.so*"]),
]

PROBLEM = re.compile(r"undefined symbol|version `[^']*' not found|=> not found")
MAPPING = re.compile(r"^\s*(\S+) => (\S+) \(0x[0-9a-f]+\)")


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip().endswith(" installed")


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def needs_rdma(path):
    r = subprocess.run(["readelf", "-d", path], capture_output=True, text=True,
                       env=dict(os.environ, LC_ALL="C"))
    return any(f"[{lib}]" in r.stdout for lib in RDMA_LIBS)


def package_elfs(pkg, selection):
    r = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True, check=True)
    seen, out = set(), []
    for path in r.stdout.splitlines():
        if not os.path.isfile(path) or os.path.islink(path) or not is_elf(path):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        if selection == "needs" and not needs_rdma(path):
            continue
        if isinstance(selection, list) and not any(
                fnmatch.fnmatch(os.path.basename(path), p) for p in selection):
            continue
        out.append(path)
    return sorted(out)


def ldd(path, libdir):
    env = dict(os.environ, LC_ALL="C")
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("LD_PRELOAD", None)
    if libdir:
        env["LD_LIBRARY_PATH"] = libdir
    r = subprocess.run(["ldd", "-r", path], capture_output=True, text=True, env=env, timeout=60)
    return (r.stdout + r.stderr).splitlines()


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    libdir = os.path.realpath(argv[1])
    ours = {lib: os.path.realpath(os.path.join(libdir, lib))
            for lib in RDMA_LIBS if os.path.exists(os.path.join(libdir, lib))}
    if not ours:
        print(f"FAIL: neither {' nor '.join(RDMA_LIBS)} is in {libdir}")
        return 1
    for lib in RDMA_LIBS:
        if lib not in ours:
            print(f"note: {lib} is not in {libdir}; the installed one is used and its "
                  "mapping is not checked")

    passed, failed, present = 0, 0, 0
    for pkg, selection in PACKAGES:
        if not installed(pkg):
            print(f"FAIL {pkg}: package not installed (scripts/deps.sh test installs it)")
            failed += 1
            continue
        present += 1
        elfs = package_elfs(pkg, selection)
        if not elfs:
            if selection == "needs":
                print(f"note {pkg}: no ELF file links libibverbs/librdmacm directly")
            else:
                print(f"FAIL {pkg}: installed but no ELF file selected (package layout changed?)")
                failed += 1
            continue
        for elf in elfs:
            base = set(l.strip() for l in ldd(elf, None) if PROBLEM.search(l))
            lines = ldd(elf, libdir)
            problems = [l.strip() for l in lines if PROBLEM.search(l) and l.strip() not in base]
            mapped = {}
            for l in lines:
                m = MAPPING.match(l)
                if m and m.group(1) in RDMA_LIBS:
                    mapped[m.group(1)] = m.group(2)
            for lib, path in sorted(mapped.items()):
                if lib in ours and os.path.realpath(path) != ours[lib]:
                    problems.append(f"{lib} => {path} (expected {ours[lib]})")
            uses = ",".join(sorted(l.split(".")[0][3:] for l in mapped)) or "no rdma deps"
            if problems:
                failed += 1
                print(f"FAIL {pkg} {elf} [{uses}]")
                for p in problems[:12]:
                    print(f"       {p}")
                if len(problems) > 12:
                    print(f"       ... {len(problems) - 12} more")
            else:
                passed += 1
                print(f"ok   {pkg} {elf} [{uses}]")
    if present == 0:
        print("FAIL: none of the consumer packages is installed: nothing was checked")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
