#!/usr/bin/env python3
"""The peer of bench/e2e.py: glimpse.v1.ImageAnalytics as a user would write it in an afternoon,
with grpcio and OpenCV on the CPU, answering with the same messages Glimpse does (same fields,
same streaming, 1 MiB chunks), so that one client drives both.

Served: Histogram, BoxFilter, IntegralImage, Compact, Analyze (those four on an inline or
uploaded image), GetServerInfo; images inline in the call (ImageRef.encoded or .raw). Stored
images (UploadImage, image ids) are not: the peer keeps no state, and says so (UNIMPLEMENTED).

  cv2.imdecode, BGR(A) to RGB(A)                         the decode, in Glimpse's channel order:
                                                           a JPEG with IMREAD_ANYCOLOR |
                                                           IMREAD_ANYDEPTH, turned as its EXIF
                                                           tag says (ORIENTATION_FROM_FILE, the
                                                           default) as Glimpse turns it; other
                                                           files, and ORIENTATION_AS_STORED,
                                                           IMREAD_UNCHANGED (as stored: OpenCV
                                                           turns no file it keeps alpha of)
  cv2.calcHist per channel, 256 bins over [0, 256)       histogram (other bins and ranges: numpy)
  cv2.blur, or window sums and numpy where cv2.blur      box filter: Glimpse's rounding,
    would round differently from Glimpse                   floor(sum / area + 1/2)
  cv2.integral(sdepth=CV_64F), integral2 for squared     integral image, sent as uint64 (exact)
  the predicate in numpy, cv2.findNonZero                compaction: lo <= v <= hi, row-major

Timing: decode_ns and server_ns are filled (wall clock); the rest are 0 (no queue, no GPU).

  e2e_peer.py [--listen 127.0.0.1:0] [--workers 8] [--threads 2]
Prints `listening on ADDRESS (port N)` once it serves.
"""
import argparse
import functools
import signal
import sys
import threading
import time
from concurrent import futures

import cv2
import grpc
import numpy as np

from glimpse.v1 import image_analytics_pb2 as pb
from glimpse.v1 import image_analytics_pb2_grpc as pb_grpc

CHUNK_BYTES = 1 << 20                 # Glimpse's result message size (kResultChunkBytes)
MAX_MESSAGE_BYTES = 64 << 20          # as the benchmark starts Glimpse (--max-message-bytes)
DEFAULT_MAX_RESULTS = 1 << 20         # CompactOptions.max_results when unset
VARIANT = "opencv"

_FORMATS = {np.dtype(np.uint8): pb.SAMPLE_FORMAT_UINT8,
            np.dtype(np.uint16): pb.SAMPLE_FORMAT_UINT16,
            np.dtype(np.float32): pb.SAMPLE_FORMAT_FLOAT32}
_DTYPES = {v: k for k, v in _FORMATS.items()}


class BadRequest(Exception):
    """A request the peer refuses: code and a message naming the field, the value and the limit."""

    def __init__(self, message, code=grpc.StatusCode.INVALID_ARGUMENT):
        super().__init__(message)
        self.code = code


# ---- the work, on numpy arrays (HxWxC); bench/e2e.py calls these in-process for its floor ------

def decode(data: bytes, orientation=pb.ORIENTATION_FROM_FILE) -> np.ndarray:
    """An encoded file to HxWxC with Glimpse's channel order (RGB, RGBA, grey); a JPEG turned as
    its EXIF orientation tag says unless `orientation` is ORIENTATION_AS_STORED."""
    turn = data[:2] == b"\xff\xd8" and orientation != pb.ORIENTATION_AS_STORED
    flags = cv2.IMREAD_ANYCOLOR | cv2.IMREAD_ANYDEPTH if turn else cv2.IMREAD_UNCHANGED
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if img is None:
        raise BadRequest(f"image.encoded.data is not a file OpenCV decodes ({len(data)} bytes)")
    if img.ndim == 2:
        return img[:, :, None]
    if img.shape[2] == 3:
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    if img.shape[2] == 4:
        return cv2.cvtColor(img, cv2.COLOR_BGRA2RGBA)
    return img


