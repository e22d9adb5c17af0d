#!/usr/bin/python3
"""Fails when the project's own headers include each other in a loop, or when a part includes a
part it may not (docs/architecture.md): gpu/ and common/ never include server/ or client/, gpu/
never includes server/, and nothing outside gpu/ and tests/ includes gpu/internal/.

    deploy/check-includes.py     prints the loops or bad includes found; exit 1 if any
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# Which top-level parts each part may include (besides itself).
ALLOWED = {
    "common": set(),
    "gpu": {"common"},
    "server": {"common", "gpu", "glimpse"},  # glimpse/: the generated proto headers
    "client": {"common", "gpu", "glimpse"},
}


def tracked_sources():
    out = subprocess.run(["git", "ls-files", "--", "*.h", "*.cc"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return [p for p in out.split() if (ROOT / p).is_file()]


def main():
    files = tracked_sources()
    headers = {p for p in files if p.endswith(".h")}
    edges = {}
    problems = []
    for path in files:
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        includes = INCLUDE.findall(text)
        part = path.split("/")[0]
        for inc in includes:
            top = inc.split("/")[0]
            if part in ALLOWED and top in set(ALLOWED) | {"glimpse"} and top != part \
                    and top not in ALLOWED[part]:
                problems.append(f"{path}: {part}/ may not include {inc}")
            if "gpu/internal/" in inc and part not in ("gpu", "tests", "bench"):
                problems.append(f"{path}: only gpu/, its tests and benchmarks include {inc}")
        if path in headers:
            edges[path] = [i for i in includes if i in headers]

    # Loops among headers: depth-first search, reporting each loop once.
    state, stack, loops = {}, [], set()

    def visit(h):
        state[h] = 1
        stack.append(h)
        for nxt in edges.get(h, []):
            if state.get(nxt) == 1:
                loop = stack[stack.index(nxt):] + [nxt]
                loops.add(" -> ".join(loop))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[h] = 2

    sys.setrecursionlimit(10000)
    for h in sorted(edges):
        if h not in state:
            visit(h)
    problems += [f"include loop: {loop}" for loop in sorted(loops)]
    for p in problems:
        print(f"check-includes: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-includes: {len(files)} files, {len(headers)} headers, no include loops, "
          "parts include only what they may")
    return 0


if __name__ == "__main__":
    sys.exit(main())
