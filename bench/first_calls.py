#!/usr/bin/env python3
"""First calls after a start, as a client sees them: each analysis's first call on an image of a
size the server has not seen, against the warm calls after it, through gRPC.

Per start: a fresh glimpse-server (its start-up warm-up included, as deployed) with a new, empty
Mesa shader cache directory (a new pod, a fresh CI job) or the cache disabled (--cache disabled);
then, for each shape and analysis in turn, one first call and --runs warm calls with the same
request, timed in this process with glimpse.Client (raw arrays inline, answers read into numpy).
Prints a Markdown table: first call ms, the warm calls' median and slowest, first / median.

Run from the repository root with the client importable (bench/e2e.sh sets that up):
  LP_NUM_THREADS=2 bench/first_calls.py --server-binary build/server/glimpse-server \\
      [--starts 3] [--runs 20] [--shapes 640x480x1,640x480x3] [--cache empty|disabled] [--seed N]
      [--new-connections N]
"""
import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from server_process import ServerProcess  # noqa: E402

import glimpse  # noqa: E402

# (name, the call) for every analysis, in the order they run after a start.
ANALYSES = [
    ("histogram", lambda c, img: c.histogram(img)),
    ("integral image", lambda c, img: c.integral_image(img)),
    ("compaction (channel 0 >= 128)", lambda c, img: c.compaction(img, lo=128, hi=255)),
    ("box filter r = 3", lambda c, img: c.box_filter(img, rx=3)),
]


def parse_shapes(text):
    shapes = []
    for part in text.split(","):
        w, h, c = (int(v) for v in part.lower().split("x"))
        if not (1 <= w <= 16384 and 1 <= h <= 16384 and 1 <= c <= 4):
            raise ValueError(part)
        shapes.append((w, h, c))
    return shapes


def one_start(args, shapes, rng, cache_dir):
    env = dict(os.environ)
    if args.cache == "disabled":
        env["MESA_SHADER_CACHE_DISABLE"] = "true"
    else:
        env["MESA_SHADER_CACHE_DIR"] = cache_dir
    t0 = time.monotonic()
    server = ServerProcess("glimpse", [args.server_binary, "--listen=127.0.0.1:0",
                                       "--log-level=info"], env=env)
    rows = []
    try:
        with glimpse.Client(server.address, timeout=600) as client:
            client.health()
            started = time.monotonic() - t0
            for w, h, c in shapes:
                image = rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)
                for name, call in ANALYSES:
                    t = time.perf_counter()
                    call(client, image)
                    first = (time.perf_counter() - t) * 1e3
                    warm = []
                    for _ in range(args.runs):
                        t = time.perf_counter()
                        call(client, image)
                        warm.append((time.perf_counter() - t) * 1e3)
                    rows.append(dict(shape=f"{w}x{h}x{c}", analysis=name, first=first,
                                     median=statistics.median(warm), slowest=max(warm)))
            # The same server, now warm, through new connections: each client's own (a local
            # subchannel pool; channels with equal arguments otherwise share one connection).
            # Each analysis's first call on the connection, on the last shape, against that
            # shape's warm median above.
            medians = {r["analysis"]: r["median"] for r in rows[-len(ANALYSES):]}
            for k in range(args.new_connections):
                with glimpse.Client(server.address, timeout=600,
                                    options=[("grpc.use_local_subchannel_pool", 1)]) as fresh:
                    fresh.health()
                    for name, call in ANALYSES:
                        t = time.perf_counter()
                        call(fresh, image)
                        first = (time.perf_counter() - t) * 1e3
                        rows.append(dict(shape=f"{w}x{h}x{c}, new connection {k + 1}",
                                         analysis=name, first=first, median=medians[name],
                                         slowest=None))
    finally:
        server.stop()
    return started, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server-binary", required=True)
    ap.add_argument("--starts", type=int, default=3, help="fresh servers (default %(default)s)")
    ap.add_argument("--runs", type=int, default=20,
                    help="warm calls after each first call (default %(default)s)")
    ap.add_argument("--shapes", default="640x480x1,640x480x3",
                    help="WxHxC images, in order (default %(default)s)")
    ap.add_argument("--cache", choices=("empty", "disabled"), default="empty",
                    help="each start's Mesa shader cache: a new empty directory (default) or "
                         "disabled")
    ap.add_argument("--seed", type=int, default=None, help="image seed (default: random)")
    ap.add_argument("--new-connections", type=int, default=0,
                    help="then, per start, this many new connections to the warm server, each "
                         "one's first call of every analysis on the last shape (default "
                         "%(default)s)")
    args = ap.parse_args()
    if args.starts < 1 or args.runs < 1 or args.new_connections < 0:
        ap.error(f"--starts and --runs must be at least 1 and --new-connections at least 0, got "
                 f"{args.starts}, {args.runs}, {args.new_connections}")
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        ap.error(f"--shapes takes WxHxC,... (1-16384 x 1-16384 x 1-4), got {e}")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    print(f"images: seed {seed}; LP_NUM_THREADS={os.environ.get('LP_NUM_THREADS', 'unset')}; "
          f"{os.cpu_count()} CPUs; cache {args.cache}", flush=True)
    starts = []
    for i in range(args.starts):
        with tempfile.TemporaryDirectory(prefix="glimpse-first-calls-cache-") as cache_dir:
            started, rows = one_start(args, shapes, rng, cache_dir)
        print(f"start {i + 1}: serving after {started:.1f} s", flush=True)
        starts.append(rows)
    head = "| shape | analysis | " + " | ".join(
        f"start {i + 1}: first / median / slowest warm ms, first / median"
        for i in range(len(starts))) + " |"
    print()
    print(head)
    print("|---|---|" + "---|" * len(starts))
    for k, r0 in enumerate(starts[0]):
        cells = []
        for rows in starts:
            r = rows[k]
            slowest = "-" if r["slowest"] is None else f"{r['slowest']:.2f}"
            cells.append(f"{r['first']:.2f} / {r['median']:.2f} / {slowest}, "
                         f"**{r['first'] / r['median']:.2f}x**")
        print(f"| {r0['shape']} | {r0['analysis']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