def from_raw(raw: pb.RawImage) -> np.ndarray:
    layout = raw.layout
    if layout.format not in _DTYPES:
        raise BadRequest(f"image.raw.layout.format must be UINT8, UINT16 or FLOAT32, "
                         f"got {layout.format}")
    if not 1 <= layout.channels <= 4 or layout.width < 1 or layout.height < 1:
        raise BadRequest(f"image.raw.layout must be at least 1x1 with 1-4 channels, got "
                         f"{layout.width}x{layout.height}x{layout.channels}")
    dtype = _DTYPES[layout.format].newbyteorder("<")
    want = layout.width * layout.height * layout.channels * dtype.itemsize
    if len(raw.data) != want:
        raise BadRequest(f"image.raw.data has {len(raw.data)} bytes, the layout "
                         f"{layout.width}x{layout.height}x{layout.channels} needs {want}")
    return np.frombuffer(raw.data, dtype).reshape(layout.height, layout.width, layout.channels)


def luma(img: np.ndarray) -> np.ndarray:
    """OpenCV's RGB2GRAY, which Glimpse's 8/16-bit luma equals exactly."""
    if img.shape[2] < 3:
        raise BadRequest(f"luma needs 3 or 4 channels, got {img.shape[2]}")
    return cv2.cvtColor(np.ascontiguousarray(img[:, :, :3]), cv2.COLOR_RGB2GRAY)


def _default_hi(img):
    return {np.uint8: 256.0, np.uint16: 65536.0}.get(img.dtype.type, 1.0)


def histogram(img, bins=256, lo=0.0, hi=None, source="all", channel=0):
    """uint64 counts, one row per histogram; bin = floor((v - lo) * bins / (hi - lo))."""
    hi = _default_hi(img) if hi is None else hi
    if source == "luma":
        planes = [luma(img)]
    elif source == "channel":
        planes = [img[:, :, channel]]
    else:
        planes = [img[:, :, c] for c in range(img.shape[2])]
    out = np.empty((len(planes), bins), np.uint64)
    for i, p in enumerate(planes):
        if img.dtype == np.uint8 and bins == 256 and lo == 0 and hi == 256:
            out[i] = cv2.calcHist([np.ascontiguousarray(p)], [0], None, [256], [0, 256]).reshape(-1)
        else:
            v = p.astype(np.float64).ravel()
            b = np.floor((v - lo) * bins / (hi - lo))
            b = b[(b >= 0) & (b < bins)].astype(np.int64)
            out[i] = np.bincount(b, minlength=bins)
    return out


_CV_BORDERS = {"reflect101": cv2.BORDER_REFLECT_101, "replicate": cv2.BORDER_REPLICATE,
               "constant": cv2.BORDER_CONSTANT}


@functools.lru_cache(maxsize=None)
def blur_rounds_like_glimpse(kx: int, ky: int) -> bool:
    """Whether cv2.blur's 8-bit mean equals floor(sum / area + 1/2) for every window sum of a
    kx x ky window. Its result depends on the sum only, so one row of windows whose sums run
    0, 1, ..., 255 * area decides: column sums rise by one every kx columns, so each window's sum
    is one more than the last's."""
    area = kx * ky
    cols = np.arange(255 * ky * kx + kx) // kx              # column j's sum: floor(j / kx)
    levels = np.arange(ky)[:, None]
    img = np.clip(cols[None, :] - 255 * levels, 0, 255).astype(np.uint8)  # sums to cols
    rx, ry = kx // 2, ky // 2
    got = cv2.blur(img, (kx, ky), borderType=cv2.BORDER_REFLECT_101)[ry, rx:-rx or None]
    sums = np.convolve(cols, np.ones(kx, np.int64), "valid")
    want = (2 * sums + area) // (2 * area)
    return np.array_equal(got.astype(np.int64), want)


