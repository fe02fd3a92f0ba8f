#!/usr/bin/env python3
"""The compile-fail tests, compiled together (tests/CMakeLists.txt).

Every file in tests/compile_fail must fail to compile with the message its first line names
("// expect: <regular expression>"). Compiling each alone cost one LibTorch translation unit per file (about 30 s
each on 2 cores, run one after another); here they are one generated translation unit, each file inside a namespace
of its own (cf_<name>), compiled once with -fsyntax-only. GCC and Clang go on after an error, so every file's
diagnostics are in the one log; each diagnostic is given to the file its context names (the "required from here"
line, or the error's own location), and each file's expectation must match the diagnostics given to it. One thing
differs from compiling each alone: an instantiation happens once per unit, so two files that reach the same
static_assert through the same template arguments see one error between them; each file uses types of its own
(tests/compile_fail/unstacked_examples.cpp's task), and a file without an error of its own fails here.

  check.py build --log LOG -- <build command>   runs the build, which must fail, and keeps its output in LOG
  check.py case --log LOG --source FILE         checks FILE's expectation against its diagnostics in LOG
"""
import argparse
import os
import re
import subprocess
import sys


def expectation(source):
    with open(source, encoding="utf-8") as f:
        first = f.readline()
    if not first.startswith("// expect: "):
        sys.exit(f"check.py: {source}: its first line must be '// expect: <regular expression>', not {first!r}")
    return first[len("// expect: "):].rstrip("\n")


# A line that starts a new diagnostic: a context header ("In file included from", "x.hpp: In instantiation of",
# "In member function", "At global scope", ...) or an error that follows a note or another error directly.
CONTEXT = re.compile(r"^(In file included from |[^ ].*: (In |At global scope|In instantiation)|[^ ].*: In )")
ERROR = re.compile(r": (fatal )?error: ")
NOTE = re.compile(r": note: ")


def diagnostics(lines):
    """Splits compiler output into diagnostics: each is its context lines, its error, and the notes after it."""
    out, cur, seen_error = [], [], False
    for line in lines:
        starts = False
        if CONTEXT.match(line) and seen_error:
            starts = True
        elif ERROR.search(line) and seen_error and not line.startswith(" "):
            starts = True
        if starts:
            out.append(cur)
            cur, seen_error = [], False
        cur.append(line)
        if ERROR.search(line):
            seen_error = True
    if cur:
        out.append(cur)
    return [d for d in out if any(ERROR.search(l) for l in d)]


def owner(diag, sources):
    """The compile-fail file a diagnostic belongs to: the last one its lines name before its error (the innermost
    "required from here" or the error's own location), else the first named anywhere in it."""
    named = None
    for line in diag:
        for name, path in sources.items():
            if path + ":" in line:
                named = name
        if ERROR.search(line) and named:
            return named
    for line in diag:
        for name, path in sources.items():
            if path + ":" in line:
                return name
    return None


def main():
    argv = sys.argv[1:]
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "case"])
    ap.add_argument("--log", required=True)
    ap.add_argument("--source")
    a = ap.parse_args(argv)
    if a.mode == "build":
        if not cmd:
            sys.exit("check.py build: give the build command after --")
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(a.log, "w", encoding="utf-8") as f:
            f.write(r.stdout)
        errors = sum(1 for l in r.stdout.splitlines() if ERROR.search(l))
        if r.returncode == 0:
            print(r.stdout[-4000:])
            sys.exit("check.py: the compile-fail cases compiled: every file in tests/compile_fail must fail")
        print(f"check.py: the compile-fail cases failed to compile as expected ({errors} error lines, log {a.log})")
        return
    with open(a.log, encoding="utf-8") as f:
        text = f.read()
    src_dir = os.path.dirname(os.path.abspath(a.source))
    sources = {}
    for fn in sorted(os.listdir(src_dir)):
        if fn.endswith(".cpp"):
            sources[fn[:-4]] = os.path.join(src_dir, fn)
    name = os.path.basename(a.source)[:-4]
    mine = [d for d in diagnostics(text.splitlines()) if owner(d, sources) == name]
    # The namespaces are the batch's, not the file's: a message names `Tally`, not `cf_<name>::Tally`.
    body = re.sub(r"\bcf_(" + "|".join(map(re.escape, sources)) + r")::", "", "\n".join("\n".join(d) for d in mine))
    expect = expectation(a.source)
    if not mine:
        print(text[-3000:])
        sys.exit(f"check.py: {name}: no error names tests/compile_fail/{name}.cpp: it compiled (expected: {expect})")
    if not re.search(expect, body, re.DOTALL):
        print(body[-6000:])
        sys.exit(f"check.py: {name}: its errors (above) do not match its expectation: {expect}")
    print(f"check.py: {name}: fails to compile as expected ({len(mine)} diagnostic(s))")


if __name__ == "__main__":
    main()
