#!/usr/bin/env python3
"""check-tools.py [--scan-only] — every external command uroce's scripts run comes from a
package that scripts/deps.sh installs.

scripts/tools.txt maps each command to its Debian package and to the part that needs it
(build, demo, test); deps.sh installs the packages of that list, so a command in it is
installed by construction.  This check makes the list honest:

  1. each listed command is found on PATH (with /usr/sbin and /sbin) and `dpkg -S` says its
     file belongs to the listed package (so a command that happens to be on this machine
     from another package, or installed by hand outside dpkg, is caught);
  2. the scripts (run-*.sh, scripts/*.sh, bench/run.sh, tests/**/*.sh and *.py, and the
     COMMAND of every add_test) are scanned for the commands they run: the word in command
     position of each shell command (after wrappers such as timeout, env, exec, ip netns
     exec, `uroce run`), and the program of each Python subprocess call.  A command that is
     neither listed, a shell builtin or keyword, a function of the script, nor one of
     uroce's own programs fails the check.

The scan reads the scripts, not what they build at run time (a command inside a string
such as srv="ibv_rc_pingpong ..." is not seen): the fresh-root CI stage
(scripts/fresh-root.sh, which runs the README's commands on a Debian root that has
nothing else) is the check for those.  --scan-only skips step 1 (no dpkg needed);
--parts=build,demo,test (the default) names the parts whose commands step 1 checks.
Exit 0 when both steps pass, 1 otherwise.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Shell builtins, keywords and the commands of POSIX sh itself.
SH_BUILTIN = set("""
. : [ [[ ]] { } ! alias bg break cd command continue echo eval exec exit export false fg
getopts hash jobs kill local printf pwd read readonly return set shift test times trap true
type ulimit umask unalias unset wait case esac if then else elif fi for while until do done
in function select
""".split())

# Words that run the next word as a command: (name, how many words to skip after it, or a
# callable that returns the index of the command in the token list).
def _after_options(toks, i, with_arg=()):
    """Skip options (and the arguments of those in with_arg) after toks[i]."""
    j = i + 1
    while j < len(toks) and toks[j].startswith("-"):
        j += 2 if toks[j] in with_arg else 1
    return j


def _timeout(toks, i):
    j = _after_options(toks, i, ("-s", "--signal", "-k", "--kill-after"))
    return j + 1  # the duration


def _env(toks, i):
    j = _after_options(toks, i, ("-u", "--unset", "-C", "--chdir"))
    while j < len(toks) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", toks[j]):
        j += 1
    return j


def _taskset(toks, i):
    j = _after_options(toks, i)
    return j + 1  # the CPU list


def _ip(toks, i):
    # ip [-n NS] netns exec NS CMD...
    if toks[i + 1:i + 3] == ["netns", "exec"]:
        return i + 4
    return None


def _uroce(toks, i):
    if i + 1 < len(toks) and toks[i + 1] == "run":
        return _after_options(toks, i + 1)   # uroce run [-v] [--ns|--shim|--plain] [--] CMD
    return None


def _unshare(toks, i):
    return _after_options(toks, i)


WRAPPERS = {
    "exec": lambda t, i: _after_options(t, i),
    "command": lambda t, i: _after_options(t, i),
    "nohup": lambda t, i: i + 1,
    "setsid": lambda t, i: _after_options(t, i),
    "nice": lambda t, i: _after_options(t, i, ("-n",)),
    "stdbuf": lambda t, i: _after_options(t, i),
    "timeout": _timeout,
    "env": _env,
    "taskset": _taskset,
    "ip": _ip,
    "uroce": _uroce,
    "unshare": _unshare,
    "sudo": lambda t, i: _after_options(t, i),
}

SEPARATORS = re.compile(r"\|\||&&|;;|[;|&()`]|\$\(|\bthen\b|\bdo\b|\belse\b|\{")


def tools_list():
    """scripts/tools.txt: {command: (package, parts)}."""
    tools = {}
    with open(os.path.join(ROOT, "scripts", "tools.txt")) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if len(line) != 3:
                sys.exit(f"scripts/tools.txt:{n}: want 'command package part[,part]'")
            tools[line[0]] = (line[1], line[2].split(","))
    return tools


def own_programs():
    """uroce's own programs, scripts and test binaries: every add_executable target name
    and every file under scripts/ and tests/."""
    names = {"uroce", "uroced"}
    for d in ("scripts", "tests", "bench"):
        for _, _, files in os.walk(os.path.join(ROOT, d)):
            names.update(files)
    for d, _, files in os.walk(ROOT):
        if "/.git" in d or "/build" in d:
            continue
        for fn in files:
            if fn == "CMakeLists.txt" or fn.endswith(".cmake"):
                txt = open(os.path.join(d, fn)).read()
                names.update(re.findall(r"add_executable\(\s*([A-Za-z0-9_.-]+)", txt))
    return names


def _blank(m):
    """Replace a match with spaces, keeping its newlines (line numbers stay right)."""
    return re.sub(r"[^\n]", " ", m.group(0))


def strip_shell(text, extras):
    """The parts of a script that run as commands: comments, heredoc bodies, single-quoted
    strings (awk and python programs), arithmetic and double-quoted strings blanked out.
    The command substitutions inside double quotes are appended to extras as (line
    index, text): they run, but what follows them belongs to the outer command."""
    # Heredoc bodies.
    out, lines, heredoc = [], text.split("\n"), None
    for raw in lines:
        if heredoc:
            out.append("")
            if raw.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_]+)['\"]?", raw)
        if m:
            heredoc = m.group(1)
        out.append(raw)
    text = "\n".join(out)
    res, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            res.append("  " if text[i + 1] != "\n" else " \n")
            i += 2
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;"):
            j = text.find("\n", i)
            j = n if j < 0 else j
            res.append(" " * (j - i))
            i = j
        elif c == "'":
            j = text.find("'", i + 1)
            j = n - 1 if j < 0 else j
            res.append("''" + re.sub(r"[^\n]", " ", text[i + 1:j]))
            i = j + 1
        elif text.startswith("$((", i):
            depth, j = 0, i + 1
            while j < n:
                if text[j] == "(":
                    depth += 1
                elif text[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            res.append("0" + re.sub(r"[^\n]", " ", text[i + 1:j + 1]))
            i = j + 1
        elif c == '"':
            # Keep the $( ... ) inside, blank the rest.
            j, buf = i + 1, ['""']
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    buf.append("  ")
                    j += 2
                    continue
                if text.startswith("$(", j) and not text.startswith("$((", j):
                    depth, k = 0, j + 1
                    while k < n:
                        if text[k] == "(":
                            depth += 1
                        elif text[k] == ")":
                            depth -= 1
                            if depth == 0:
                                break
                        k += 1
                    extras.append((text.count("\n", 0, j), text[j + 2:k]))
                    buf.append(re.sub(r"[^\n]", " ", text[j:k + 1]))
                    j = k + 1
                    continue
                buf.append("\n" if text[j] == "\n" else " ")
                j += 1
            res.append("".join(buf))
            i = j + 1
        else:
            res.append(c)
            i += 1
    return "".join(res)


def shell_functions(paths):
    funcs = set()
    for p in paths:
        funcs.update(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\)", open(p).read(), re.M))
    return funcs


def shell_commands(path, funcs):
    """(line number, command word) for each simple command of a POSIX sh script."""
    return commands_of(open(path).read(), funcs, 0)


def commands_of(src, funcs, base_line):
    out, extras = [], []
    text = strip_shell(src, extras)
    for idx, inner in extras:
        out += commands_of(inner, funcs, base_line + idx)
    in_case = 0
    for n, line in enumerate(text.split("\n"), base_line + 1):
        opens = len(re.findall(r"\bcase\b", line))
        # A case pattern ("pp-*)", "lo|veth)") is not a command.
        if in_case or opens:
            pat = r"\(?[^\s()]+(\s*\|\s*[^\s()]+)*\)"
            line = re.sub(r"^\s*" + pat, " ", line)
            line = re.sub(r"(;;|\bin)\s*" + pat, " ", line)
        in_case = max(0, in_case + opens - len(re.findall(r"\besac\b", line)))
        for seg in SEPARATORS.split(line):
            try:
                toks = shlex.split(seg, posix=True)
            except ValueError:
                toks = seg.split()
            i = 0
            # Assignments, redirections and a leading '!'.
            while i < len(toks) and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", toks[i]) or
                                     re.match(r"^\d*[<>]", toks[i]) or toks[i] == "!"):
                i += 1
            while i < len(toks):
                w = toks[i]
                if w.startswith("$") or w == "":
                    # "$UROCE" run X, $S X (S is "ip netns exec a"), $TSHARK -r ...: a
                    # variable naming a program of ours or a prefix; look at what follows.
                    if i + 1 < len(toks) and toks[i + 1] == "run":
                        i += 2
                        continue
                    i += 1
                    if i < len(toks) and toks[i] in WRAPPERS:
                        continue
                    break
                base = os.path.basename(w)
                if "/" in w and not w.startswith("$") and not os.path.exists(w):
                    break  # a path of the test's own making (or a deliberately missing one)
                if base in WRAPPERS:
                    j = WRAPPERS[base](toks, i)
                    out.append((n, base))
                    if j is None:
                        break
                    i = j
                    continue
                if (re.match(r"^[A-Za-z][A-Za-z0-9_.+-]*$", base) and base not in SH_BUILTIN
                        and base not in funcs):
                    out.append((n, base))
                break
    return out


def python_commands(path):
    """(line number, program) for subprocess calls and shutil.which() in a Python file."""
    out = []
    for n, line in enumerate(open(path), 1):
        for m in re.finditer(r"""(?:subprocess\.\w+|shutil\.which)\(\s*\[?\s*["']([A-Za-z][\w.+-]*)["']""", line):
            out.append((n, m.group(1)))
        # A literal argv list in a table of programs: ["rping", "-s", ...]
        for m in re.finditer(r"""^\s*\[\s*["']([a-z][\w.+-]*)["']\s*,""", line):
            out.append((n, m.group(1)))
    return out


def cmake_commands(path):
    out = []
    txt = open(path).read()
    for m in re.finditer(r"add_test\(\s*NAME\s+\S+\s+COMMAND\s+([^\s)]+)", txt):
        w = m.group(1)
        if "$" in w or "/" in w:
            continue
        out.append((txt[:m.start()].count("\n") + 1, w))
    return out


def scripts():
    for fn in ("run-demo.sh", "run-tests.sh"):
        yield os.path.join(ROOT, fn)
    for d in ("scripts", "tests", "bench"):
        for dp, _, files in os.walk(os.path.join(ROOT, d)):
            for fn in sorted(files):
                if fn.endswith((".sh", ".py")) or fn == "CMakeLists.txt" or fn.endswith(".cmake"):
                    yield os.path.join(dp, fn)


def main(argv):
    parts = {"build", "demo", "test"}
    for a in argv:
        if a.startswith("--parts="):
            parts = set(a[len("--parts="):].split(","))
    tools = tools_list()
    ours = own_programs()
    bad = 0

    # 1. each listed command comes from its package.
    if "--scan-only" not in argv:
        for cmd, (pkg, cparts) in sorted(tools.items()):
            if not parts.intersection(cparts):
                continue
            # The package must ship the command in a system directory (dpkg records paths
            # as the package ships them: /bin/x or /usr/bin/x on a merged-/usr system, so
            # ask for every spelling).  What PATH finds first may be something else (a
            # pyenv python3, say): that is noted, since the scripts would run it.
            owners, files = set(), []
            for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
                f = os.path.join(d, cmd)
                if not os.path.lexists(f):
                    continue
                files.append(f)
                # An alternatives link (awk -> /etc/alternatives/awk -> mawk) belongs to no
                # package; the file it resolves to does.
                r = subprocess.run(["dpkg", "-S", f, os.path.realpath(f)],
                                   capture_output=True, text=True)
                for l in r.stdout.splitlines():
                    if l.startswith("diversion by"):
                        continue
                    owners.update(p.strip().split(":")[0] for p in l.split(":", 1)[0].split(","))
            if not files:
                print(f"check-tools: {cmd} (package {pkg}, for {','.join(cparts)}) is not installed")
                bad += 1
            elif pkg not in owners:
                print(f"check-tools: {cmd} is {files[0]}, from {sorted(owners) or 'no package'}, "
                      f"not from {pkg} as scripts/tools.txt says")
                bad += 1
            else:
                first = shutil.which(cmd)
                if first and os.path.dirname(first) not in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
                    print(f"check-tools: note: PATH finds {first} before {pkg}'s {files[0]}")

    # 2. every command the scripts run is listed.
    seen = {}
    funcs = shell_functions([p for p in scripts() if p.endswith(".sh")])
    for path in scripts():
        rel = os.path.relpath(path, ROOT)
        if path.endswith(".sh"):
            found = shell_commands(path, funcs)
        elif path.endswith(".py"):
            found = python_commands(path)
        else:
            found = cmake_commands(path)
        for n, cmd in found:
            if cmd in tools or cmd in ours or cmd in SH_BUILTIN:
                continue
            seen.setdefault(cmd, []).append(f"{rel}:{n}")
    for cmd, where in sorted(seen.items()):
        print(f"check-tools: {cmd} is run by {', '.join(where[:3])}"
              f"{' ...' if len(where) > 3 else ''} but is not in scripts/tools.txt")
        bad += 1
    if bad:
        print(f"check-tools: {bad} problem(s); scripts/tools.txt maps each command to the "
              "package deps.sh installs")
        return 1
    print(f"check-tools: {len(tools)} commands, each from its package; the scripts run no other")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
