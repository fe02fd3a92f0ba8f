#!/usr/bin/env python3
"""Checks that every code snippet in README.md and docs/*.md is taken from a file that CI compiles.

Two forms are accepted:
  * A marked snippet: an HTML comment naming a file and a region, right before a fenced block,
        <!-- snippet: examples/quickstart/main.cpp#task -->
        ```cpp
        ...
        ```
    The block must equal the lines between `[snippet:task]` and `[/snippet:task]` in that file (the marker
    lines themselves excluded, common indentation removed). `--update` rewrites such blocks from the sources.
  * An unmarked C++ or CMake block (```cpp, ```c++, ```cmake): its lines must appear, in order and
    consecutively (leading and trailing blanks ignored), in some file under include/, examples/, tests/,
    bench/, cmake/ or ports/, or in CMakeLists.txt or conanfile.py.
Shell, text and other blocks are not checked: they are commands and output, not code.
Exits 1 naming each doc, line and problem.
"""
import argparse
import pathlib
import re
import sys
import textwrap

MARK = re.compile(r"^<!--\s*snippet:\s*(?P<file>[^#\s]+)#(?P<name>[\w.-]+)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
CHECKED_LANGS = {"cpp", "c++", "cxx", "cmake"}
SOURCE_DIRS = ("include", "examples", "tests", "bench", "cmake", "ports", "test_package")
SOURCE_FILES = ("CMakeLists.txt", "conanfile.py")
SOURCE_SUFFIXES = {".hpp", ".cpp", ".h", ".txt", ".cmake", ".py", ".in", ".json"}


def region(root, rel, name):
    path = root / rel
    if not path.is_file():
        return None, f"{rel} does not exist"
    lines = path.read_text().splitlines()
    begin = [i for i, l in enumerate(lines) if f"[snippet:{name}]" in l]
    end = [i for i, l in enumerate(lines) if f"[/snippet:{name}]" in l]
    if len(begin) != 1 or len(end) != 1 or end[0] <= begin[0]:
        return None, f"{rel} has no single region [snippet:{name}] ... [/snippet:{name}]"
    body = [l for l in lines[begin[0] + 1:end[0]] if "[snippet:" not in l and "[/snippet:" not in l]
    return textwrap.dedent("\n".join(body)).strip("\n"), None


def blocks(text):
    """Yields (line number of the fence, marker match or None, language, body, start, end) per fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = MARK.match(lines[k].strip()) if k >= 0 else None
        body = textwrap.dedent("\n".join(lines[i + 1:j])).strip("\n")
        yield i + 1, marker, m.group("lang").lower(), body, i, j
        i = j + 1


def source_texts(root):
    files = [root / f for f in SOURCE_FILES if (root / f).is_file()]
    for d in SOURCE_DIRS:
        if (root / d).is_dir():
            files += [p for p in (root / d).rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES
                      and "build" not in p.relative_to(root).parts]
    return [[l.strip() for l in p.read_text(errors="replace").splitlines()] for p in files]


def appears(body, sources):
    want = [l.strip() for l in body.splitlines()]
    if not want:
        return True
    for src in sources:
        for s in range(len(src) - len(want) + 1):
            if src[s] == want[0] and src[s:s + len(want)] == want:
                return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    ap.add_argument("--update", action="store_true", help="rewrite marked snippets from their sources")
    args = ap.parse_args()
    root = args.root.resolve()
    docs = sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []
    if (root / "README.md").is_file():
        docs.insert(0, root / "README.md")
    sources = None
    problems, marked, unmarked = [], 0, 0
    for doc in docs:
        rel_doc = doc.relative_to(root)
        text = doc.read_text()
        lines = text.splitlines()
        replacements = []
        for lineno, marker, lang, body, start, end in blocks(text):
            if marker:
                marked += 1
                want, err = region(root, marker.group("file"), marker.group("name"))
                if err:
                    problems.append(f"{rel_doc}:{lineno}: {err}")
                elif body != want:
                    if args.update:
                        replacements.append((start, end, want))
                    else:
                        problems.append(f"{rel_doc}:{lineno}: the snippet differs from {marker.group('file')}"
                                        f"#{marker.group('name')}; run tests/docs_snippets.py --update")
            elif lang in CHECKED_LANGS:
                unmarked += 1
                if sources is None:
                    sources = source_texts(root)
                if not appears(body, sources):
                    problems.append(f"{rel_doc}:{lineno}: a ```{lang} block that no compiled file contains; quote "
                                    "a region of a compiled example or test with <!-- snippet: FILE#NAME -->")
        if replacements:
            for start, end, want in reversed(replacements):
                indent = FENCE.match(lines[start]).group("indent")
                lines[start + 1:end] = [indent + l if l else l for l in want.splitlines()]
            doc.write_text("\n".join(lines) + "\n")
            print(f"docs_snippets: updated {len(replacements)} snippet(s) in {rel_doc}")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"docs_snippets: {len(docs)} documents, {marked} marked and {unmarked} unmarked code snippets checked, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
