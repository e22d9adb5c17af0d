#!/usr/bin/env python3
"""Was `auto` the fastest? For every case of the kernel benchmarks' JSON files in a folder (what
bench/nvidia/run.sh writes): the variant `auto` ran and its median time beside the fastest
variant's, flagged where `auto` took more than --tolerance longer. The table to read before
changing a device's default in a Resolve*Variant function; it only reports, it changes nothing.

  python3 bench/nvidia/auto_check.py out/nvidia [--tolerance 0.10] [--markdown FILE]

A case is one kernel, size and parameter set; rows timed with the read-back ("+read") form cases
of their own, and CPU references and first calls ("first:") are left out. Standard library only.
"""
import argparse
import collections
import json
import os
import sys


def load_cases(directory):
    """{(kernel, size, params): {variant: median_ms}} and the renderer, from *_bench.json."""
    cases = collections.defaultdict(dict)
    renderers = set()
    names = sorted(n for n in os.listdir(directory) if n.endswith("_bench.json"))
    if not names:
        sys.exit(f"auto_check: no *_bench.json in {directory}")
    for name in names:
        with open(os.path.join(directory, name)) as f:
            data = json.load(f)
        renderers.add(data.get("renderer", "?"))
        for r in data["rows"]:
            variant, params = r["variant"], r["params"]
            if variant.startswith(("cpu", "first:")):
                continue
            if variant.endswith("+read"):
                variant, params = variant[:-len("+read")], params + " +read"
            cases[(r["kernel"], r["size"], params)][variant] = r["median_ms"]
    return cases, renderers


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--tolerance", type=float, default=0.10,
                    help="flag auto when it took more than (1 + this) times the fastest")
    ap.add_argument("--markdown", default="", help="also write the table here")
    args = ap.parse_args()
    if args.tolerance < 0:
        sys.exit("auto_check: --tolerance must be at least 0")
    cases, renderers = load_cases(args.directory)

    lines = [f"renderer: {', '.join(sorted(renderers))}; auto flagged where it took more than "
             f"{1 + args.tolerance:.2f}x the fastest variant", "",
             "| kernel | size | params | auto ran | ms | fastest | ms | auto / fastest | |",
             "|---|---|---|---|---:|---|---:|---:|---|"]
    flagged = 0
    wins = collections.Counter()
    for (kernel, size, params), times in sorted(cases.items()):
        auto = [(v, t) for v, t in times.items() if v.startswith("auto=")]
        concrete = {v: t for v, t in times.items() if not v.startswith("auto")}
        if not auto or not concrete:
            continue
        auto_variant, auto_ms = auto[0]
        best, best_ms = min(concrete.items(), key=lambda vt: vt[1])
        wins[(kernel, best)] += 1
        ratio = auto_ms / best_ms if best_ms > 0 else float("inf")
        # auto runs the same program as its pick: compare with the pick's own row as well, so a
        # case is flagged for the choice, not for the noise between two runs of one program.
        picked = auto_variant[len("auto="):]
        slow = ratio > 1 + args.tolerance and concrete.get(picked, auto_ms) > best_ms * (
            1 + args.tolerance)
        flagged += slow
        lines.append(f"| {kernel} | {size} | {params} | {picked} | {auto_ms:.3f} | {best} | "
                     f"{best_ms:.3f} | {ratio:.2f}x | {'**slower**' if slow else ''} |")
    lines += ["", f"{flagged} of {len(cases)} cases: auto slower than the fastest variant beyond "
              "the tolerance.", "Fastest variant, cases won:"]
    for (kernel, variant), n in sorted(wins.items()):
        lines.append(f"- {kernel}: {variant} {n}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
