#!/usr/bin/python3
"""Fails when the project's own headers include each other in a loop, or when a part includes a
part it may not (docs/architecture.md): gpu/ and common/ never include server/ or client/, gpu/
never includes server/, and nothing outside gpu/ and tests/ includes gpu/internal/.

With --compile, fails instead when a source file misses an #include that a unity build hides: a
unity build compiles each target's files in batches, where one file may use a header that only an
earlier file of its batch includes; compiled alone (as a build file by file, CMake's default,
compiles it), that file fails.

    deploy/check-includes.py     prints the loops or bad includes found; exit 1 if any
    deploy/check-includes.py --compile BUILD [--since REV]
                                 compiles alone, syntax only and with its batch's flags, each
                                 source file of BUILD's unity batches that differs from REV, or
                                 that includes (through the project's headers) a header that
                                 does; every one without --since. Exit 1 if any fails
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

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


UNITY_SOURCE = re.compile(r"/Unity/unity_\d+_(c|cxx)\.(c|cxx)$")
UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"$', re.M)


def resolve(include, including):
    """The tracked file an #include "..." of `including` names: from the root, else beside it."""
    for candidate in (ROOT / include, (ROOT / including).parent / include):
        candidate = candidate.resolve()
        if candidate.is_file() and candidate.is_relative_to(ROOT):
            return candidate.relative_to(ROOT).as_posix()
    return None


def closure(path, cache):
    """The project's headers `path` includes, directly or through other headers."""
    if path in cache:
        return cache[path]
    cache[path] = set()  # a loop (reported by the rules check) ends here
    found = set()
    text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
    for inc in INCLUDE.findall(text):
        rel = resolve(inc, path)
        if rel is not None and rel not in found:
            found.add(rel)
            found |= closure(rel, cache)
    cache[path] = found
    return found


def alone_command(entry, source):
    """`entry`'s compile command (a unity batch) for `source` alone, syntax only."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and a != entry["file"] and not a.endswith(entry["file"]):
            out.append(a)
    return out + ["-fsyntax-only", str(ROOT / source)]


def untracked_sources():
    """New files not yet added (and not ignored): a change in progress."""
    out = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "--", "*.h", "*.cc"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return out.split()


def compile_alone(build, since):
    commands = json.loads((pathlib.Path(build) / "compile_commands.json").read_text())
    new = set(untracked_sources())
    tracked = set(tracked_sources()) | new
    batch_of = {}  # source (relative to ROOT) -> its unity batch's compile command
    for entry in commands:
        if not UNITY_SOURCE.search(entry["file"]):
            continue
        text = pathlib.Path(entry["directory"], entry["file"]).read_text()
        for inc in UNITY_INCLUDE.findall(text):
            p = pathlib.Path(inc).resolve()
            if p.is_relative_to(ROOT) and p.relative_to(ROOT).as_posix() in tracked:
                batch_of[p.relative_to(ROOT).as_posix()] = entry
    if not batch_of:
        print(f"check-includes: {build}/compile_commands.json lists no unity batch "
              "(configure with -DCMAKE_UNITY_BUILD=ON)", file=sys.stderr)
        return 1
    if since is None:
        chosen = sorted(batch_of)
    else:
        diff = subprocess.run(["git", "diff", "--name-only", since, "--"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.split()
        changed = set(diff) | new
        cache = {}
        chosen = sorted(s for s in batch_of if s in changed or closure(s, cache) & changed)
    t0 = time.monotonic()

    def run(source):
        entry = batch_of[source]
        r = subprocess.run(alone_command(entry, source), cwd=entry["directory"],
                           capture_output=True, text=True)
        return source, r.returncode, r.stderr

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for source, code, err in pool.map(run, chosen):
            if code != 0:
                failed.append(source)
                print(f"check-includes: {source} does not compile alone:\n{err}", file=sys.stderr)
    what = "every source file of the unity batches" if since is None else \
        f"the source files that differ from {since[:12]} or include a header that does"
    if failed:
        print(f"check-includes: {len(failed)} of {len(chosen)} files fail alone ({what}): "
              f"{', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"check-includes: {len(chosen)} of {len(batch_of)} files compiled alone in "
          f"{time.monotonic() - t0:.0f} s ({what}): each includes what it uses")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile", metavar="BUILD",
                        help="compile alone the files of BUILD's unity batches (see above)")
    parser.add_argument("--since", metavar="REV",
                        help="with --compile: only the files that differ from REV, or include "
                             "a header that does")
    args = parser.parse_args()
    if args.since and not args.compile:
        parser.error("--since goes with --compile")
    if args.compile:
        return compile_alone(args.compile, args.since)
    return check_rules()


def check_rules():
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
