#!/usr/bin/env python3
"""A folder of photos: N JPEG thumbnails' histograms, through AnalyzeBatch and through single calls.

In one run, on the same cores, one after the other:
  glimpse batch    glimpse.Client.analyze_many, CALLERS callers each streaming its share of the
                   images through one AnalyzeBatch call (ordered), each on its own connection;
  glimpse unpacked the same on a second server started with --batch-pack-images=1: each image's
                   histogram its own GPU job, as before packing (docs/api.md, "Packing");
  glimpse raw      the same AnalyzeBatch calls through the raw stub, answers read by the code the
                   single calls use (the library's result objects left out);
  glimpse single   the same images as Histogram calls, CALLERS callers one call after another;
  peer single      bench/e2e_peer.py (grpcio + OpenCV on the CPU, the service a user would write
                   in an afternoon), the same Histogram calls;
  decode floor     cv2.imdecode of the N files in this process, spread over every CPU (a thread
                   per CPU; OpenCV releases the GIL): the cost no service of these images avoids;
  decode+hist      the same with cv2.calcHist of each channel: the whole job without a network.
Every answer is read into numpy by the same code (glimpse's client or the raw stub), and the
Glimpse histograms are compared with the peer's (exactly: the same libjpeg-turbo decode).
Glimpse rows also report the server's GPU jobs per image (ServerInfo.jobs_run before and after),
and every row the CPU it took per image: this client process's, the service's (by thread name,
from /proc: Glimpse's decoders are "glimpse-host", its GL thread "glimpse-gpu", llvmpipe's
"gl-driver", gRPC's its own names) and how idle the machine was.

With --analyses four, each image gets all four analyses (a 256-bin histogram, a 7x7 box filter with
the pixels back, the integral image with its table back, and the pixels of luma 200 to 255
compacted): the batch through the raw stub (its header names the four), the same on the unpacked
server, Glimpse's and the peer's Analyze single calls (one call per image), and locally the
decode with the peer's own four analyses (bench/e2e.py's local_call). Every array of every image
is compared with the peer's.

Images: synthetic photo-like thumbnails (bench/e2e.py's photo(), a different seed per image),
JPEG q90, or PNG with --format png (lossless: compared exactly as well), or with --format raw
raw RGB uint8 arrays (ImageRef.raw: nothing to decode, the pixels' bytes read where gRPC received
them; the local rows then take no decode). Glimpse runs with --warm-up=0; a few images through
each path first, untimed.

  LP_NUM_THREADS=2 batch.py --server-binary build/server/glimpse-server [--images 1000]
      [--size 256x256] [--format jpeg|png|raw] [--analyses histogram|four] [--callers 4]
      [--peer-workers 8] [--markdown FILE] [--json FILE]
"""
import argparse
import json
import os
import platform
import sys
import threading
import time
from concurrent import futures

import cv2
import grpc
import numpy as np

import glimpse
from glimpse.v1 import image_analytics_pb2 as pb
from glimpse.v1 import image_analytics_pb2_grpc as pb_grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_by_thread  # noqa: E402  (bench/ is not a package)
import e2e  # noqa: E402

MAX_MESSAGE_BYTES = 64 << 20


# Each --format: its name, and the file extension and cv2.imencode parameters (None: raw arrays).
FORMATS = {"jpeg": ("JPEG q90", ".jpg", (cv2.IMWRITE_JPEG_QUALITY, 90)),
           "png": ("PNG", ".png", ()),
           "raw": ("raw RGB uint8", None, ())}


def make_images(n, width, height, seed, fmt="jpeg"):
    """N distinct images of `fmt` (FORMATS), files or raw arrays: a handful of photos, each
    cropped, shifted and tinted per image so no two are equal."""
    _, ext, params = FORMATS[fmt]
    bases = [e2e.photo(width * 2, height * 2, seed + b) for b in range(8)]
    rng = np.random.default_rng(seed)
    files = []
    for i in range(n):
        base = bases[i % len(bases)]
        y, x = rng.integers(0, height), rng.integers(0, width)
        crop = base[y:y + height, x:x + width].astype(np.int16) + rng.integers(-20, 21, 3)
        pixels = np.clip(crop, 0, 255).astype(np.uint8)
        files.append(pixels if ext is None else e2e.encode(pixels, ext, *params))
    return files


