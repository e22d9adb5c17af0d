#!/usr/bin/env python3
"""Glimpse against OpenCV on the same image, the same cores and the same output, side by side.

For each case and size: every variant the server offers (and `auto`) through the service, on an
image stored once and analysed by id, alternated with the OpenCV call that produces the same
result; medians of --runs. Glimpse's time is the server's reported GPU time (Timing.gpu_ns; on
llvmpipe the dispatches timed with glFinish and the CPU clock) and the client's wall time of the
call (request, queue, GPU, streaming the result into numpy). The cold column: the first call of
the case on a freshly started server (one per size) with no shader cache on disk
(MESA_SHADER_CACHE_DISABLE), which warms up before it serves as it does by default, over a warm
call of the same case and size; the warm-up's time is printed.

Usually run through bench/peers.sh (installs, builds, sets up the client); by hand:
  peers.py --server-binary build/server/glimpse-server [--runs 5] [--sizes 3200x2400,1024x1024]
           [--cases REGEX] [--images rgba,rgb,grey] [--variants all|auto] [--no-cold]
           [--markdown FILE]
  peers.py --server HOST:PORT ...      an already running server (no cold column)

Images (--images picks the kinds): "rgba" (RGBA8), "rgb" (RGB8: the RGBA image without its alpha)
and "grey" (the RGBA image's luma, 1 channel). The rows of RGB8 images end in " (rgb)", so that
--cases 'rgb' selects them and only them.
"""
import argparse
import dataclasses
import datetime
import os
import re
import statistics
import sys
import time
from typing import Callable, List

import cv2
import numpy as np

import glimpse
from server_process import ServerProcess


@dataclasses.dataclass
class Case:
    name: str
    analysis: str
    image: str                                   # a key of IMAGES
    glimpse: Callable                            # (client, image, variant) -> result
    opencv: Callable                             # (array) -> result
    check: Callable                              # (glimpse result, opencv result) -> str
    bytes: Callable                              # (array, glimpse result) -> bytes read + written
    describe: str = ""


# The image kinds: channels, and the label of the box filter rows.
IMAGES = {"rgba": (4, "RGBA8"), "rgb": (3, "RGB8"), "grey": (1, "1 channel")}


def _name(text, image):
    """A case's name: the rows of RGB8 images carry " (rgb)" (no other name has a lower-case
    "rgb"), so --cases 'rgb' picks them out."""
    return f"{text} (rgb)" if image == "rgb" else text


def _luma(img):
    """OpenCV's luma of an RGBA8 or RGB8 image, which Glimpse's luma equals."""
    return cv2.cvtColor(img, cv2.COLOR_RGBA2GRAY if img.shape[2] == 4 else cv2.COLOR_RGB2GRAY)


def _equal(a, b) -> str:
    return "equal" if np.array_equal(a, b) else "DIFFERENT"


def _hist_all(img):
    return np.stack([cv2.calcHist([img], [c], None, [256], [0, 256])[:, 0]
                     for c in range(img.shape[2])])


def _hist_luma(img):
    return cv2.calcHist([_luma(img)], [0], None, [256], [0, 256])


# R+G+B per pixel in float (exact; cv2.transform would saturate at 255 in 8 bits), counted in 768
# unit bins (exact edges), summed 48 at a time: the same 16 bins as Glimpse's (R+G+B)/3 over
# [0, 256). (16 bins over [0, 768) directly would put some sums on the wrong side of an edge:
# calcHist scales by 16/768 in floating point.)
def _hist_rgb_mean(img):
    sums = cv2.reduce(img.reshape(-1, img.shape[2])[:, :3], 1, cv2.REDUCE_SUM, dtype=cv2.CV_32F)
    unit = cv2.calcHist([sums], [0], None, [768], [0, 768])
    return unit.reshape(16, 48).sum(axis=1, keepdims=True)


def _blur_check(g, cv):
    d = np.abs(g.pixels.astype(np.int16) - cv.reshape(g.pixels.shape).astype(np.int16)).max()
    return "equal" if d == 0 else f"max diff {d}" if d <= 1 else f"DIFFERENT ({d})"


def _integral_check(g, cv):
    if isinstance(cv, tuple):
        s, sq = cv
        ok = np.array_equal(g.table, s[1:, 1:].reshape(g.table.shape)) and \
            np.array_equal(g.squared_table, sq[1:, 1:].reshape(g.table.shape))
        return "equal" if ok else "DIFFERENT"
    return _equal(g.table, cv[1:, 1:].reshape(g.table.shape))


