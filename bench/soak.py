#!/usr/bin/env python3
"""Soak: many clients making mixed calls on one glimpse-server for a long time, while the
server's resident memory, stored images, open file descriptors and threads are sampled.

Each client loops over a weighted mix: uploads of random sizes (up to --max-mp megapixels,
1-4 channels, 8- and 16-bit), every analysis by id, Analyze by id and with an upload, integral
tables and box-filter results read to the end and others abandoned after the first message,
uploads abandoned half-way, calls with deadlines too short to finish, calls cancelled while
queued, and deletes. A client keeps at most a few images and deletes what it stored at the end.

It starts the server itself (--server BIN, extra flags after --) or attaches to a running one
(--target HOST:PORT --pid PID). Writes one CSV row per sample and prints a summary: first, last
and largest RSS, and the least-squares slope of RSS over the last half of the run.

  bench/soak.py --server build/server/glimpse-server --minutes 10 --csv soak.csv

Needs the `glimpse` Python package (client/python) installed, e.g. the virtual environment that
bench/peers.sh makes (build/python-venv) or the one the README's Python client section describes.
"""
import argparse
import collections
import csv
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

import glimpse
from glimpse import _calls as gc
from glimpse._types import raw_pixels
from glimpse.v1 import image_analytics_pb2 as pb

CHUNK = 1 << 20