def image_ref(image):
    """The ImageRef that sends `image` inline: a raw array or an encoded file."""
    if isinstance(image, np.ndarray):
        h, w, c = image.shape
        return pb.ImageRef(raw=pb.RawImage(layout=pb.ImageLayout(
            width=w, height=h, channels=c, format=pb.SAMPLE_FORMAT_UINT8), data=image.tobytes()))
    return pb.ImageRef(encoded=pb.EncodedImage(data=image))


def pixels_of(image):
    """An image's pixels as the local rows start from them: decoded, or the raw array as is."""
    if isinstance(image, np.ndarray):
        return image
    return cv2.imdecode(np.frombuffer(image, np.uint8), cv2.IMREAD_UNCHANGED)


def size_of(image):
    return image.nbytes if isinstance(image, np.ndarray) else len(image)


def shares(n, callers):
    return [list(range(c, n, callers)) for c in range(callers)]


def run_callers(callers, work):
    """Runs work(c) in `callers` threads at once; returns the wall time in seconds."""
    start = threading.Barrier(callers + 1)
    errors = []

    def body(c):
        start.wait()
        try:
            work(c)
        except BaseException as e:  # noqa: B036 -- reported after the join
            errors.append(e)

    threads = [threading.Thread(target=body, args=(c,)) for c in range(callers)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall


def own_channel(address):
    return grpc.insecure_channel(address, options=[
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES), ("grpc.use_local_subchannel_pool", 1)])


def glimpse_batch(address, files, callers, out, max_in_flight=0):
    def work(c):
        # The server takes messages of up to MAX_MESSAGE_BYTES: images that large go inline.
        with glimpse.Client(address, inline_bytes=MAX_MESSAGE_BYTES,
                            options=[("grpc.use_local_subchannel_pool", 1)]) as g:
            share = shares(len(files), callers)[c]
            for item in g.analyze_many(((str(i), files[i]) for i in share), [("histogram", {})],
                                       max_in_flight=max_in_flight):
                if not item.ok:
                    raise item.error
                out[share[item.index]] = item[0].counts
    return run_callers(callers, work)


def raw_batch(address, files, callers, out, max_in_flight=0):
    """AnalyzeBatch through the raw stub, its answers read by the code single_calls uses: the
    service's cost without the client library's result objects."""
    def work(c):
        stub = pb_grpc.ImageAnalyticsStub(own_channel(address))
        share = shares(len(files), callers)[c]
        header = pb.AnalyzeBatchHeader(ordered=True, max_in_flight=max_in_flight)
        header.analyses.add().histogram.SetInParent()

        def requests():
            yield pb.AnalyzeBatchRequest(header=header)
            for i in share:
                yield pb.AnalyzeBatchRequest(image=pb.BatchImage(key=str(i),
                                                                  image=image_ref(files[i])))
        for m in stub.AnalyzeBatch(requests(), timeout=300):
            if m.WhichOneof("part") == "result":
                out[share[m.index]] = np.array([h.counts for h in m.result.histogram.histograms],
                                               dtype=np.uint64)
            elif m.WhichOneof("part") == "end" and m.end.HasField("error"):
                raise RuntimeError(m.end.error.message)
    return run_callers(callers, work)


# The four analyses of --analyses four, with options that need no per-image statistics (a batch
# names its options once for every image).
FOUR = [e2e.HIST, e2e.BOX, ("integral_image", {}),
        ("compaction", dict(lo=200.0, hi=255.0, source="luma"))]


