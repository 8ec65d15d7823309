#!/usr/bin/python3
"""Run unmodified rdmacm-utils programs on the drop-in librdmacm and see them fail cleanly.

usage: check_run.py LIBDIR

`ldd -r` (check_ldd.py) proves that the programs bind; this proves that they also run:
each program below is started with LD_LIBRARY_PATH=LIBDIR (and any LD_PRELOAD the
caller set, e.g. the ASan runtime under UROCE_SANITIZE), with no RDMA device and no
peer: UROCE_IPC_NAME names an abstract socket nobody listens on and UROCE_DAEMON a
binary that does not exist, so the libraries find no uroced and start none (whatever
daemons run on this host).  It passes when the program
  * exits on its own within the time limit (no call blocks forever),
  * is not killed by a signal (no crash inside the library or caused by what it
    returned),
  * prints no dynamic-loader error ("symbol lookup error", "version ... not found"),
  * exits with a non-zero status (there is no device, so nothing can succeed).
The expected wording of the error is deliberately not checked: it changes as the
connection manager gets implemented.

cmtime is not run: Debian's cmtime (rdma-core 44) aborts with "double free" when
rdma_create_id fails after rdma_create_event_channel succeeded; under ASan both free()
calls are inside cmtime's own main(), i.e. a bug in its error path that any librdmacm
whose channel creation succeeds would expose.

Exit status: 0 all passed, 1 a failure (a program that is not installed is one).
"""
import os
import shutil
import signal
import subprocess
import sys

TIME_LIMIT = 20  # seconds; every program is expected to give up within a second

PROGRAMS = [
    ["rping", "-s", "-a", "127.0.0.1", "-C", "1"],
    ["rping", "-c", "-a", "127.0.0.1", "-C", "1"],
    ["rdma_server"],
    ["rdma_client", "-s", "127.0.0.1"],
    ["rdma_xserver"],
    ["rdma_xclient", "-s", "127.0.0.1"],
    ["ucmatose"],
    ["ucmatose", "-s", "127.0.0.1"],
    ["udaddy"],
    ["udaddy", "-s", "127.0.0.1"],
    ["mckey", "-m", "239.1.1.1"],
    ["rstream", "-s", "127.0.0.1"],
    ["riostream", "-s", "127.0.0.1"],
    ["udpong", "-s", "127.0.0.1"],
    ["rcopy", "/dev/null", "127.0.0.1:/nonexistent"],
]

LOADER_ERRORS = ("symbol lookup error", "not found (required by", "error while loading shared libraries")


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    libdir = os.path.realpath(argv[1])
    if not os.path.exists(os.path.join(libdir, "librdmacm.so.1")):
        print(f"FAIL: {libdir}/librdmacm.so.1 does not exist")
        return 1
    if not shutil.which("rping"):
        print("FAIL: rdmacm-utils is not installed (scripts/deps.sh test installs it)")
        return 1
    env = dict(os.environ, LC_ALL="C", LD_LIBRARY_PATH=libdir,
               UROCE_IPC_NAME=f"uroce-abi-nodev-{os.getpid()}",
               UROCE_DAEMON="/nonexistent/uroced")
    passed, failed = 0, 0
    for cmd in PROGRAMS:
        name = " ".join(cmd)
        if not shutil.which(cmd[0]):
            print(f"FAIL {name}: not installed")
            failed += 1
            continue
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=TIME_LIMIT)
        except subprocess.TimeoutExpired:
            failed += 1
            print(f"FAIL {name}: still running after {TIME_LIMIT} s (killed)")
            continue
        out = (r.stdout + r.stderr).strip()
        last = out.splitlines()[-1] if out else ""
        why = None
        if r.returncode < 0:
            why = f"killed by {signal.Signals(-r.returncode).name}"
        elif any(e in out for e in LOADER_ERRORS):
            why = "dynamic loader error"
        elif r.returncode == 0:
            why = "exit status 0 although no device exists"
        if why:
            failed += 1
            print(f"FAIL {name}: {why}")
            for line in out.splitlines()[:8]:
                print(f"       {line}")
        else:
            passed += 1
            print(f"ok   {name}: exit {r.returncode}: {last[:80]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