def make_cases(thresholds) -> List[Case]:
    """thresholds: {percent: lo} so that grey >= lo selects about that share of the pixels."""
    colour = ("rgba", "rgb")
    cases = [Case(_name(f"histogram 256 bins x {IMAGES[im][0]} channels", im), "histogram", im,
                  lambda c, i, v: c.histogram(i, bins=256, variant=v), _hist_all,
                  lambda g, cv: _equal(g.counts, cv), lambda a, g: a.nbytes,
                  "calcHist per channel") for im in colour]
    cases += [Case(_name("histogram 256 bins of luma", im), "histogram", im,
                   lambda c, i, v: c.histogram(i, bins=256, source="luma", variant=v), _hist_luma,
                   lambda g, cv: _equal(g.counts[0], cv[:, 0]), lambda a, g: a.nbytes,
                   f"cvtColor {im.upper()}2GRAY + calcHist") for im in colour]
    cases += [Case(_name("histogram 16 bins of RGB mean", im), "histogram", im,
                   lambda c, i, v: c.histogram(i, bins=16, source="rgb_mean", variant=v),
                   _hist_rgb_mean, lambda g, cv: _equal(g.counts[0], cv[:, 0]),
                   lambda a, g: a.nbytes, "reduce to R+G+B + calcHist") for im in colour]
    for image in ("grey", *colour):
        ch = IMAGES[image][0]
        for squared in (False, True):
            cases.append(Case(
                _name(f"integral image {ch} channel{'s' if ch > 1 else ''}"
                      f"{', squared' if squared else ''}", image),
                "integral_image", image,
                lambda c, i, v, sq=squared: c.integral_image(i, squared=sq, variant=v),
                (lambda a: cv2.integral2(a, sdepth=cv2.CV_64F, sqdepth=cv2.CV_64F)) if squared
                else (lambda a: cv2.integral(a, sdepth=cv2.CV_64F)),
                _integral_check,
                lambda a, g, sq=squared: a.nbytes * (1 + 8 * (2 if sq else 1)),
                "integral2 CV_64F" if squared else "integral CV_64F"))
    for image, r in [(im, r) for r in (1, 7, 32) for im in colour] + [("grey", 7)]:
        k = 2 * r + 1
        cases.append(Case(
            _name(f"box filter {IMAGES[image][1]} r={r}", image), "box_filter", image,
            lambda c, i, v, r=r: c.box_filter(i, r, r, border="replicate", variant=v),
            lambda a, k=k: cv2.blur(a, (k, k), borderType=cv2.BORDER_REPLICATE),
            _blur_check, lambda a, g: 2 * a.nbytes, f"blur {k}x{k} BORDER_REPLICATE"))
    for pct, lo in thresholds.items():
        cases.append(Case(
            f"compaction {pct}% listed", "compaction", "grey",
            lambda c, i, v, lo=lo: c.compaction(i, lo, 255, max_results=i.width * i.height,
                                             variant=v),
            lambda a, lo=lo: cv2.findNonZero(cv2.inRange(a, lo, 255)),
            lambda g, cv: _equal(g.xy, cv.reshape(-1, 2)),
            lambda a, g: a.nbytes + 9 * g.total, "inRange + findNonZero"))
        cases.append(Case(
            f"compaction {pct}% counted", "compaction", "grey",
            lambda c, i, v, lo=lo: c.compaction(i, lo, 255, count_only=True, variant=v),
            lambda a, lo=lo: cv2.countNonZero(cv2.inRange(a, lo, 255)),
            lambda g, cv: "equal" if g.total == cv else "DIFFERENT",
            lambda a, g: a.nbytes, "inRange + countNonZero"))
    return cases