def four_batch(address, files, callers, out, max_in_flight=0):
    """AnalyzeBatch with the four analyses through the raw stub; each image's parts read into
    arrays by bench/e2e.py's readers (those of the analyses' own RPCs)."""
    names = [n for n, _ in FOUR]

    def work(c):
        stub = pb_grpc.ImageAnalyticsStub(own_channel(address))
        share = shares(len(files), callers)[c]
        header = pb.AnalyzeBatchHeader(ordered=False, max_in_flight=max_in_flight)
        for name, o in FOUR:
            getattr(header.analyses.add(), name).CopyFrom(e2e._request(name, o))

        def requests():
            yield pb.AnalyzeBatchRequest(header=header)
            for i in share:
                yield pb.AnalyzeBatchRequest(image=pb.BatchImage(key=str(i),
                                                                  image=image_ref(files[i])))
        parts = {}
        for m in stub.AnalyzeBatch(requests(), timeout=600):
            kind = m.WhichOneof("part")
            if kind == "result":
                r = m.result
                parts.setdefault(m.index, [[] for _ in names])[r.index].append(
                    getattr(r, r.WhichOneof("part")))
            elif kind == "end":
                if m.end.HasField("error"):
                    raise RuntimeError(m.end.error.message)
                got = parts.pop(m.index)
                out[share[m.index]] = [e2e._READ[n](p)[0] for n, p in zip(names, got)]
    return run_callers(callers, work)


def four_single(address, files, callers, out):
    """One Analyze call per image with the four analyses (bench/e2e.py's Caller)."""
    def work(c):
        channel = own_channel(address)
        rpc = None
        for i in shares(len(files), callers)[c]:
            caller = e2e.Caller(FOUR, image_ref(files[i]), True)
            rpc = rpc or caller.method(channel)
            out[i] = caller(rpc)[0]
    return run_callers(callers, work)


def four_local(files):
    """Decode and the peer's own four analyses in this process, a thread per CPU."""
    def one(image):
        if isinstance(image, np.ndarray):
            return e2e.local_call(FOUR, e2e.Input("", image_ref(image), image, None))
        return e2e.local_call(FOUR, e2e.Input("", None, None, image))
    with futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        t0 = time.perf_counter()
        list(pool.map(one, files))
        return time.perf_counter() - t0


def single_calls(address, files, callers, out):
    def work(c):
        stub = pb_grpc.ImageAnalyticsStub(own_channel(address))
        for i in shares(len(files), callers)[c]:
            r = stub.Histogram(pb.HistogramRequest(image=image_ref(files[i])), timeout=300)
            out[i] = np.array([h.counts for h in r.histograms], dtype=np.uint64)
    return run_callers(callers, work)


def cpu_now(service):
    """(this process's CPU seconds, the service's CPU seconds by thread name or None, and the
    machine's (all, idle) jiffies)."""
    return (cpu_by_thread.cpu_s("/proc/self/stat"),
            cpu_by_thread.threads(service.proc.pid) if service else None,
            cpu_by_thread.machine())


def cpu_used(before, after, images):
    """CPU per image between two cpu_now() readings: the client's (this process: the callers, or
    the local rows' work), the server's in all and by thread name, and the machine's idle share
    (resolution: the kernel's clock tick, 10 ms, spread over the images)."""
    (c0, t0, m0), (c1, t1, m1) = before, after
    out = dict(client_cpu_ms_per_image=(c1 - c0) * 1e3 / images,
               idle_percent=100 * (m1[1] - m0[1]) / max(1, m1[0] - m0[0]))
    if t0 is not None:
        by_name = {}
        for key, seconds in t1.items():
            by_name[key[0]] = by_name.get(key[0], 0) + seconds - t0.get(key, 0)
        out["server_cpu_ms_per_image"] = sum(by_name.values()) * 1e3 / images
        out["server_cpu_ms_per_image_by_thread"] = {
            name: s * 1e3 / images for name, s in sorted(by_name.items(), key=lambda x: -x[1])
            if s > 0}
    return out


def cpu_text(row):
    text = f"client {row['client_cpu_ms_per_image']:.3f}"
    if "server_cpu_ms_per_image" in row:
        text += f", server {row['server_cpu_ms_per_image']:.3f} (" + ", ".join(
            f"{name} {ms:.3f}" for name, ms in row["server_cpu_ms_per_image_by_thread"].items()
        ) + ")"
    return text + f"; machine idle {row['idle_percent']:.1f}%"


