#!/usr/bin/env python3
"""Fails when a doctest TEST_CASE name holds a semicolon.

doctest_discover_tests passes each name through a CMake list, which splits it at ';': such a case becomes two
CTest tests whose filters match no test case, and both pass without running anything. (Commas are escaped by
doctest's CMake script and are fine.) Exits 1 naming each file, line and name.
"""
import pathlib, re, sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
# TEST_CASE("a" "b" ...) possibly over several lines: the adjacent string literals after TEST_CASE(.
case = re.compile(r'TEST_CASE(?:_TEMPLATE)?\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)
bad = []
for f in sorted(root.glob("tests/**/*.cpp")):
    text = f.read_text()
    for m in case.finditer(text):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        if ";" in name:
            bad.append(f"{f.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}: {name!r}")
for b in bad:
    print(f"test name with ';' (CTest would run nothing for it; use ',' instead): {b}")
print(f"{len(bad)} bad test names")
sys.exit(1 if bad else 0)
