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


CHUNK = 1 << 20


def upload_as_messages(image):
    """An upload's request stream as messages, each chunk copied to bytes, into its message and
    out of it (the client before 2026-11-27); consumed one message at a time, as grpcio does."""
    layout, pixels = raw_pixels(image)
    data = memoryview(pixels).cast("B")
    header = pb.UploadHeader(raw=layout, total_bytes=len(data))
    sent = pb.UploadImageRequest(header=header, chunk=bytes(data[:CHUNK])).SerializeToString()
    for off in range(CHUNK, len(data), CHUNK):
        sent = pb.UploadImageRequest(chunk=bytes(data[off:off + CHUNK])).SerializeToString()
    return sent


def upload_chunked(image):
    """The same stream as the client writes it now (glimpse._calls._chunked)."""
    layout, pixels = raw_pixels(image)
    data = memoryview(pixels).cast("B")
    header = pb.UploadHeader(raw=layout, total_bytes=len(data))
    for sent in _calls._chunked(pb.UploadImageRequest, header, data):
        pass
    return sent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=21, help="calls per block (default %(default)s)")
    ap.add_argument("--shapes", default="256x256x3,480x640x3,1080x1920x1,1024x1024x3",
                    help="HxWxC uint8 images (default %(default)s: each within the client's "
                         "default inline_bytes, 3 MiB; larger images are uploaded in chunks)")
    ap.add_argument("--upload-shapes", default="1080x1920x3,2160x3840x3",
                    help="HxWxC uint8 images whose upload stream is timed (default %(default)s)")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}; medians of 3 blocks of {args.runs} calls per way")
    table(rng, args.shapes, args.runs, "message built field by field", "with_image_data",
          as_message, spliced, pb.HistogramRequest)
    print("An upload's request stream (images over inline_bytes), 1 MiB messages:")
    table(rng, args.upload_shapes, args.runs, "messages built field by field", "_chunked",
          upload_as_messages, upload_chunked, pb.UploadImageRequest)


def table(rng, shapes, runs, old_name, new_name, old, new, kind):
    """A Markdown table of `old` against `new` (and one numpy copy) on random uint8 images of
    `shapes` (HxWxC,...); the two ways' (last) messages must parse as the same `kind`."""
    print()
    print(f"| image | bytes | {old_name}, ms | {new_name}, ms | one numpy copy, ms | "
          f"built / {new_name} |")
    print("|---|---:|---:|---:|---:|---:|")
    for text in shapes.split(","):
        h, w, c = (int(v) for v in text.split("x"))
        image = rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)
        assert kind.FromString(old(image)) == kind.FromString(new(image)), text
        row(image, old, new, runs)
    print()


def row(image, old, new, runs):
    """One table row: `old` and `new` against one numpy copy, each in 3 blocks of `runs` calls."""
    h, w, c = image.shape
    times = {f: [] for f in (old, new, one_copy)}
    for _ in range(3):
        for f, ts in times.items():
            for _ in range(runs):
                t = time.perf_counter()
                f(image)
                ts.append((time.perf_counter() - t) * 1e3)
    m = [statistics.median(ts) for ts in times.values()]
    print(f"| {w}x{h}x{c} uint8 | {image.nbytes} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} | "
          f"{m[0] / m[1]:.2f}x |")


if __name__ == "__main__":
    main()
