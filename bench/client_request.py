#!/usr/bin/env python3
"""What the Python client spends building one analysis request with its image inline, before
grpcio sends it: the request written by glimpse._calls.with_image_data (the pixels copied once),
against the same request built as a protobuf message field by field (the pixels copied to bytes,
into the message and out of it when serialized, as glimpse.Client did before 2026-11-27), and
against one copy of the pixels with numpy (the floor: the bytes must be copied once into the
message grpcio sends). Each way runs in blocks of --runs calls (three blocks each, in turn), as a
client making only that kind of request would: alternated call by call, one way's large
allocations, given back to the system, would make the next call of another fault its memory in
afresh. Medians over the blocks.

  build/python-venv/bin/python bench/client_request.py [--runs 21] [--shapes 480x640x3,...]
"""
import argparse
import platform
import statistics
import time

import numpy as np

from glimpse import _calls
from glimpse._types import raw_pixels
from glimpse.v1 import image_analytics_pb2 as pb


def as_message(image):
    layout, pixels = raw_pixels(image)
    ref = pb.ImageRef()
    ref.raw.layout.CopyFrom(layout)
    ref.raw.data = pixels.tobytes()
    request = pb.HistogramRequest()
    request.image.CopyFrom(ref)
    return request.SerializeToString()


def spliced(image):
    layout, pixels = raw_pixels(image)
    return _calls.with_image_data(pb.HistogramRequest(), "raw", pb.RawImage(layout=layout),
                                  pixels)


def one_copy(image):
    return image.copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=21, help="calls per block (default %(default)s)")
    ap.add_argument("--shapes", default="256x256x3,480x640x3,1080x1920x1,1024x1024x3",
                    help="HxWxC uint8 images (default %(default)s: each within the client's "
                         "default inline_bytes, 3 MiB; larger images are uploaded in chunks)")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}; medians of 3 blocks of {args.runs} calls per way")
    print()
    print("| image | bytes | message built field by field, ms | with_image_data, ms | "
          "one numpy copy, ms | built / with_image_data |")
    print("|---|---:|---:|---:|---:|---:|")
    for text in args.shapes.split(","):
        h, w, c = (int(v) for v in text.split("x"))
        image = rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)
        assert pb.HistogramRequest.FromString(spliced(image)) == \
            pb.HistogramRequest.FromString(as_message(image))
        times = {f: [] for f in (as_message, spliced, one_copy)}
        for _ in range(3):
            for f, ts in times.items():
                for _ in range(args.runs):
                    t = time.perf_counter()
                    f(image)
                    ts.append((time.perf_counter() - t) * 1e3)
        m = {f.__name__: statistics.median(ts) for f, ts in times.items()}
        print(f"| {w}x{h}x{c} uint8 | {image.nbytes} | {m['as_message']:.3f} | "
              f"{m['spliced']:.3f} | {m['one_copy']:.3f} | "
              f"{m['as_message'] / m['spliced']:.2f}x |")


if __name__ == "__main__":
    main()
