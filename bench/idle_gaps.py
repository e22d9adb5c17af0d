#!/usr/bin/env python3
"""Calls after idle gaps: the latency of a call sent some time after the previous answer, as a
client that calls now and then sees it, for one or more server binaries in the same run.

For each binary (a fresh server each, warmed up), then for each gap in --gaps: --calls calls,
each sent `gap` seconds after the previous one returned; then --random calls after gaps drawn
uniformly from [0.5, 3] s (seeded). Prints per binary and gap the median and slowest call in
ms, and how many calls took over --slow-ms. The call is an integral image of a 640x480 grey
array sent inline, through glimpse.Client.

  LP_NUM_THREADS=2 bench/idle_gaps.py --server-binary build/server/glimpse-server \\
      [--server-binary OTHER ...] [--gaps 0,0.5,0.9,1.0,1.1,2.0] [--calls 5] [--random 40]
"""
import argparse
import os
import pathlib
import random
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from server_process import ServerProcess  # noqa: E402

import glimpse  # noqa: E402


def run(binary, gaps, calls, random_calls, slow_ms, seed):
    image = np.random.default_rng(seed).integers(0, 256, size=(480, 640, 1), dtype=np.uint8)
    server = ServerProcess("glimpse", [binary, "--listen=127.0.0.1:0", "--log-level=info"])
    rows = []
    try:
        with glimpse.Client(server.address) as client:
            for _ in range(10):  # warm calls
                client.integral_image(image)
            draw = random.Random(seed)
            plan = [(f"{g:g} s", [g] * calls) for g in gaps]
            plan.append(("random 0.5-3 s", [draw.uniform(0.5, 3.0) for _ in range(random_calls)]))
            for name, waits in plan:
                if not waits:
                    continue
                ms = []
                for wait in waits:
                    time.sleep(wait)
                    t = time.perf_counter()
                    client.integral_image(image)
                    ms.append((time.perf_counter() - t) * 1e3)
                rows.append((name, len(ms), statistics.median(ms), max(ms),
                             sum(m > slow_ms for m in ms)))
    finally:
        server.stop()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server-binary", action="append", required=True)
    ap.add_argument("--gaps", default="0,0.5,0.9,1.0,1.1,2.0")
    ap.add_argument("--calls", type=int, default=5, help="calls per fixed gap (default 5)")
    ap.add_argument("--random", type=int, default=40, help="calls after random gaps (default 40)")
    ap.add_argument("--slow-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    try:
        gaps = [float(g) for g in args.gaps.split(",") if g]
        if any(g < 0 or g > 60 for g in gaps):
            raise ValueError
    except ValueError:
        ap.error(f"--gaps takes seconds in [0, 60], comma-separated, got {args.gaps!r}")
    if args.calls < 1 or args.random < 0:
        ap.error("--calls must be at least 1 and --random at least 0")
    print(f"LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs, "
          f"seed {args.seed}")
    print(f"| binary | gap | calls | median ms | slowest ms | calls over {args.slow_ms:g} ms |")
    print("|---|---|---:|---:|---:|---:|")
    for binary in args.server_binary:
        for name, n, med, worst, slow in run(binary, gaps, args.calls, args.random,
                                             args.slow_ms, args.seed):
            print(f"| {binary} | {name} | {n} | {med:.1f} | {worst:.1f} | {slow} |", flush=True)


if __name__ == "__main__":
    main()