def make_images(width, height, seed):
    """RGBA8 smooth gradients plus noise (runs of equal values occur, as in photographs), the same
    without alpha (RGB8) and its luma (OpenCV's RGBA2GRAY, which Glimpse's luma equals)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    planes = [x / width * 200, y / height * 200, (x + y) / (width + height) * 255,
              128 + 100 * np.sin(x / 97.0) * np.cos(y / 61.0)]
    rgba = np.stack(planes, axis=2) + rng.normal(0, 12, (height, width, 4)).astype(np.float32)
    rgba = np.clip(rgba, 0, 255).astype(np.uint8)
    return {"rgba": rgba, "rgb": np.ascontiguousarray(rgba[:, :, :3]), "grey": _luma(rgba)}


def start_server(binary, threads, cold=False):
    """A glimpse-server on a free port; cold: with no shader cache on disk."""
    env = dict(os.environ, LP_NUM_THREADS=str(threads))
    if cold:
        env["MESA_SHADER_CACHE_DISABLE"] = "true"
    return ServerProcess("peers", [binary, "--listen=127.0.0.1:0", "--log-level=info",
                                   "--max-queue=4"], env=env)


def timed(fn, *args):
    t0 = time.perf_counter()
    result = fn(*args)
    return result, (time.perf_counter() - t0) * 1e3


def run_case(client, case, handle, array, variant, runs, slow_s):
    """Alternates Glimpse and OpenCV calls (which goes first alternates too); medians in ms. A
    variant whose warm-up call takes over slow_s seconds is timed once (OpenCV still `runs`
    times: its first calls can cost several times a warm one)."""
    g_gpu, g_wall, cv_ms = [], [], []
    g, warm_ms = timed(case.glimpse, client, handle, variant)  # warm-up, and the result to check
    cv, _ = timed(case.opencv, array)
    check = case.check(g, cv)
    g_runs = 1 if warm_ms > slow_s * 1e3 else runs
    for i in range(runs):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            if side == 0 and i < g_runs:
                r, ms = timed(case.glimpse, client, handle, variant)
                g_gpu.append(r.timing.gpu_ns * 1e-6)
                g_wall.append(ms)
            elif side == 1:
                cv_ms.append(timed(case.opencv, array)[1])
    return dict(variant=g.variant, gpu=statistics.median(g_gpu), wall=statistics.median(g_wall),
                cv=statistics.median(cv_ms), bytes=case.bytes(array, g), check=check, runs=g_runs)


def cold_starts(binary, threads, cases, images, runs):
    """On one freshly started server with the shader cache off (it warms up before serving): each
    case's first call over its median warm call, as {case name: (gpu ratio, wall ratio)}; and the
    server's warm-up time in seconds."""
    server = start_server(binary, threads, cold=True)
    out = {}
    try:
        with glimpse.Client(server.address, timeout=600) as c:
            warm_up_s = c.info().warm_up_ms / 1000
            handles = {k: c.upload(images[k]) for k in {case.image for case in cases}}
            for case in cases:
                handle = handles[case.image]
                first, first_wall = timed(case.glimpse, c, handle, "auto")
                warm = [timed(case.glimpse, c, handle, "auto") for _ in range(max(runs, 3))]
                gpu = statistics.median(r.timing.gpu_ns for r, _ in warm)
                wall = statistics.median(ms for _, ms in warm)
                out[case.name] = (first.timing.gpu_ns / gpu if gpu else float("nan"),
                                  first_wall / wall)
        return out, warm_up_s
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--server-binary", help="start this glimpse-server (and fresh ones for the cold column)")
    where.add_argument("--server", help="HOST:PORT of a running server (no cold column)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per side (median), default 5")
    ap.add_argument("--sizes", default="3200x2400,1024x1024", help="WxH,... (default %(default)s)")
    ap.add_argument("--cases", default="",
                    help="regular expression on the case names (RGB8 rows end in \" (rgb)\")")
    ap.add_argument("--images", default=",".join(IMAGES),
                    help="the image kinds whose cases run, of %(default)s (default all)")
    ap.add_argument("--variants", choices=["all", "auto"], default="all",
                    help="auto only, or auto and every variant (default)")
    ap.add_argument("--slow-s", type=float, default=5.0,
                    help="time a Glimpse variant once if its warm-up call takes longer (default 5 s)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-start column")
    ap.add_argument("--seed", type=int, default=1, help="image seed (default 1)")
    ap.add_argument("--markdown", help="also write the table as markdown to this file")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    kinds = [k.strip() for k in args.images.split(",")]
    for k in kinds:
        if k not in IMAGES:
            ap.error(f"--images takes kinds of {','.join(IMAGES)}, got {k!r}")
    sizes = []
    for s in args.sizes.split(","):
        m = re.fullmatch(r"(\d+)x(\d+)", s.strip())
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
            ap.error(f"--sizes takes WIDTHxHEIGHT,..., got {s!r}")
        sizes.append((int(m.group(1)), int(m.group(2))))
    threads = int(os.environ.get("LP_NUM_THREADS") or os.cpu_count())
    cv2.setNumThreads(threads)

    server = start_server(args.server_binary, threads) if args.server_binary else None
    address = server.address if server else args.server
    rows = []
    try:
        with glimpse.Client(address, timeout=600) as client:
            info = client.info()
            # The variants each analysis offers, as the server lists them ("auto" first).
            offered = {a.name: list(a.variants) for a in info.analysis_info}
            header = (f"{info.renderer} | {info.gl_version} | OpenCV {cv2.__version__}, "
                      f"cv2.setNumThreads({threads}), LP_NUM_THREADS={threads} | "
                      f"{os.cpu_count()} CPUs | runs {args.runs} | seed {args.seed}")
            print(header, flush=True)
            for width, height in sizes:
                images = make_images(width, height, args.seed)
                grey = images["grey"]
                thresholds = {p: int(np.quantile(grey, 1 - p / 100)) for p in (10, 50)}
                cases = [c for c in make_cases(thresholds)
                         if c.image in kinds and re.search(args.cases, c.name)]
                colds = {}
                if server and not args.no_cold:
                    colds, warm_up_s = cold_starts(args.server_binary, threads, cases, images,
                                                   args.runs)
                    print(f"cold server ({width}x{height}): warm-up before serving took "
                          f"{warm_up_s:.1f} s with no shader cache", flush=True)
                handles = {k: client.upload(images[k], label=f"peers {k}")
                           for k in {c.image for c in cases}}
                try:
                    for case in cases:
                        variants = (offered[case.analysis] if args.variants == "all"
                                    else ["auto"])
                        cold = colds.get(case.name)
                        for v in variants:
                            try:
                                r = run_case(client, case, handles[case.image],
                                             images[case.image], v, args.runs, args.slow_s)
                            except glimpse.GlimpseError as e:
                                print(f"  {case.name} {v}: {e}", file=sys.stderr)
                                continue
                            r.update(case=case.name, size=f"{width}x{height}", asked=v,
                                     peer=case.describe, cold=cold if v == "auto" else None)
                            rows.append(r)
                            print(format_row(r), flush=True)
                finally:
                    for h in handles.values():
                        client.delete(h)
    finally:
        if server:
            server.stop()
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, header, " ".join(sys.argv)))