def proc_sample(pid):
    """VmRSS (bytes), thread count and open descriptors of process `pid`."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, threads, fds


class Stats:
    def __init__(self):
        self.mu = threading.Lock()
        self.counts = collections.Counter()
        self.own_errors = collections.Counter()  # raised by this script, not by the server

    def add(self, op, outcome):
        with self.mu:
            self.counts[(op, outcome)] += 1

    def add_own_error(self, op, e):
        self.add(op, type(e).__name__)
        with self.mu:
            self.own_errors[f"{op}: {type(e).__name__}: {e}"] += 1


def random_image(rng, max_mp):
    pixels = int(rng.uniform(0.01, max_mp) * 1e6)
    aspect = rng.uniform(0.5, 2.0)
    w = max(1, int((pixels * aspect) ** 0.5))
    h = max(1, pixels // w)
    c = rng.choice([1, 1, 3, 4, 4])
    dtype = np.uint16 if rng.random() < 0.2 else np.uint8
    shape = (h, w) if c == 1 else (h, w, c)
    top = 65536 if dtype == np.uint16 else 256
    # Noise from a small pool, tiled: making 2 MP of fresh noise per upload would cost the client
    # more than the server.
    return np.random.default_rng(rng.getrandbits(32)).integers(0, top, size=shape, dtype=dtype)


class Client(threading.Thread):
    def __init__(self, n, target, args, stats, stop):
        super().__init__(daemon=True)
        self.n, self.args, self.stats, self.stop = n, args, stats, stop
        self.rng = random.Random(args.seed * 1000 + n)
        self.g = glimpse.Client(target, timeout=120)
        self.stub = self.g._stub  # for calls the package finishes for us: abandon, cancel
        self.ids = []

    def op_upload(self):
        h = self.g.upload(random_image(self.rng, self.args.max_mp))
        self.ids.append(h.image_id)
        while len(self.ids) > 4:
            self.g.delete(self.ids.pop(0))

    def some_id(self):
        if not self.ids:
            self.op_upload()
        return self.rng.choice(self.ids)

    def op_histogram(self):
        self.g.histogram(self.some_id(), bins=self.rng.choice([16, 64, 256]))

    def op_integral(self):
        self.g.integral_image(self.some_id(), squared=self.rng.random() < 0.3)

    def op_compact(self):
        self.g.compaction(self.some_id(), lo=self.rng.randrange(0, 200), hi=255,
                       max_results=self.rng.choice([1000, 1 << 20]))

    def op_box(self):
        self.g.box_filter(self.some_id(), rx=self.rng.choice([1, 3, 7, 20]))

    def op_analyze_id(self):
        self.g.analyze(self.some_id(), [("histogram", {"bins": 64}),
                                        ("compaction", {"lo": 128, "hi": 255, "count_only": True}),
                                        ("box_filter", {"rx": 2})])

    def op_analyze_upload(self):
        self.g.analyze(random_image(self.rng, self.args.max_mp),
                       [("histogram", {}), ("integral_image", {})])

    def op_delete(self):
        if self.ids:
            self.g.delete(self.ids.pop(self.rng.randrange(len(self.ids))))

    def op_abandon_stream(self):
        if self.rng.random() < 0.5:
            req, _ = gc._integral_image_plan("soak", squared=True)
            rpc = self.stub.IntegralImage
        else:
            req, _ = gc._box_filter_plan("soak", rx=5)
            rpc = self.stub.BoxFilter
        req.image.image_id = self.some_id()
        call = rpc(req, timeout=120)
        try:
            next(call)
        except (StopIteration, grpc.RpcError):
            pass
        call.cancel()

    def op_abandon_upload(self):
        img = random_image(self.rng, self.args.max_mp)
        layout, pixels = raw_pixels(img)
        data = memoryview(pixels).cast("B")
        gate = threading.Event()

        def messages():
            header = pb.UploadHeader(raw=layout, total_bytes=len(data))
            yield pb.UploadImageRequest(header=header, chunk=bytes(data[:CHUNK]))
            gate.wait(5)  # held open: the server has a partial upload

        fut = self.stub.UploadImage.future(messages(), timeout=120)
        time.sleep(self.rng.uniform(0.05, 0.5))
        fut.cancel()
        gate.set()

    def op_short_deadline(self):
        try:
            self.g._timeout = self.rng.choice([0.001, 0.02, 0.1])
            if self.rng.random() < 0.5:
                self.g.integral_image(self.some_id())
            else:
                self.g.box_filter(self.some_id(), rx=7)
        finally:
            self.g._timeout = 120

    def op_cancel(self):
        req, _ = gc._histogram_plan("soak", bins=256)
        req.image.image_id = self.some_id()
        fut = self.stub.Histogram.future(req, timeout=120)
        time.sleep(self.rng.uniform(0, 0.2))
        fut.cancel()

    OPS = [("upload", 10), ("histogram", 12), ("integral", 8), ("compact", 8), ("box", 8),
           ("analyze_id", 6), ("analyze_upload", 3), ("delete", 5), ("abandon_stream", 8),
           ("abandon_upload", 3), ("short_deadline", 6), ("cancel", 6)]

    def run(self):
        names = [o for o, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        while not self.stop.is_set():
            op = self.rng.choices(names, weights)[0]
            try:
                getattr(self, "op_" + op)()
                self.stats.add(op, "OK")
            except glimpse.GlimpseError as e:
                if e.code == grpc.StatusCode.NOT_FOUND and self.ids:
                    # Evicted by others' uploads: forget it.
                    self.ids = [i for i in self.ids if i not in (e.details or "")]
                self.stats.add(op, e.code.name)
            except grpc.RpcError as e:
                self.stats.add(op, e.code().name)
            except Exception as e:  # noqa: BLE001: a soak counts every failure and goes on
                self.stats.add_own_error(op, e)
        for i in self.ids:
            try:
                self.g.delete(i)
            except glimpse.GlimpseError:
                pass
        self.g.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slope_per_min(rows, key):
    """Least-squares slope of rows[key] (bytes) against time, in MB per minute."""
    if len(rows) < 3:
        return float("nan")
    t = np.array([r["t_s"] for r in rows], dtype=float)
    y = np.array([r[key] for r in rows], dtype=float)
    return float(np.polyfit(t, y, 1)[0]) * 60 / 1e6


def summarize(rows):
    """Prints first/last/max RSS and the slopes over the last half of the load. `rows`: the
    samples, the first taken before the clients start and the last after they stop."""
    for r in rows:
        # What the server's own budgets do not account for: on llvmpipe stored images and results
        # waiting for readers are host memory too, and come and go with the mix of calls.
        r["other_bytes"] = r["rss_bytes"] - r["stored_bytes"] - r["result_buffer_used_bytes"]
    loaded = rows[1:-1] or rows
    half = [r for r in loaded if r["t_s"] >= loaded[-1]["t_s"] / 2]
    first, last = rows[0], rows[-1]
    mb = 1e6
    print(f"  RSS first {first['rss_bytes'] / mb:.1f} MB, last {last['rss_bytes'] / mb:.1f} MB "
          f"(clients stopped, store emptied), max {max(r['rss_bytes'] for r in rows) / mb:.1f} MB")
    first_half = [r["other_bytes"] for r in loaded if r not in half]
    print(f"  RSS less stored images and held results: max "
          f"{max(r['other_bytes'] for r in loaded) / mb:.1f} MB, mean over the first half "
          f"{np.mean(first_half or [0]) / mb:.1f} MB, over the last half "
          f"{np.mean([r['other_bytes'] for r in half]) / mb:.1f} MB")
    print(f"  slopes over the last half of the load ({len(half)} samples): RSS "
          f"{slope_per_min(half, 'rss_bytes'):+.2f} MB/min, stored bytes "
          f"{slope_per_min(half, 'stored_bytes'):+.2f} MB/min, RSS less stored and held "
          f"{slope_per_min(half, 'other_bytes'):+.2f} MB/min")
    print(f"  after the clients stopped: stored {last['stored_images']} images / "
          f"{last['stored_bytes']} bytes, result buffer {last['result_buffer_used_bytes']} bytes, "
          f"queue {last['queue_length']}, fds {first['fds']} -> {last['fds']}, "
          f"threads {first['threads']} -> {last['threads']}")


def read_csv(path):
    with open(path) as f:
        return [{k: (float(v) if k == "t_s" else int(v)) for k, v in r.items()}
                for r in csv.DictReader(f)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--interval", type=float, default=5, help="seconds between samples")
    p.add_argument("--max-mp", type=float, default=2.0, help="largest upload, megapixels")
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    p.add_argument("--server", help="glimpse-server binary to start")
    p.add_argument("--target", help="HOST:PORT of a running server (with --pid)")
    p.add_argument("--pid", type=int, help="its process id, for /proc")
    p.add_argument("--csv", default="soak.csv")
    p.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "glimpse-soak-server.log"),
                   help="the started server's log (default: in the temporary directory)")
    p.add_argument("server_args", nargs="*", help="after --: flags for the started server")
    p.add_argument("--summarize", metavar="CSV", help="only print the summary of a CSV written "
                   "by an earlier run")
    args = p.parse_args()
    if args.summarize:
        summarize(read_csv(args.summarize))
        return
    print(f"soak: seed {args.seed}, {args.clients} clients, {args.minutes} min", flush=True)

    proc = None
    if args.server:
        port = free_port()
        target = f"127.0.0.1:{port}"
        log = open(args.log, "w")
        proc = subprocess.Popen([args.server, f"--listen={target}", "--log-level=warn",
                                 *args.server_args], stdout=log, stderr=subprocess.STDOUT)
        pid = proc.pid
    elif args.target and args.pid:
        target, pid = args.target, args.pid
    else:
        p.error("give --server BIN, or --target HOST:PORT and --pid PID")

    probe = glimpse.Client(target, timeout=5)
    t_start = time.time()
    while True:
        try:
            if probe.health() == "SERVING":
                break
        except glimpse.GlimpseError:
            pass
        if proc and proc.poll() is not None:
            sys.exit(f"soak: the server exited with {proc.returncode}; see {args.log}")
        if time.time() - t_start > 900:
            sys.exit("soak: the server did not report SERVING within 15 minutes")
        time.sleep(0.5)
    print(f"soak: server pid {pid} at {target} SERVING after {time.time() - t_start:.1f} s"
          + (f" (its log: {args.log})" if proc else ""), flush=True)

    stats = Stats()
    stop = threading.Event()
    rows = []
    fields = ["t_s", "rss_bytes", "threads", "fds", "stored_images", "stored_bytes",
              "result_buffer_used_bytes", "queue_length", "jobs_run", "jobs_dropped",
              "jobs_rejected", "images_evicted", "calls"]

    def sample(t0):
        rss, threads, fds = proc_sample(pid)
        info = probe.info()
        with stats.mu:
            calls = sum(stats.counts.values())
        row = {"t_s": round(time.time() - t0, 1), "rss_bytes": rss, "threads": threads,
               "fds": fds, "calls": calls}
        for f in fields[4:-1]:
            row[f] = getattr(info, f)
        rows.append(row)
        writer.writerow(row)
        out.flush()
        print(f"  t={row['t_s']:7.1f}s rss={rss / 1e6:7.1f} MB thr={threads:3d} fds={fds:3d} "
              f"stored={row['stored_images']:3d} imgs {row['stored_bytes'] / 1e6:7.1f} MB "
              f"results={row['result_buffer_used_bytes'] / 1e6:6.1f} MB calls={calls}",
              flush=True)

    with open(args.csv, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        t0 = time.time()
        sample(t0)
        clients = [Client(i, target, args, stats, stop) for i in range(args.clients)]
        for c in clients:
            c.start()
        end = t0 + args.minutes * 60
        while time.time() < end:
            time.sleep(min(args.interval, max(0, end - time.time())))
            sample(t0)
        stop.set()
        for c in clients:
            c.join(180)
        time.sleep(2 * args.interval)  # let cancelled work drain before the final sample
        sample(t0)

    print("\nsoak summary")
    print(f"  calls: {sum(stats.counts.values())}")
    for (op, outcome), n in sorted(stats.counts.items()):
        print(f"    {op:16s} {outcome:20s} {n}")
    summarize(rows)
    if proc:
        proc.terminate()
        proc.wait(60)
        print(f"  server exit status {proc.returncode}")
    if stats.own_errors:  # the calls did not go as meant: the run does not measure what it says
        for what, n in stats.own_errors.most_common(5):
            print(f"  this script failed {n} times: {what}", file=sys.stderr)
        sys.exit("soak: calls failed in the script itself, not in the server")


if __name__ == "__main__":
    main()
