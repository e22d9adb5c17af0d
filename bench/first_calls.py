#!/usr/bin/env python3
"""First calls after a start, as a client sees them: each analysis's first call on an image of a
size the server has not seen, against the warm calls after it, through gRPC.

Per start: a fresh glimpse-server (its start-up warm-up included, as deployed) with a new, empty
Mesa shader cache directory (a new pod, a fresh CI job) or the cache disabled (--cache disabled);
then, for each shape and analysis in turn, one first call and --runs warm calls with the same
request, timed in this process with glimpse.Client (raw arrays inline, answers read into numpy).
Prints a Markdown table: first call ms, the warm calls' median and slowest, first / median, and
in brackets the server's own time (Timing.server_ns) of the first call and the warm calls' median.

Run from the repository root with the client importable (bench/e2e.sh sets that up):
  LP_NUM_THREADS=2 bench/first_calls.py --server-binary build/server/glimpse-server \\
      [--starts 3] [--runs 20] [--shapes 640x480x1,640x480x3] [--cache empty|disabled] [--seed N]
      [--new-connections N] [--client-processes N]

--client-processes N: then, per start, N fresh client processes (Python started anew, each its
own connection) against the warm server, each timing its first call of every analysis on the
last shape and the server's own time of it (Timing.server_ns), against ten warm calls after it:
what a new client pays, apart from what a new server does. Each is followed by a fresh process
that makes the histogram call through grpcio's generated stub alone (no glimpse.Client).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
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


def first_and_warm(analysis, call):
    """`call` (which returns the server's ms) once and ten times more, timed: its row."""
    walls, servers = [], []
    for _ in range(11):
        t = time.perf_counter()
        servers.append(call())
        walls.append((time.perf_counter() - t) * 1e3)
    return dict(analysis=analysis, first=walls[0], median=statistics.median(walls[1:]),
                server_first=servers[0], server_median=statistics.median(servers[1:]))


def client_process(address, shape, seed):
    """One fresh client's first and warm calls of every analysis (run in a child process)."""
    w, h, c = shape
    image = np.random.default_rng(seed).integers(0, 256, size=(h, w, c), dtype=np.uint8)
    with glimpse.Client(address, timeout=600) as client:
        client.health()
        return [first_and_warm(name, lambda: call(client, image).timing.server_ms)
                for name, call in ANALYSES]


def raw_client_process(address, shape, seed):
    """The same for the histogram alone through grpcio's generated stub, no glimpse.Client: what
    grpcio itself pays on a new process's first call (run in a child process)."""
    import grpc
    from glimpse.v1 import image_analytics_pb2 as pb
    from glimpse.v1 import image_analytics_pb2_grpc as pb_grpc
    w, h, c = shape
    image = np.random.default_rng(seed).integers(0, 256, size=(h, w, c), dtype=np.uint8)
    request = pb.HistogramRequest(image=pb.ImageRef(raw=pb.RawImage(
        layout=pb.ImageLayout(width=w, height=h, channels=c, format=pb.SAMPLE_FORMAT_UINT8),
        data=image.tobytes())))
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ImageAnalyticsStub(channel)
        stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=600)
        return [first_and_warm("histogram (grpcio stub alone)",
                               lambda: stub.Histogram(request, timeout=600).timing.server_ns
                               * 1e-6)]


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
                    server_first = call(client, image).timing.server_ms
                    first = (time.perf_counter() - t) * 1e3
                    warm, server_warm = [], []
                    for _ in range(args.runs):
                        t = time.perf_counter()
                        server_warm.append(call(client, image).timing.server_ms)
                        warm.append((time.perf_counter() - t) * 1e3)
                    rows.append(dict(shape=f"{w}x{h}x{c}", analysis=name, first=first,
                                     median=statistics.median(warm), slowest=max(warm),
                                     server=(server_first, statistics.median(server_warm))))
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
            w, h, c = shapes[-1]
            for k in range(args.client_processes):
                child = [
                    subprocess.run([sys.executable, __file__, mode, server.address,
                                    f"{w}x{h}x{c}", str(int(rng.integers(1 << 31)))],
                                   check=True, capture_output=True, text=True)
                    for mode in ("--client-process", "--raw-client-process")]
                for r in json.loads(child[0].stdout) + json.loads(child[1].stdout):
                    rows.append(dict(shape=f"{w}x{h}x{c}, client process {k + 1}",
                                     analysis=r["analysis"], first=r["first"],
                                     median=r["median"], slowest=None,
                                     server=(r["server_first"], r["server_median"])))
    finally:
        server.stop()
    return started, rows


def main():
    if len(sys.argv) == 5 and sys.argv[1] in ("--client-process", "--raw-client-process"):
        child = client_process if sys.argv[1] == "--client-process" else raw_client_process
        print(json.dumps(child(sys.argv[2], parse_shapes(sys.argv[3])[0], int(sys.argv[4]))))
        return
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
    ap.add_argument("--client-processes", type=int, default=0,
                    help="then, per start, this many fresh client processes, each one's first "
                         "call of every analysis on the last shape against its ten warm calls "
                         "(default %(default)s)")
    args = ap.parse_args()
    if args.starts < 1 or args.runs < 1 or args.new_connections < 0 or args.client_processes < 0:
        ap.error(f"--starts and --runs must be at least 1, --new-connections and "
                 f"--client-processes at least 0, got {args.starts}, {args.runs}, "
                 f"{args.new_connections}, {args.client_processes}")
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
        f"start {i + 1}: first / median / slowest warm ms, first / median "
        f"(server: first / median ms)"
        for i in range(len(starts))) + " |"
    print()
    print(head)
    print("|---|---|" + "---|" * len(starts))
    for k, r0 in enumerate(starts[0]):
        cells = []
        for rows in starts:
            r = rows[k]
            slowest = "-" if r["slowest"] is None else f"{r['slowest']:.2f}"
            server = ("" if "server" not in r else
                      f" (server {r['server'][0]:.2f} / {r['server'][1]:.2f})")
            cells.append(f"{r['first']:.2f} / {r['median']:.2f} / {slowest}, "
                         f"**{r['first'] / r['median']:.2f}x**{server}")
        print(f"| {r0['shape']} | {r0['analysis']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
