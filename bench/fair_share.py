#!/usr/bin/env python3
"""One tenant floods the GPU queue, another calls now and then: how long the second one waits,
first come, first served (--scheduler=fifo) against fair queueing (--scheduler=fair, the default).

For each scheduler a fresh glimpse-server is started with a token file of two tenants, A and B
(weight 1 each). A stores a large RGBA image and keeps --callers callers busy with a box filter
of it (kept on the server, output none, the result deleted after each call); B stores a 64x64
image and asks for its histogram every --interval-ms. Measured, in this order: A's call alone
(median of --runs), B's call alone, A's flood alone (throughput: a tenant alone must lose
nothing), and B's calls during A's flood. Client wall times; the table says how B's p95 compares
with one of A's jobs.

  fair_share.py --server-binary build/server/glimpse-server [--size 3200x2400] [--radius 7]
                [--callers 8] [--b-calls 60] [--interval-ms 50] [--flood-s 4] [--markdown FILE]
                [--json FILE]

Needs the Python client (client/python; bench/peers.sh shows how to install it into a venv).
"""
import argparse
import datetime
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

import glimpse
from server_process import ServerProcess


def quantile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def timed_ms(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def run(binary, scheduler, opts, tokens_file, tokens):
    server = ServerProcess("fair_share", [binary, "--listen=127.0.0.1:0", "--log-level=info",
                                          f"--scheduler={scheduler}", f"--tokens={tokens_file}",
                                          "--warm-up=0", "--store-bytes=536870912"], timeout_s=600)
    out = {"scheduler": scheduler}
    try:
        a = glimpse.Client(server.address, token=tokens["A"], timeout=600)
        b = glimpse.Client(server.address, token=tokens["B"], timeout=600)
        info = a.info()
        out["renderer"] = info.renderer
        rng = np.random.default_rng(opts.seed)
        w, h = opts.width, opts.height
        big = a.upload(rng.integers(0, 256, (h, w, 4), dtype=np.uint8))
        small = b.upload(rng.integers(0, 256, (64, 64, 4), dtype=np.uint8))

        def a_call(client=a):
            r = client.box_filter(big, opts.radius, keep=True)
            client.delete(r.handle)

        def b_call():
            b.histogram(small)

        for _ in range(2):  # builds the programs
            a_call()
            b_call()
        out["a_alone_ms"] = statistics.median(timed_ms(a_call) for _ in range(opts.runs))
        b_alone = []
        for _ in range(20):
            b_alone.append(timed_ms(b_call))
            time.sleep(opts.interval_ms / 1e3)
        out["b_alone_p50_ms"] = quantile(b_alone, 0.5)
        out["b_alone_p95_ms"] = quantile(b_alone, 0.95)

        def flood(stop, done):
            client = glimpse.Client(server.address, token=tokens["A"], timeout=600)
            while not stop.is_set():
                a_call(client)
                done.append(time.perf_counter())
            client.close()

        def with_flood(body):
            stop, done = threading.Event(), []
            threads = [threading.Thread(target=flood, args=(stop, done))
                       for _ in range(opts.callers)]
            for t in threads:
                t.start()
            time.sleep(1.0)  # the queue fills
            t0 = time.perf_counter()
            body()
            t1 = time.perf_counter()
            stop.set()
            for t in threads:
                t.join()
            return sum(1 for t in done if t0 <= t <= t1) / (t1 - t0)

        out["a_flood_alone_jobs_per_s"] = with_flood(lambda: time.sleep(opts.flood_s))
        b_flood = []

        def b_calls():
            for _ in range(opts.b_calls):
                b_flood.append(timed_ms(b_call))
                time.sleep(opts.interval_ms / 1e3)

        out["a_flood_with_b_jobs_per_s"] = with_flood(b_calls)
        out["b_flood_ms"] = b_flood
        for q in (50, 95, 99):
            out[f"b_flood_p{q}_ms"] = quantile(b_flood, q / 100)
        out["b_flood_max_ms"] = max(b_flood)
        out["b_p95_over_a_job"] = out["b_flood_p95_ms"] / out["a_alone_ms"]
        a.close()
        b.close()
    finally:
        server.stop()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--server-binary", default="build/server/glimpse-server")
    p.add_argument("--size", default="3200x2400")
    p.add_argument("--radius", type=int, default=7)
    p.add_argument("--callers", type=int, default=8)
    p.add_argument("--b-calls", type=int, default=60)
    p.add_argument("--interval-ms", type=float, default=50)
    p.add_argument("--flood-s", type=float, default=4)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--schedulers", default="fifo,fair")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--markdown")
    p.add_argument("--json")
    opts = p.parse_args()
    opts.width, opts.height = (int(x) for x in opts.size.split("x"))
    if opts.seed is None:
        opts.seed = secrets.randbits(32)
    tokens = {"A": secrets.token_hex(16), "B": secrets.token_hex(16)}
    with tempfile.NamedTemporaryFile("w", prefix="glimpse-fair-tokens-", delete=False) as f:
        f.write(f"A {tokens['A']} 1\nB {tokens['B']} 1\n")
        tokens_file = f.name
    load_before = os.getloadavg()[0]
    try:
        results = [run(opts.server_binary, s, opts, tokens_file, tokens)
                   for s in opts.schedulers.split(",")]
    finally:
        os.unlink(tokens_file)
    load_after = os.getloadavg()[0]

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    header = (
        f"- Machine: {os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}; "
        f"load average {load_before:.1f} before, {load_after:.1f} after (other work included)\n"
        f"- Renderer: {results[0]['renderer']}, LP_NUM_THREADS="
        f"{os.environ.get('LP_NUM_THREADS', 'unset')}\n"
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}\n"
        f"- Command: `{' '.join(sys.argv)}` (seed {opts.seed})\n"
        f"- A: {opts.callers} callers, box filter r={opts.radius} of a stored {opts.size} RGBA8 "
        f"image (keep, output none, result deleted); B: histogram of a stored 64x64 RGBA8 image "
        f"every {opts.interval_ms:g} ms, {opts.b_calls} calls during the flood. Client wall "
        f"times in ms.\n")
    rows = ["| scheduler | A alone | B alone p50 / p95 | B in A's flood p50 | p95 | p99 | max "
            "| B p95 / A's job | A's flood alone, jobs/s | A's flood beside B, jobs/s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(
            f"| {r['scheduler']} | {r['a_alone_ms']:.1f} | {r['b_alone_p50_ms']:.1f} / "
            f"{r['b_alone_p95_ms']:.1f} | {r['b_flood_p50_ms']:.1f} | {r['b_flood_p95_ms']:.1f} | "
            f"{r['b_flood_p99_ms']:.1f} | {r['b_flood_max_ms']:.1f} | "
            f"**{r['b_p95_over_a_job']:.2f}x** | {r['a_flood_alone_jobs_per_s']:.1f} | "
            f"{r['a_flood_with_b_jobs_per_s']:.1f} |")
    table = header + "\n" + "\n".join(rows) + "\n"
    print(table)
    if opts.markdown:
        with open(opts.markdown, "w") as f:
            f.write("# One tenant floods, another calls: FIFO against fair queueing\n\n" + table)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"seed": opts.seed, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