def box_filter(img, rx, ry, border="reflect101", border_value=0.0):
    """The mean over (2rx+1) x (2ry+1) windows, Glimpse's rounding for integer images."""
    kx, ky = 2 * rx + 1, 2 * ry + 1
    cv_border = _CV_BORDERS[border]
    src = img
    if border == "constant":
        src = cv2.copyMakeBorder(img, ry, ry, rx, rx, cv2.BORDER_CONSTANT,
                                 value=[border_value] * 4)
    if img.dtype == np.uint8 and blur_rounds_like_glimpse(kx, ky):
        out = cv2.blur(src, (kx, ky), borderType=cv_border)
    elif img.dtype == np.float32:
        s = cv2.boxFilter(src.astype(np.float64), cv2.CV_64F, (kx, ky), normalize=False,
                          borderType=cv_border)
        out = (s / (kx * ky)).astype(np.float32)
    else:
        # Exact window sums (CV_32S holds 65535 * area for any window under 32768 pixels), then
        # the half-up rounding in integers.
        s = cv2.boxFilter(src, cv2.CV_32S if kx * ky < 32768 else cv2.CV_64F, (kx, ky),
                          normalize=False, borderType=cv_border).astype(np.int64)
        out = ((2 * s + kx * ky) // (2 * kx * ky)).astype(img.dtype)
    if border == "constant":
        out = out[ry:ry + img.shape[0], rx:rx + img.shape[1]]
    return out.reshape(img.shape)


def integral_image(img, squared=False):
    """Inclusive summed-area tables HxWxC: uint64 for integer images, float64 for float32."""
    if squared:
        s, sq = cv2.integral2(img, sdepth=cv2.CV_64F, sqdepth=cv2.CV_64F)
        tables = [s, sq]
    else:
        tables = [cv2.integral(img, sdepth=cv2.CV_64F)]
    dtype = np.float64 if img.dtype == np.float32 else np.uint64
    # Sums of 8-bit values over a 2^28-pixel image stay under 2^53: exact in float64.
    return [t[1:, 1:].reshape(img.shape).astype(dtype) for t in tables]


def compact(img, lo, hi, outside=False, source="channel", channel=0):
    """(xy uint32 Nx2 in row-major order, values NxC) of the pixels with lo <= v <= hi (or
    outside [lo, hi])."""
    v = luma(img) if source == "luma" else img[:, :, channel]
    mask = (v >= lo) & (v <= hi)
    if outside:
        mask = ~mask & ~np.isnan(v) if v.dtype == np.float32 else ~mask
    nz = cv2.findNonZero(mask.view(np.uint8))
    xy = np.zeros((0, 2), np.uint32) if nz is None else nz.reshape(-1, 2).astype(np.uint32)
    return xy, img[xy[:, 1], xy[:, 0]]


# ---- the service: requests to arrays and back ------------------------------------------------

def _info(img) -> pb.ImageInfo:
    return pb.ImageInfo(width=img.shape[1], height=img.shape[0], channels=img.shape[2],
                        format=_FORMATS[img.dtype.newbyteorder("=")], bytes=img.nbytes)


def _timing(t0, decode_ns=0) -> pb.Timing:
    return pb.Timing(decode_ns=decode_ns, server_ns=time.perf_counter_ns() - t0)


def image_of(ref: pb.ImageRef):
    """(array, decode_ns) of an inline image."""
    which = ref.WhichOneof("source")
    t0 = time.perf_counter_ns()
    if which == "encoded":
        if ref.encoded.desired_channels not in (0,):
            raise BadRequest(f"image.encoded.desired_channels: the peer decodes as stored (0), "
                             f"got {ref.encoded.desired_channels}", grpc.StatusCode.UNIMPLEMENTED)
        img = decode(ref.encoded.data, ref.encoded.orientation)
        return img, time.perf_counter_ns() - t0
    if which == "raw":
        return from_raw(ref.raw), 0
    raise BadRequest(f"image must be inline (encoded or raw): the peer stores no images, got "
                     f"{which or 'nothing'}", grpc.StatusCode.UNIMPLEMENTED)


_HIST_SOURCES = {pb.HISTOGRAM_SOURCE_UNSPECIFIED: "all", pb.HISTOGRAM_SOURCE_ALL_CHANNELS: "all",
                 pb.HISTOGRAM_SOURCE_CHANNEL: "channel", pb.HISTOGRAM_SOURCE_LUMA: "luma"}


def histogram_response(img, request: pb.HistogramRequest, t0, decode_ns):
    o = request.options
    bins = o.bins or 256
    lo = o.lo if o.HasField("lo") else 0.0
    hi = o.hi if o.HasField("hi") else _default_hi(img)
    if not 1 <= bins <= 65536:
        raise BadRequest(f"options.bins must be in [1, 65536], got {bins}")
    if o.source not in _HIST_SOURCES:
        raise BadRequest(f"options.source: the peer serves ALL_CHANNELS, CHANNEL and LUMA, got "
                         f"{o.source}", grpc.StatusCode.UNIMPLEMENTED)
    if o.channel >= img.shape[2]:
        raise BadRequest(f"options.channel must be in [0, {img.shape[2] - 1}], got {o.channel}")
    counts = histogram(img, bins, lo, hi, _HIST_SOURCES[o.source], o.channel)
    r = pb.HistogramResponse(bins=bins, lo=lo, hi=hi, total=int(counts.sum()), variant=VARIANT,
                             image=_info(img))
    for row in counts:
        r.histograms.add().counts.extend(row.tolist())
    r.timing.CopyFrom(_timing(t0, decode_ns))
    return r


_BORDERS = {pb.BORDER_MODE_UNSPECIFIED: "reflect101", pb.BORDER_MODE_REFLECT101: "reflect101",
            pb.BORDER_MODE_REPLICATE: "replicate", pb.BORDER_MODE_CONSTANT: "constant"}


def box_filter_responses(img, request: pb.BoxFilterRequest, t0, decode_ns):
    o = request.options
    if o.border not in _BORDERS:
        raise BadRequest(f"options.border must be a BorderMode (0-3), got {o.border}")
    if request.encoding != pb.PIXEL_ENCODING_RAW or request.keep:
        raise BadRequest(f"the peer returns RAW pixels and keeps nothing: encoding "
                         f"{request.encoding}, keep {request.keep}", grpc.StatusCode.UNIMPLEMENTED)
    out = box_filter(img, o.rx, o.ry, _BORDERS[o.border], o.border_value)
    header = pb.BoxFilterHeader(image=_info(img), result=_info(out), encoding=request.encoding,
                                data_bytes=out.nbytes, variant=VARIANT)
    yield pb.BoxFilterResponse(header=header)
    data = memoryview(np.ascontiguousarray(out)).cast("B")
    for off in range(0, len(data), CHUNK_BYTES):
        yield pb.BoxFilterResponse(chunk=bytes(data[off:off + CHUNK_BYTES]))
    yield pb.BoxFilterResponse(timing=_timing(t0, decode_ns))


def integral_image_responses(img, request: pb.IntegralImageRequest, t0, decode_ns):
    tables = integral_image(img, request.options.squared)
    h, w, c = img.shape
    row_bytes = w * c * 8
    yield pb.IntegralImageResponse(header=pb.IntegralHeader(
        image=_info(img), width=w, height=h, channels=c,
        element=(pb.INTEGRAL_ELEMENT_FLOAT64 if img.dtype == np.float32
                 else pb.INTEGRAL_ELEMENT_UINT64),
        squared=request.options.squared, table_bytes=row_bytes * h))
    rows = max(1, CHUNK_BYTES // row_bytes)
    for t, table in enumerate(tables):
        data = memoryview(table).cast("B")
        for y in range(0, h, rows):
            n = min(rows, h - y)
            yield pb.IntegralImageResponse(chunk=pb.IntegralChunk(
                squared=t == 1, y0=y, rows=n,
                data=bytes(data[y * row_bytes:(y + n) * row_bytes])))
    yield pb.IntegralImageResponse(trailer=pb.IntegralTrailer(variant=VARIANT,
                                                              timing=_timing(t0, decode_ns)))


def compact_responses(img, request: pb.CompactRequest, t0, decode_ns):
    o = request.options
    if o.source not in (pb.COMPACT_SOURCE_UNSPECIFIED, pb.COMPACT_SOURCE_CHANNEL,
                        pb.COMPACT_SOURCE_LUMA):
        raise BadRequest(f"options.source must be a CompactSource (0-2), got {o.source}")
    if o.channel >= img.shape[2]:
        raise BadRequest(f"options.channel must be in [0, {img.shape[2] - 1}], got {o.channel}")
    if not o.lo <= o.hi:
        raise BadRequest(f"options.lo must be at most options.hi, got lo {o.lo}, hi {o.hi}")
    max_results = o.max_results if o.HasField("max_results") else DEFAULT_MAX_RESULTS
    if max_results < 0:
        raise BadRequest(f"options.max_results must be >= 0, got {max_results}")
    xy, values = compact(img, o.lo, o.hi, o.outside,
                         "luma" if o.source == pb.COMPACT_SOURCE_LUMA else "channel", o.channel)
    total = len(xy)
    returned = 0 if o.count_only else min(total, max_results)
    yield pb.CompactResponse(header=pb.CompactHeader(
        image=_info(img), total=total, returned=returned,
        truncated=not o.count_only and total > returned,
        value_format=_FORMATS[img.dtype.newbyteorder("=")], value_channels=img.shape[2],
        variant=VARIANT))
    per_chunk = max(1, CHUNK_BYTES // (8 + img.shape[2] * img.dtype.itemsize))
    if returned == 0:  # no chunk (and memoryview cannot cast an empty array's view)
        yield pb.CompactResponse(timing=_timing(t0, decode_ns))
        return
    xy_bytes = memoryview(np.ascontiguousarray(xy[:returned])).cast("B")
    v_bytes = memoryview(np.ascontiguousarray(values[:returned])).cast("B")
    pixel = img.shape[2] * img.dtype.itemsize
    for first in range(0, returned, per_chunk):
        n = min(per_chunk, returned - first)
        yield pb.CompactResponse(chunk=pb.CompactChunk(
            first=first, xy=bytes(xy_bytes[first * 8:(first + n) * 8]),
            values=bytes(v_bytes[first * pixel:(first + n) * pixel])))
    yield pb.CompactResponse(timing=_timing(t0, decode_ns))


_ANALYSES = {"histogram": lambda *a: [histogram_response(*a)],
             "integral_image": integral_image_responses,
             "compaction": compact_responses,
             "box_filter": box_filter_responses}


class Peer(pb_grpc.ImageAnalyticsServicer):
    def _guard(self, context, fn):
        try:
            return fn()
        except BadRequest as e:
            context.abort(e.code, str(e))

    def Histogram(self, request, context):
        def run():
            t0 = time.perf_counter_ns()
            img, decode_ns = image_of(request.image)
            return histogram_response(img, request, t0, decode_ns)
        return self._guard(context, run)

    def _stream(self, request, context, make):
        t0 = time.perf_counter_ns()
        try:
            img, decode_ns = image_of(request.image)
            yield from make(img, request, t0, decode_ns)
        except BadRequest as e:
            context.abort(e.code, str(e))

    def BoxFilter(self, request, context):
        return self._stream(request, context, box_filter_responses)

    def IntegralImage(self, request, context):
        return self._stream(request, context, integral_image_responses)

    def Compact(self, request, context):
        return self._stream(request, context, compact_responses)

    def Analyze(self, request_iterator, context):
        t0 = time.perf_counter_ns()
        try:
            first = next(request_iterator, None)
            if first is None or not first.HasField("header"):
                raise BadRequest("header must be set in the first AnalyzeRequest")
            header = first.header
            if not 1 <= len(header.analyses) <= 64:
                raise BadRequest(f"header.analyses must hold 1 to 64, got {len(header.analyses)}")
            if header.keep:
                raise BadRequest("header.keep: the peer keeps no images",
                                 grpc.StatusCode.UNIMPLEMENTED)
            if header.WhichOneof("source") == "upload":
                data = bytearray(first.chunk)
                for m in request_iterator:
                    data += m.chunk
                up = header.upload
                if up.WhichOneof("kind") == "raw":
                    ref = pb.ImageRef(raw=pb.RawImage(layout=up.raw, data=bytes(data)))
                else:
                    ref = pb.ImageRef(encoded=pb.EncodedImage(
                        data=bytes(data), desired_channels=up.encoded.desired_channels,
                        orientation=up.encoded.orientation))
            else:
                ref = header.image
            img, decode_ns = image_of(ref)
            for index, analysis in enumerate(header.analyses):
                name = analysis.WhichOneof("analysis")
                if name is None:
                    raise BadRequest(f"header.analyses[{index}] names no analysis")
                t1 = time.perf_counter_ns()
                for part in _ANALYSES[name](img, getattr(analysis, name), t1, 0):
                    yield pb.AnalyzeResponse(index=index, **{name: part})
            yield pb.AnalyzeResponse(index=len(header.analyses), timing=_timing(t0, decode_ns))
        except BadRequest as e:
            context.abort(e.code, str(e))

    def GetServerInfo(self, request, context):
        return pb.ServerInfo(
            version=f"e2e peer (grpcio {grpc.__version__}, OpenCV {cv2.__version__})",
            renderer=f"OpenCV {cv2.__version__} on the CPU, {cv2.getNumThreads()} threads",
            software=True, max_message_bytes=MAX_MESSAGE_BYTES,
            analyses=["histogram", "integral_image", "compaction", "box_filter"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: a free one)")
    ap.add_argument("--workers", type=int, default=8, help="gRPC worker threads (default 8)")
    ap.add_argument("--threads", type=int, default=2, help="cv2.setNumThreads (default 2)")
    args = ap.parse_args()
    if not 1 <= args.workers <= 256:
        ap.error(f"--workers must be in [1, 256], got {args.workers}")
    cv2.setNumThreads(args.threads)
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
               ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.workers), options=options)
    pb_grpc.add_ImageAnalyticsServicer_to_server(Peer(), server)
    port = server.add_insecure_port(args.listen)
    if port == 0:
        sys.exit(f"e2e_peer: cannot listen on {args.listen}")
    server.start()
    print(f"listening on {args.listen} (port {port})", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(grace=2).wait()


if __name__ == "__main__":
    main()
