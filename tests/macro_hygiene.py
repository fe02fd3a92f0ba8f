#!/usr/bin/env python3
"""No POLICYTRAIN_DETAIL_ macro leaks into a user's file: every detail macro a header defines is undefined at the
end of that header (core/hooks.hpp's hook-name lists and signatures, the static_assert generators).

Preprocesses (`<cxx> -E -dM`) one translation unit that includes every header under include/policytrain (the umbrella
policytrain.hpp, the other public headers and each fine-grained one), twice: header-only, and with
<policytrain/src.hpp> first (separate compilation's one defining file, whose POLICYTRAIN_DEFINE branches differ).
Exits 1 naming each macro still defined and the header that defines it.
Usage: macro_hygiene.py <project root> [--cxx g++]
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("root")
ap.add_argument("--cxx", default="g++")
a = ap.parse_args()
root = pathlib.Path(a.root)
inc = root / "include"

import torch  # noqa: E402  (only for its include directories)

tdir = pathlib.Path(torch.__file__).parent
flags = ["-std=gnu++20", "-DFMT_HEADER_ONLY=1", "-DUSE_C10D_GLOO", "-DUSE_DISTRIBUTED", f"-I{inc}",
         "-isystem", str(tdir / "include"), "-isystem", str(tdir / "include" / "torch" / "csrc" / "api" / "include")]
headers = sorted(str(h.relative_to(inc)) for h in (inc / "policytrain").rglob("*.hpp"))
headers.remove("policytrain/src.hpp")
umbrella = "policytrain/policytrain.hpp"
assert umbrella in headers, umbrella
ordered = [umbrella] + [h for h in headers if h != umbrella]
definers = {}
for h in headers:
    for m in re.finditer(r"^\s*#\s*define\s+(POLICYTRAIN_DETAIL_\w+)", (inc / h).read_text(), re.M):
        definers.setdefault(m.group(1), []).append(h)

bad = []
with tempfile.TemporaryDirectory() as tmp:
    for mode, first in (("header-only", []), ("separate compilation's src.hpp", ["policytrain/src.hpp"])):
        tu = pathlib.Path(tmp) / "all_headers.cpp"
        tu.write_text("".join(f"#include <{h}>\n" for h in first + ordered))
        r = subprocess.run([a.cxx, *flags, "-E", "-dM", str(tu)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"macro_hygiene.py: preprocessing every header ({mode}) failed:\n{r.stderr[-4000:]}", file=sys.stderr)
            sys.exit(1)
        leaked = sorted(set(re.findall(r"^#define (POLICYTRAIN_DETAIL_\w+)", r.stdout, re.M)))
        for name in leaked:
            bad.append(f"{name} ({mode}): defined in {', '.join(definers.get(name, ['?']))}; #undef it at the end "
                       "of that header")
if bad:
    print("detail macros leak into every file that includes policytrain:", file=sys.stderr)
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"macro_hygiene.py: {len(headers)} headers, {len(definers)} detail macros defined, none left defined")