def local(files, with_histogram):
    def one(image):
        img = pixels_of(image)
        if with_histogram:
            return [cv2.calcHist([img], [c], None, [256], [0, 256]) for c in range(3)]
        return img.shape
    with futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        t0 = time.perf_counter()
        list(pool.map(one, files))
        return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server-binary", required=True)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--size", default="256x256", help="WxH of each thumbnail")
    ap.add_argument("--format", choices=sorted(FORMATS), default="jpeg",
                    help="how each image is sent: JPEG q90, PNG or a raw RGB array")
    ap.add_argument("--analyses", choices=("histogram", "four"), default="histogram",
                    help="each image's analyses: a histogram, or all four")
    ap.add_argument("--callers", type=int, default=4)
    ap.add_argument("--peer-workers", type=int, default=8)
    ap.add_argument("--max-in-flight", type=int, default=0,
                    help="images in flight per batch call (0: the server's --batch-in-flight)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each row; the best is kept")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    threads = int(os.environ.get("LP_NUM_THREADS") or os.cpu_count())
    cv2.setNumThreads(threads)
    kind = FORMATS[args.format][0]
    four = args.analyses == "four"
    files = make_images(args.images, width, height, args.seed, args.format)
    mean_kib = sum(map(size_of, files)) / len(files) / 1024
    print(f"{len(files)} {args.size} {kind} files, {mean_kib:.1f} KiB each on average",
          flush=True)
    env = dict(os.environ, LP_NUM_THREADS=str(threads))
    g = e2e.Service("glimpse", [args.server_binary, "--listen=127.0.0.1:0", "--log-level=info",
                                "--warm-up=0", f"--max-message-bytes={MAX_MESSAGE_BYTES}"],
                    env=env)
    rows, answers, unpacked = [], {}, None
    try:
        unpacked = e2e.Service("glimpse-unpacked", g.command + ["--batch-pack-images=1"], env=env)
        p = e2e.Service("peer", [sys.executable, os.path.join(HERE, "e2e_peer.py"),
                                 "--listen=127.0.0.1:0", f"--workers={args.peer_workers}",
                                 f"--threads={threads}"], env=env, health=False)
        try:
            info = g.info()
            warm = files[:16]
            for address in (g.address, unpacked.address):
                (four_batch if four else glimpse_batch)(address, warm, 2, {})
            for address in (g.address, p.address):
                (four_single if four else single_calls)(address, warm, 2, {})
            raw, cpus = args.format == "raw", os.cpu_count()
            decode = "" if raw else "decode + "
            # (row, the Glimpse server it runs on or None, the run)
            plan = [
                ("glimpse AnalyzeBatch (analyze_many)", g,
                 lambda out: glimpse_batch(g.address, files, args.callers, out,
                                           args.max_in_flight)),
                ("glimpse AnalyzeBatch (analyze_many), --batch-pack-images=1", unpacked,
                 lambda out: glimpse_batch(unpacked.address, files, args.callers, out,
                                           args.max_in_flight)),
                ("glimpse AnalyzeBatch, raw stub", g,
                 lambda out: raw_batch(g.address, files, args.callers, out, args.max_in_flight)),
                ("glimpse Histogram, single calls", g,
                 lambda out: single_calls(g.address, files, args.callers, out)),
                ("peer Histogram, single calls (grpcio + OpenCV)", None,
                 lambda out: single_calls(p.address, files, args.callers, out)),
                (f"{decode}cv2.calcHist, {cpus} threads, no network", None,
                 lambda out: local(files, True)),
            ]
            if four:
                plan = [
                    ("glimpse AnalyzeBatch, four analyses, raw stub", g,
                     lambda out: four_batch(g.address, files, args.callers, out,
                                            args.max_in_flight)),
                    ("glimpse AnalyzeBatch, four analyses, --batch-pack-images=1", unpacked,
                     lambda out: four_batch(unpacked.address, files, args.callers, out,
                                            args.max_in_flight)),
                    ("glimpse Analyze, single calls", g,
                     lambda out: four_single(g.address, files, args.callers, out)),
                    ("peer Analyze, single calls (grpcio + OpenCV)", None,
                     lambda out: four_single(p.address, files, args.callers, out)),
                    (f"{decode}the peer's four analyses, {cpus} threads, no network", None,
                     lambda out: four_local(files)),
                ]
            if not raw:
                # Where the files are decoded, the cost no service of them avoids.
                plan.insert(-1, (f"decode floor: cv2.imdecode, {cpus} threads, no network",
                                 None, lambda out: local(files, False)))
            for name, server, run in plan:
                # The service process whose CPU the row spends (none for the local rows).
                service = server or (p if name.startswith("peer") else None)
                best, out, jobs, cpu = None, {}, None, None
                for _ in range(args.repeats):
                    out = {}
                    jobs_before = server.info().jobs_run if server else 0
                    before = cpu_now(service)
                    wall = run(out)
                    used = cpu_used(before, cpu_now(service), len(files))
                    if server:
                        jobs = (server.info().jobs_run - jobs_before) / len(files)
                    if best is None or wall < best:
                        best, cpu = wall, used
                answers[name] = out
                row = dict(row=name, images=len(files), wall_s=best,
                           images_per_s=len(files) / best, ms_per_image=best * 1e3 / len(files),
                           gpu_jobs_per_image=jobs, **cpu)
                rows.append(row)
                jobs_text = f"{jobs:5.2f} GPU jobs/image" if jobs is not None else ""
                print(f"{name:62s} {best:7.3f} s {row['images_per_s']:8.0f} images/s "
                      f"{row['ms_per_image']:6.3f} ms/image {jobs_text}\n    CPU ms/image: "
                      f"{cpu_text(row)}", flush=True)
        finally:
            p.stop()
    finally:
        g.stop()
        if unpacked:
            unpacked.stop()
    def same(a, b):
        if not four:
            return np.array_equal(a, b)
        return e2e.compare(a, b) == "equal"
    rows_by = {r[0]: answers[r[0]] for r in plan}
    batch = rows_by[plan[0][0]]
    peer = next(v for k, v in rows_by.items() if k.startswith("peer"))
    single = next(v for k, v in rows_by.items() if "single calls" in k and k.startswith("glimpse"))
    unpacked_answers = rows_by[plan[1][0]]
    equal = sum(1 for i in range(len(files)) if same(batch[i], peer[i]))
    equal_single = sum(1 for i in range(len(files)) if same(batch[i], single[i]))
    equal_unpacked = sum(1 for i in range(len(files)) if same(batch[i], unpacked_answers[i]))
    what = "histograms" if not four else "answers (every array of the four analyses)"
    check = (f"Glimpse batch {what} equal to the peer's: {equal}/{len(files)}; to Glimpse's "
             f"single calls: {equal_single}/{len(files)}; to the unpacked batch's: "
             f"{equal_unpacked}/{len(files)}.")
    print(check)
    header = (f"Machine: {e2e.machine()}. Glimpse {info.version}: renderer {info.renderer}, "
              f"LP_NUM_THREADS={threads}, --batch-in-flight {info.batch_in_flight}, "
              f"max_in_flight {args.max_in_flight or 'unset'}. Peer: "
              f"bench/e2e_peer.py, grpcio {grpc.__version__}, OpenCV {cv2.__version__}, "
              f"{args.peer_workers} gRPC workers. Python {platform.python_version()}. "
              f"Run {e2e.utc(time.time())} at {e2e.git_commit()}.")
    command = "bench/batch.py " + " ".join(sys.argv[1:])
    if args.markdown:
        with open(args.markdown, "w") as f:
            title = "histograms" if not four else "images, all four analyses"
            f.write(f"# {len(files)} {args.size} {kind.split()[0]} {title}, {args.callers} "
                    "callers\n\n")
            f.write(f"{header}\n\nImages: {len(files)} {kind}, {mean_kib:.1f} KiB on average "
                    f"(seed {args.seed}); best of {args.repeats} runs per row.\n\n")
            f.write("| path | wall s | images/s | ms per image | GPU jobs per image | CPU ms "
                    "per image: client, server (by thread); machine idle |\n"
                    "|---|--:|--:|--:|--:|---|\n")
            for r in rows:
                jobs = r["gpu_jobs_per_image"]
                f.write(f"| {r['row']} | {r['wall_s']:.3f} | {r['images_per_s']:.0f} | "
                        f"{r['ms_per_image']:.3f} | {'' if jobs is None else f'{jobs:.2f}'} | "
                        f"{cpu_text(r)} |\n")
            f.write(f"\n{check}\n\nCommand: `LP_NUM_THREADS={threads} {command}`\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(header=header, command=command, rows=rows, check=check), f, indent=1)


if __name__ == "__main__":
    main()
