#!/usr/bin/env python3
"""What decoding a photo turned by its EXIF orientation tag costs: the same JPEG (q90) and PNG of
a photo-like image, tagged 1 (as stored) and 6 (a quarter turn clockwise, a portrait photo from a
phone), decoded by the server's decoders (build/bench/decode_bench: DecodeEncoded, three
channels and four) and by cv2.imdecode(IMREAD_COLOR), which turns them too, in the same run on one
thread each. decode_bench runs twice: as it is (a turned file's stored pixels go to fresh memory,
as images of 8 MiB and more do in the server) and with glibc keeping freed memory (as the server's
arenas keep smaller blocks: --arena-keep-bytes). --baseline BINARY adds another decode_bench (an
older build's) with memory kept, run in the same minutes.

    build/python-venv/bin/python bench/orientation.py [--sizes 1920x1080,3840x2160] [--runs 11]
        [--decode-bench build/bench/decode_bench] [--baseline OLD_DECODE_BENCH]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from e2e import encode, photo, tagged  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
KEEP = "glibc.malloc.mmap_threshold=2000000000:glibc.malloc.trim_threshold=4000000000"


def cv2_ms(data, runs):
    buf = np.frombuffer(data, np.uint8)
    times = []
    for i in range(runs + 2):
        t0 = time.perf_counter()
        cv2.imdecode(buf, cv2.IMREAD_COLOR)
        if i >= 2:
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def decode_bench(binary, paths, runs, env=None):
    """{path: (ms, ms as four channels)} from decode_bench's table."""
    out = subprocess.run([str(binary), "--runs", str(runs), *paths],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, **(env or {})}).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0] in paths:
            rows[cells[0]] = (float(cells[3]), float(cells[6]) if cells[6] != "-" else None)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1920x1080,3840x2160")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--decode-bench", default=str(ROOT / "build/bench/decode_bench"))
    ap.add_argument("--baseline", help="another decode_bench binary, timed with memory kept")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for size in args.sizes.split(","):
            w, h = map(int, re.fullmatch(r"(\d+)x(\d+)", size).groups())
            rgb = photo(w, h, 7)
            for kind, data in (("JPEG q90", encode(rgb, ".jpg", cv2.IMWRITE_JPEG_QUALITY, 90)),
                               ("PNG", encode(rgb, ".png"))):
                for o in (1, 6):
                    path = os.path.join(tmp, f"{size}-{kind.split()[0]}-{o}")
                    pathlib.Path(path).write_bytes(tagged(data, o))
                    files.append((f"{size} {kind}", o, path))
        paths = [p for _, _, p in files]
        fresh = decode_bench(args.decode_bench, paths, args.runs)
        kept = decode_bench(args.decode_bench, paths, args.runs, {"GLIBC_TUNABLES": KEEP})
        base = (decode_bench(args.baseline, paths, args.runs, {"GLIBC_TUNABLES": KEEP})
                if args.baseline else None)
        print("| photo | tag | Glimpse 3 ch, fresh memory ms | 4 ch ms | Glimpse 3 ch, memory kept "
              "ms | 4 ch ms | " + ("baseline 3 ch, kept ms | 4 ch ms | " if base else "") +
              "cv2.imdecode ms | cv2 / Glimpse (kept, 3 ch) |")
        print("|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if base else "") + "---:|---:|")
        for name, o, path in files:
            c = cv2_ms(pathlib.Path(path).read_bytes(), args.runs)
            f, k = fresh[path], kept[path]
            b = f"{base[path][0]:.2f} | {base[path][1]:.2f} | " if base else ""
            print(f"| {name} | {o} | {f[0]:.2f} | {f[1]:.2f} | {k[0]:.2f} | {k[1]:.2f} | {b}"
                  f"{c:.2f} | {c / k[0]:.2f}x |")


if __name__ == "__main__":
    main()
