#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/*.md points to a file that exists, and every #anchor to a
heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces to '-').
Exits 1 naming each document, line and link.
"""
import argparse
import pathlib
import re
import sys

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path):
    out = set()
    for line in path.read_text().splitlines():
        if m := re.match(r"^#+\s+(.*)$", line):
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


parser = argparse.ArgumentParser()
parser.add_argument("--root", default=".")
root = pathlib.Path(parser.parse_args().root)
docs = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
problems, count = [], 0
for doc in docs:
    in_code = False
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            count += 1
            file, _, anchor = target.partition("#")
            path = (doc.parent / file).resolve() if file else doc
            if not path.exists():
                problems.append(f"{doc.relative_to(root)}:{n}: {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                problems.append(f"{doc.relative_to(root)}:{n}: {target}: {path.name} has no heading #{anchor}")
for p in problems:
    print(p)
print(f"docs_links: {count} links in {len(docs)} documents, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
