#!/usr/bin/env python3
"""PNG encoding, as a box filter with PNG output pays it: the server's encoder against
cv2.imencode (OpenCV's libpng, its default compression), libspng's encoder and stb_image_write
(the server's encoder before), one after the other on the same images in one run. The images
are what a box filter returns: photo-like RGB (bench/e2e.py's generator) blurred 5x5, grey, and
16-bit RGB. Every file is checked to decode back to its pixels.

    build/python-venv/bin/python bench/png_encode.py --binary build/bench/png_encode_bench \\
        [--sizes 1920x1080,640x480] [--runs 9] [--markdown FILE]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e  # noqa: E402  (the photo generator)


def images(width, height):
    rgb = cv2.blur(e2e.photo(width, height, 1), (5, 5), borderType=cv2.BORDER_REFLECT_101)
    yield "RGB uint8", rgb
    yield "grey uint8", cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    yield "RGB uint16", rgb.astype(np.uint16) * 257 + np.uint16(3)


def opencv_ms(array, runs):
    bgr = array[:, :, ::-1].copy() if array.ndim == 3 else array
    ok, png = cv2.imencode(".png", bgr)
    back = cv2.imdecode(png, cv2.IMREAD_UNCHANGED)
    if not ok or not np.array_equal(back, bgr):
        raise SystemExit("cv2.imencode's file does not decode back to the pixels")
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        cv2.imencode(".png", bgr)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[1:]), len(png)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--binary", default="build/bench/png_encode_bench")
    p.add_argument("--sizes", default="1920x1080,640x480")
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--markdown")
    args = p.parse_args()
    cv2.setNumThreads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            w, h = (int(v) for v in size.split("x"))
            for name, a in images(w, h):
                path = os.path.join(tmp, f"{w}x{h}-{name.replace(' ', '-')}.raw")
                a.astype(a.dtype.newbyteorder("<"), copy=False).tofile(path)
                channels = 1 if a.ndim == 2 else a.shape[2]
                spec = f"{w}x{h}x{channels}:{a.dtype.name}:{path}"
                out = subprocess.run([args.binary, "--runs", str(args.runs), spec], check=True,
                                     capture_output=True, text=True).stdout
                ms, size_bytes = opencv_ms(a, args.runs)
                results = [json.loads(line) for line in out.splitlines()]
                results.insert(1, {"encoder": "cv2.imencode (libpng)", "ms": ms,
                                   "bytes": size_bytes})
                for r in results:
                    rows.append((f"{w}x{h} {name}", r["encoder"], r["ms"], r["bytes"],
                                 a.nbytes))
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"OpenCV {cv2.__version__} (cv2.setNumThreads(1)); one thread each.",
        f"`{' '.join(['bench/png_encode.py'] + sys.argv[1:])}`",
        "",
        "| image | encoder | ms (median of %d) | MB/s of pixels | file bytes | of the pixels |"
        % args.runs,
        "|---|---|---:|---:|---:|---:|",
    ]
    for image, encoder, ms, size_bytes, raw in rows:
        lines.append(f"| {image} | {encoder} | {ms:.2f} | {raw / ms / 1e3:.0f} | {size_bytes} | "
                     f"{100 * size_bytes / raw:.1f}% |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
