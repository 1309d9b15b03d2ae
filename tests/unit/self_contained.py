#!/usr/bin/env python3
"""self_contained.py SRC: the repository refers to nothing outside itself (docs/README.md).

Every text file of the source tree (docs, comments, headers, scripts, build files; not .git
nor build directories) is searched for references to material that is not in the
repository: a folder of engineers' notes, their numbered source documents, design, style or
spec files kept elsewhere, absolute paths of a development machine. And every relative link
of README.md and docs/*.md, and every docs/NAME.md a file names, must exist in the tree.
Each finding is printed as FILE:LINE: what, and fails the test.
"""
import os
import re
import sys

src = os.path.abspath(sys.argv[1])
me = os.path.abspath(__file__)

# Built by concatenation, so that this file does not match itself.
S = "sha" + "red"
FORBIDDEN = [
    (re.compile(r"\b" + S + r"/"), "a folder outside the repository ('" + S + "/')"),
    (re.compile(r"\bsee" + r"ds\b"), "the engineers' source documents ('see" + "ds')"),
    (re.compile(r"\bsee" + r"d [0-9]{3}\b"), "a numbered source document ('see" + "d NNN')"),
    (re.compile(r"\b(DESIGN|STYLE)\.md\b"), "a design or style file kept elsewhere"),
    (re.compile(r"(?<![\w/.-])spec/[\w.-]+\.md"), "a spec file kept elsewhere"),
    (re.compile(r"/wo" + r"rk/"), "a path of a development machine"),
]
SKIP_DIRS = {".git", "__pycache__"}


def skipped_dir(path, name):
    if name in SKIP_DIRS:
        return True
    # meson build directories (build/, build-asan/, ...) and any other configured one
    return os.path.exists(os.path.join(path, name, "meson-private"))


def text_files():
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not skipped_dir(root, d))
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.abspath(p) == me or os.path.islink(p) or f in SKIP_DIRS:
                continue
            try:
                with open(p, "rb") as fh:
                    data = fh.read(1 << 20)
            except OSError:
                continue
            if b"\0" in data:
                continue  # binary
            yield p, data.decode("utf-8", "replace")


bad = []
docs_named = re.compile(r"(?<![\w/.-])docs/([a-z0-9][a-z0-9-]*\.md)")
link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
nfiles = 0
for p, text in text_files():
    nfiles += 1
    rel = os.path.relpath(p, src)
    for n, line in enumerate(text.splitlines(), 1):
        for rx, what in FORBIDDEN:
            if rx.search(line):
                bad.append(f"{rel}:{n}: refers to {what}: {line.strip()[:120]}")
        for m in docs_named.finditer(line):
            if not os.path.exists(os.path.join(src, "docs", m.group(1))):
                bad.append(f"{rel}:{n}: names docs/{m.group(1)}, which does not exist")
        if rel == "README.md" or (rel.startswith("docs" + os.sep) and rel.endswith(".md")):
            for m in link.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue  # a URL
                if not os.path.exists(os.path.join(os.path.dirname(p), target)):
                    bad.append(f"{rel}:{n}: links to {target}, which does not exist")

if nfiles < 100:
    bad.append(f"only {nfiles} text files found under {src}: is it the source tree?")
for b in bad:
    print(b)
print(f"{nfiles} files searched; {len(bad)} finding(s)")
print("1 passed, 0 failed" if not bad else "0 passed, 1 failed")
sys.exit(1 if bad else 0)
