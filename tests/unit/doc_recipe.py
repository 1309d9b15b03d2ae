#!/usr/bin/env python3
"""tests/unit/doc_recipe.py: docs/writing-a-backend.md's recipe is the tree's own wiring.

Every ```meson and ```c block of the sections "Registering the backend" and "Meson wiring"
must appear, line for line (indentation of the block removed), in one of the files that a
backend's wiring touches. The build of the tree is what proves that this wiring links; this
test proves that the document shows that wiring and nothing else. Blocks fenced without a
language are sketches and are not checked. Run from the source root.
"""
import re
import sys

DOC = "docs/writing-a-backend.md"
SECTIONS = ("## Registering the backend", "## Meson wiring")
FILES = ("backends/ivshmem/meson.build", "backends/meson.build", "backends/registry.c")


def section(text, title):
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else len(text)]


def blocks(text):
    """(language, lines) of every fenced block, the fence's indentation removed."""
    out = []
    for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```", text, re.S | re.M):
        indent, lang, body = len(m.group(1)), m.group(2), m.group(3)
        out.append((lang, [line[indent:] for line in body.splitlines()]))
    return out


def main():
    doc = open(DOC).read()
    files = {f: open(f).read().splitlines() for f in FILES}
    checked, bad = 0, []
    for title in SECTIONS:
        for lang, lines in blocks(section(doc, title)):
            if lang not in ("meson", "c"):
                continue
            checked += 1
            where = [f for f, fl in files.items()
                     if any(fl[i:i + len(lines)] == lines for i in range(len(fl)))]
            if not where:
                bad.append("%s (%s block):\n  %s" % (title, lang, "\n  ".join(lines)))
    if checked < 4:
        print("doc_recipe: only %d recipe blocks found in %s" % (checked, DOC))
        return 1
    for b in bad:
        print("doc_recipe: not in %s, line for line: %s" % (", ".join(FILES), b))
    print("doc_recipe: %d blocks checked, %d missing" % (checked, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