def format_row(r):
    cold = "" if r["cold"] is None else f"  cold {r['cold'][0]:.1f}x gpu, {r['cold'][1]:.1f}x wall"
    variant = r["variant"] if r["asked"] != "auto" else f"auto={r['variant']}"
    return (f"{r['case']:<42} {r['size']:>10} {variant:<26} gpu {r['gpu']:9.2f} ms  wall "
            f"{r['wall']:9.2f} ms  opencv {r['cv']:8.2f} ms  {r['gpu'] / r['cv']:6.2f}x  "
            f"{r['bytes'] / r['gpu'] / 1e6:6.2f} GB/s  {r['check']}{cold}"
            + ("" if r["runs"] > 1 else "  (1 run)"))


def markdown(rows, header, command):
    out = ["| analysis | size | variant | Glimpse gpu ms | Glimpse wall ms | OpenCV ms | "
           "ratio (gpu / OpenCV) | GB/s Glimpse | GB/s OpenCV | same result | cold first / warm "
           "(gpu, wall) | runs |", "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for r in rows:
        variant = f"`auto` ({r['variant']})" if r["asked"] == "auto" else f"`{r['variant']}`"
        cold = "" if r["cold"] is None else f"{r['cold'][0]:.1f}x, {r['cold'][1]:.1f}x"
        out.append(f"| {r['case']} | {r['size']} | {variant} | {r['gpu']:.2f} | {r['wall']:.2f} | "
                   f"{r['cv']:.2f} ({r['peer']}) | {r['gpu'] / r['cv']:.2f}x | "
                   f"{r['bytes'] / r['gpu'] / 1e6:.2f} | {r['bytes'] / r['cv'] / 1e6:.2f} | "
                   f"{r['check']} | {cold} | {r['runs']} |")
    date = datetime.date.today().isoformat()
    return "\n".join([f"{header}; {date}", "", f"`{command}`", "", *out, ""])


if __name__ == "__main__":
    main()
