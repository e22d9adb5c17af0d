#!/usr/bin/env python3
"""End to end, row by row: Glimpse against the service a user would write in an afternoon.

One client sends an encoded photo (JPEG/PNG) or a raw array inline in one call (ImageRef.encoded
or .raw) and waits for the whole answer, read into numpy. In one run, on the same cores, one
after the other for each row, it measures:
  Glimpse   the real glimpse-server, started here (warmed up: it reports SERVING once every GPU
            program `auto` can pick has run), LP_NUM_THREADS threads for llvmpipe;
  peer      bench/e2e_peer.py, started here: grpcio and OpenCV on the CPU, the same service and
            the same messages (cv2.setNumThreads(LP_NUM_THREADS), --peer-workers gRPC threads);
  local     the floor: the same OpenCV decode and analysis in this process, no network.
Both services get the same raw grpcio stub calls (glimpse.v1 from the Python client package) and
their answers are read by the same code into numpy, so the client's cost is the same on both
sides. Per row and service:
  p50, p99    latency of one caller, calls one after the other (--seconds, at least --runs calls);
  req/s @N    throughput of N concurrent callers (threads, spread over --client-processes
              processes), each with its own channel and its own connection (a local subchannel
              pool), for --seconds;
  server      Glimpse's Timing of the one-caller calls (medians): decode, upload (host to GPU),
              queue, GPU, rest = server - those; client+wire = p50 latency - server time.
Each row's answers are compared once (exactly): "equal", or what differs. When a JPEG decodes to
different pixels (Glimpse's decoder is not OpenCV's), the row says by how much (Glimpse's pixels
fetched back with a box filter of radius 0) and whether the answers agree on OpenCV's pixels sent
raw, which isolates the analysis from the decoder.

Test images: synthetic but photo-like (smooth colour fields, soft-edged shapes, fine texture and
sensor-like noise), made from --seed and encoded with cv2.imencode.

Usually run through bench/e2e.sh (installs, builds the Release server, sets up the client, sets
LP_NUM_THREADS=2); by hand, from the repository root, with the client package importable:
  LP_NUM_THREADS=2 e2e.py --server-binary build/server/glimpse-server [--seconds 3] [--runs 5]
      [--rows REGEX] [--peer-workers 8] [--client-processes 1] [--markdown FILE] [--json FILE]
      [--seed 1]
      [--server-arg=--staging-bytes=0 ...] [--profile DIR [--profile-callers 4]]
--profile (needs perf, as root) also records every CPU over each service's throughput cell and
writes where the CPU time went: per process, per thread and shared object, and per purpose
(llvmpipe's kernels, decode, the GL thread, gRPC; the peer's OpenCV, decoders, numpy, Python).
"""
import argparse
import dataclasses
import datetime
import json
import multiprocessing
import os
import pathlib
import platform
import re
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib
from typing import Callable, Optional

import cv2
import grpc
import numpy as np

from glimpse import _health
from server_process import ServerProcess
from glimpse.v1 import image_analytics_pb2 as pb
from glimpse.v1 import image_analytics_pb2_grpc as pb_grpc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import e2e_peer  # noqa: E402  (bench/ is not a package)

MAX_MESSAGE_BYTES = 64 << 20
CALL_TIMEOUT_S = 300


# ---- test images -------------------------------------------------------------------------------

def photo(width, height, seed):
    """An RGB uint8 image with a photograph's statistics: smooth colour fields (a sky-like
    gradient and a few broad waves), soft-edged shapes, fine texture and sensor-like noise. JPEG
    q90 of 1920x1080 comes out at about half a megabyte, as a camera's does."""
    rng = np.random.default_rng([seed, width, height])
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = x / width, y / height
    img = np.empty((height, width, 3), np.float32)
    top, bottom = rng.uniform(60, 230, 3), rng.uniform(20, 200, 3)
    for c in range(3):
        img[:, :, c] = top[c] * (1 - v) + bottom[c] * v
        for _ in range(3):
            fx, fy, ph = rng.uniform(0.5, 3), rng.uniform(0.5, 3), rng.uniform(0, 6.3)
            img[:, :, c] += rng.uniform(8, 25) * np.sin(6.28 * (fx * u + fy * v) + ph)
    scale = min(width, height)
    for _ in range(40):
        colour = [float(c) for c in rng.uniform(0, 255, 3)]
        cx, cy = int(rng.uniform(0, width)), int(rng.uniform(0, height))
        if rng.uniform() < 0.5:
            r = int(rng.uniform(0.02, 0.15) * scale)
            cv2.circle(img, (cx, cy), max(r, 1), colour, -1, cv2.LINE_AA)
        else:
            axes = (max(int(rng.uniform(0.02, 0.2) * scale), 1),
                    max(int(rng.uniform(0.02, 0.1) * scale), 1))
            cv2.ellipse(img, (cx, cy), axes, float(rng.uniform(0, 180)), 0, 360, colour, -1,
                        cv2.LINE_AA)
    img = cv2.GaussianBlur(img, (0, 0), max(scale / 1080 * 1.5, 0.5))
    # Texture: noise blurred to a few pixels (foliage, fabric), then per-pixel noise.
    texture = cv2.GaussianBlur(rng.normal(0, 1, (height, width, 1)).astype(np.float32), (0, 0),
                               1.2)
    img += 20 * texture.reshape(height, width, 1)
    img += rng.normal(0, 3.5, img.shape).astype(np.float32)
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def exif(orientation):
    """A little-endian TIFF block whose first IFD holds the EXIF orientation tag."""
    return (b"II" + struct.pack("<HIH", 42, 8, 1) +
            struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack("<I", 0))


def tagged(data, orientation):
    """The JPEG (an APP1 segment after SOI) or PNG (an eXIf chunk after IHDR) with the tag."""
    tiff = exif(orientation)
    if data[:2] == b"\xff\xd8":
        payload = b"Exif\0\0" + tiff
        return data[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + data[2:]
    chunk = (struct.pack(">I", len(tiff)) + b"eXIf" + tiff +
             struct.pack(">I", zlib.crc32(b"eXIf" + tiff)))
    return data[:33] + chunk + data[33:]


def encode(rgb, ext, *params):
    ok, buf = cv2.imencode(ext, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR) if rgb.ndim == 3 and
                           rgb.shape[2] == 3 else rgb, list(params))
    assert ok, ext
    return buf.tobytes()


@dataclasses.dataclass
class Input:
    name: str                     # "1920x1080 JPEG q90"
    ref: pb.ImageRef              # as sent
    pixels: np.ndarray            # as OpenCV decodes it (HxWxC)
    encoded: Optional[bytes]      # the file, None for raw


def make_inputs(seed):
    cache = {}

    def rgb(w, h):
        if (w, h) not in cache:
            cache[w, h] = photo(w, h, seed)
        return cache[w, h]

    def encoded(name, data):
        return Input(name, pb.ImageRef(encoded=pb.EncodedImage(data=data)),
                     e2e_peer.decode(data), data)

    def raw(name, a):
        layout = pb.ImageLayout(width=a.shape[1], height=a.shape[0], channels=a.shape[2],
                                format=pb.SAMPLE_FORMAT_UINT8)
        return Input(name, pb.ImageRef(raw=pb.RawImage(layout=layout, data=a.tobytes())), a, None)

    jpeg90 = (cv2.IMWRITE_JPEG_QUALITY, 90)
    return {
        "thumb": lambda: encoded("256x256 JPEG q90", encode(rgb(256, 256), ".jpg", *jpeg90)),
        "1080jpg": lambda: encoded("1920x1080 JPEG q90", encode(rgb(1920, 1080), ".jpg", *jpeg90)),
        # A portrait photo from a phone: stored 1920x1080 with EXIF orientation 6, shown 1080x1920.
        "1080jpg6": lambda: encoded("1920x1080 JPEG q90, EXIF orientation 6", tagged(
            encode(rgb(1920, 1080), ".jpg", *jpeg90), 6)),
        "1080png": lambda: encoded("1920x1080 PNG", encode(rgb(1920, 1080), ".png")),
        "2160jpg": lambda: encoded("3840x2160 JPEG q90", encode(rgb(3840, 2160), ".jpg", *jpeg90)),
        "540raw": lambda: raw("960x540 raw RGB uint8", rgb(960, 540)),
        "1080grey": lambda: encoded("1920x1080 grey PNG", encode(
            cv2.cvtColor(rgb(1920, 1080), cv2.COLOR_RGB2GRAY), ".png")),
    }


# ---- rows ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Row:
    name: str
    input: str                                   # key of make_inputs
    analyses: Callable                           # (decoded pixels) -> [(name, options)]
    analyze: bool = False                        # one Analyze call, else the analysis's own RPC


def _compact_options(pixels):
    """Luma at or above its 90th percentile: about 10% of the pixels pass."""
    lo = float(np.quantile(e2e_peer.luma(pixels), 0.9))
    return dict(lo=lo, hi=255.0, source="luma")


HIST = ("histogram", dict(bins=256))
BOX = ("box_filter", dict(rx=3, ry=3))

ROWS = [
    Row("histogram 256x256 JPEG", "thumb", lambda p: [HIST]),
    Row("histogram 1080p JPEG q90", "1080jpg", lambda p: [HIST]),
    Row("histogram 1080p JPEG q90 tagged 6 (portrait)", "1080jpg6", lambda p: [HIST]),
    Row("histogram 1080p PNG", "1080png", lambda p: [HIST]),
    Row("histogram 2160p JPEG q90", "2160jpg", lambda p: [HIST]),
    Row("histogram 960x540 raw", "540raw", lambda p: [HIST]),
    Row("box filter 7x7 1080p JPEG, pixels back", "1080jpg", lambda p: [BOX]),
    Row("integral image 1080p grey PNG, table back", "1080grey",
        lambda p: [("integral_image", {})]),
    Row("compaction luma >= p90 1080p JPEG", "1080jpg",
        lambda p: [("compaction", _compact_options(p))]),
    Row("Analyze: all four, 1080p JPEG", "1080jpg",
        lambda p: [HIST, BOX, ("integral_image", {}), ("compaction", _compact_options(p))],
        analyze=True),
]


def local_call(analyses, inp: Input):
    """The floor: decode (for files) and the peer's own analysis functions, in this process."""
    img = e2e_peer.decode(inp.encoded) if inp.encoded is not None else \
        np.frombuffer(inp.ref.raw.data, np.uint8).reshape(inp.pixels.shape)
    out = []
    for name, o in analyses:
        if name == "histogram":
            out.append(e2e_peer.histogram(img, o.get("bins", 256)))
        elif name == "box_filter":
            out.append(e2e_peer.box_filter(img, o["rx"], o["ry"]))
        elif name == "integral_image":
            out.append(e2e_peer.integral_image(img)[0])
        else:
            out.append(e2e_peer.compact(img, o["lo"], o["hi"], source=o["source"]))
    return out


# Each analysis: its request from the row's options, and the arrays read from its answer (the
# messages its own RPC streams, which Analyze carries too), read the way a client reads them: each
# bytes field once, straight into a preallocated array.

def _request(name, o):
    if name == "histogram":
        return pb.HistogramRequest(options=pb.HistogramOptions(bins=o.get("bins", 256)))
    if name == "box_filter":
        return pb.BoxFilterRequest(options=pb.BoxFilterOptions(rx=o["rx"], ry=o["ry"]),
                                   encoding=pb.PIXEL_ENCODING_RAW)
    if name == "integral_image":
        return pb.IntegralImageRequest()
    return pb.CompactRequest(options=pb.CompactOptions(
        lo=o["lo"], hi=o["hi"],
        source=pb.COMPACT_SOURCE_LUMA if o["source"] == "luma" else pb.COMPACT_SOURCE_CHANNEL))


_SAMPLE = {pb.SAMPLE_FORMAT_UINT8: np.dtype("u1"), pb.SAMPLE_FORMAT_UINT16: np.dtype("<u2"),
           pb.SAMPLE_FORMAT_FLOAT32: np.dtype("<f4")}


def _read_histogram(messages):
    r = messages[-1]
    return (np.array([h.counts for h in r.histograms], np.uint64).reshape(-1, r.bins),), r.timing


def _read_box_filter(messages):
    header = messages[0].header
    data = np.empty(header.data_bytes, np.uint8)
    at = 0
    for m in messages[1:-1]:
        chunk = m.chunk
        data[at:at + len(chunk)] = np.frombuffer(chunk, np.uint8)
        at += len(chunk)
    if at != header.data_bytes or not messages[-1].HasField("timing"):
        raise RuntimeError(f"box filter: {at} of {header.data_bytes} bytes, or no timing")
    r = header.result
    return (data.view(_SAMPLE[r.format]).reshape(r.height, r.width, r.channels),), \
        messages[-1].timing


def _read_integral_image(messages):
    header = messages[0].header
    tables = [np.empty(header.table_bytes, np.uint8) for _ in range(2 if header.squared else 1)]
    row_bytes, got = header.width * header.channels * 8, 0
    for m in messages[1:-1]:
        c = m.chunk
        data = c.data
        off = c.y0 * row_bytes
        tables[int(c.squared)][off:off + len(data)] = np.frombuffer(data, np.uint8)
        got += len(data)
    if got != header.table_bytes * len(tables) or not messages[-1].HasField("trailer"):
        raise RuntimeError(f"integral image: {got} of {header.table_bytes} bytes, or no trailer")
    dtype = "<f8" if header.element == pb.INTEGRAL_ELEMENT_FLOAT64 else "<u8"
    shape = (header.height, header.width, header.channels)
    return tuple(t.view(dtype).reshape(shape) for t in tables), messages[-1].trailer.timing


def _read_compaction(messages):
    header = messages[0].header
    pixel = header.value_channels * _SAMPLE[header.value_format].itemsize
    xy = np.empty(header.returned * 8, np.uint8)
    values = np.empty(header.returned * pixel, np.uint8)
    got = 0
    for m in messages[1:-1]:
        c = m.chunk
        c_xy, c_values = c.xy, c.values
        n = len(c_xy) // 8
        xy[c.first * 8:(c.first + n) * 8] = np.frombuffer(c_xy, np.uint8)
        values[c.first * pixel:(c.first + n) * pixel] = np.frombuffer(c_values, np.uint8)
        got += n
    if got != header.returned or not messages[-1].HasField("timing"):
        raise RuntimeError(f"compaction: {got} of {header.returned} pixels, or no timing")
    return (xy.view("<u4").reshape(-1, 2),
            values.view(_SAMPLE[header.value_format]).reshape(-1, header.value_channels),
            np.uint64(header.total)), messages[-1].timing


_READ = {"histogram": _read_histogram, "box_filter": _read_box_filter,
         "integral_image": _read_integral_image, "compaction": _read_compaction}
_METHOD = {"histogram": ("Histogram", pb.HistogramResponse),
           "box_filter": ("BoxFilter", pb.BoxFilterResponse),
           "integral_image": ("IntegralImage", pb.IntegralImageResponse),
           "compaction": ("Compact", pb.CompactResponse)}


class Caller:
    """One row's call on one service: the request, serialized once, and the reading of the
    answer into arrays."""

    def __init__(self, analyses, ref: pb.ImageRef, analyze: bool):
        self.names = [n for n, _ in analyses]
        self.analyze = analyze
        if analyze:
            header = pb.AnalyzeHeader(image=ref)
            for name, o in analyses:
                getattr(header.analyses.add(), name).CopyFrom(_request(name, o))
            request = pb.AnalyzeRequest(header=header)
        else:
            request = _request(*analyses[0])
            request.image.CopyFrom(ref)
        # Serialized once: every call sends the same bytes to either service.
        self.wire = request.SerializeToString()

    def method(self, channel):
        ident = (lambda b: b)
        if self.analyze:
            return channel.stream_stream("/glimpse.v1.ImageAnalytics/Analyze",
                                         request_serializer=ident,
                                         response_deserializer=pb.AnalyzeResponse.FromString)
        name, response = _METHOD[self.names[0]]
        kind = channel.unary_unary if name == "Histogram" else channel.unary_stream
        return kind(f"/glimpse.v1.ImageAnalytics/{name}", request_serializer=ident,
                    response_deserializer=response.FromString)

    def __call__(self, rpc):
        """(the arrays of every result, the call's Timing)."""
        if not self.analyze:
            answer = rpc(self.wire, timeout=CALL_TIMEOUT_S)
            arrays, timing = _READ[self.names[0]](
                [answer] if self.names[0] == "histogram" else list(answer))
            return [arrays], timing
        parts = [[] for _ in self.names]
        timing = None
        for m in rpc(iter([self.wire]), timeout=CALL_TIMEOUT_S):
            part = m.WhichOneof("part")
            if part == "timing":
                timing = m.timing
            elif part != "kept":
                parts[m.index].append(getattr(m, part))
        if timing is None or not all(parts):
            raise RuntimeError("Analyze ended before every result and its timing")
        return [_READ[n](p)[0] for n, p in zip(self.names, parts)], timing


# ---- the services ---------------------------------------------------------------------------

def channel(address, own_connection=False):
    opts = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
    if own_connection:
        opts.append(("grpc.use_local_subchannel_pool", 1))
    return grpc.insecure_channel(address, options=opts)


class Service(ServerProcess):
    """A server process started on a free port, ready once its health check says SERVING (when it
    has one); stopped with SIGTERM."""

    def __init__(self, name, command, env=None, health=True):
        super().__init__(name, command, env=env)
        self.channel = channel(self.address)
        if health:
            check = _health.check_method(self.channel)
            deadline = time.monotonic() + 1800
            while True:
                try:
                    r = check(_health.HealthCheckRequest(), timeout=5)
                    if _health.status_name(r) == "SERVING":
                        break
                except grpc.RpcError:
                    pass
                if not self.running() or time.monotonic() > deadline:
                    self.stop()
                    sys.exit(f"e2e: {name} never said SERVING:\n{self.log_text()}")
                time.sleep(0.1)

    def info(self):
        return pb_grpc.ImageAnalyticsStub(self.channel).GetServerInfo(pb.GetServerInfoRequest(),
                                                                      timeout=30)


# ---- measuring --------------------------------------------------------------------------------

def latency(caller, rpcs, seconds, runs):
    """One caller, calls one after the other, alternating between the services (so that a
    shared machine's drifting load falls on both alike) for `seconds` each, at least `runs`
    each: per service, the times in ms and the Timings."""
    ms = [[] for _ in rpcs]
    timings = [[] for _ in rpcs]
    end = time.perf_counter() + seconds * len(rpcs)
    while len(ms[-1]) < runs or time.perf_counter() < end:
        for i, rpc in enumerate(rpcs):
            t0 = time.perf_counter()
            _, timing = caller(rpc)
            ms[i].append((time.perf_counter() - t0) * 1e3)
            timings[i].append(timing)
    return ms, timings


def cpu_seconds(pid):
    """User + system CPU time of process `pid` (all its threads) so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_ticks():
    """(all, idle) CPU time of the whole machine so far, in clock ticks, from /proc/stat: idle
    counts idle and waiting for I/O."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]


def _call_back_to_back(caller, address, callers, seconds, ready, start=None):
    """`callers` threads of this process, each on its own channel and connection, warmed by one
    call; after ready.wait() (every process's threads connected) they call back to back for
    `seconds` from start() (or the moment they were released). (calls, seconds the last one
    finished after the start, errors)."""
    channels = [channel(address, own_connection=True) for _ in range(callers)]
    rpcs = [caller.method(c) for c in channels]
    here = threading.Barrier(callers + 1)
    counts, errors = [0] * callers, []
    finished = [0.0] * callers
    t0 = [0.0]

    def work(i):
        try:
            caller(rpcs[i])
        except grpc.RpcError as e:
            errors.append(f"{e.code().name}: {e.details()}")
        here.wait()
        here.wait()  # t0[0] is set
        while time.perf_counter() < t0[0] + seconds:
            try:
                caller(rpcs[i])
                counts[i] += 1
            except grpc.RpcError as e:
                errors.append(f"{e.code().name}: {e.details()}")
        finished[i] = time.perf_counter()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    here.wait()
    ready.wait()
    t0[0] = time.perf_counter()
    if start is not None:
        start()
    here.wait()
    for t in threads:
        t.join()
    for c in channels:
        c.close()
    return sum(counts), max(finished) - t0[0], errors


def _client_process(caller, address, callers, seconds, ready, results):
    """One client process of a throughput cell (--client-processes)."""
    results.put(_call_back_to_back(caller, address, callers, seconds, ready))


def throughput(caller, address, callers, seconds, pid, processes=1):
    """Completed calls per second of `callers` callers calling back to back for `seconds`, each
    on its own channel and connection (connected and warmed by one call before the clock
    starts), as threads of this process or spread over `processes` client processes (one Python
    process's grpcio tops out near 1300 small calls/s, under what a server on a GPU machine
    answers); the server's (process `pid`) CPU ms per completed call over those seconds; the
    share of the machine's CPU time that was idle over them (%); and the calls that failed."""
    processes = max(1, min(processes, callers))
    cpu0 = [0.0]
    ticks0 = [(0, 0)]

    def start():
        cpu0[0] = cpu_seconds(pid)
        ticks0[0] = machine_cpu_ticks()

    if processes == 1:
        calls, elapsed, errors = _call_back_to_back(
            caller, address, callers, seconds, threading.Barrier(1), start)
    else:
        mp = multiprocessing.get_context("spawn")  # no fork of a process that runs gRPC
        ready, results = mp.Barrier(processes + 1), mp.Queue()
        shares = [callers // processes + (i < callers % processes) for i in range(processes)]
        procs = [mp.Process(target=_client_process,
                            args=(caller, address, n, seconds, ready, results)) for n in shares]
        for proc in procs:
            proc.start()
        ready.wait()
        start()
        parts = [results.get() for _ in procs]
        for proc in procs:
            proc.join()
        calls = sum(p[0] for p in parts)
        elapsed = max(p[1] for p in parts)
        errors = [e for p in parts for e in p[2]]
    cpu = cpu_seconds(pid) - cpu0[0]
    ticks, idle = (b - a for a, b in zip(ticks0[0], machine_cpu_ticks()))
    return calls / elapsed, cpu * 1e3 / max(calls, 1), 100 * idle / max(ticks, 1), errors


class Profile:
    """`perf record -a` over the throughput cells of one caller count (--profile), so that a row
    under its bar shows where the machine's CPUs went: per process (the service, this client,
    the rest) and, inside each, per thread name and shared object. Needs perf and the right to
    profile every CPU (root, or kernel.perf_event_paranoid <= -1)."""

    def __init__(self, out_dir, callers, frequency):
        self.dir = pathlib.Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.callers, self.frequency = callers, frequency

    def record(self, name, cell):
        """Runs cell() under perf; returns its result and the profile's breakdown."""
        data = self.dir / f"{name}.data"
        perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(self.frequency), "-o",
                                 str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.5)  # perf's own start-up, outside the cell
        if perf.poll() is not None:
            sys.exit(f"perf record failed: {perf.stderr.read().decode().strip()}")
        try:
            result = cell()
        finally:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        return result, data

    def breakdown(self, data, pids, calls):
        """{process: {"ms": CPU ms per call, "split": {what for: ms per call}, "top": [(thread,
        object, ms per call), ...12 largest]}} for each of `pids` (name -> pid: "glimpse",
        "peer", "client") and "other" (every other process, idle excluded)."""
        # perf report's --pid filter misattributes threads that started before the recording;
        # each sample's own pid is exact.
        out = subprocess.run(["perf", "script", "-i", str(data), "-F", "pid,comm,ip,dso", "-G"],
                             capture_output=True, text=True).stdout
        counts = {}
        for line in out.splitlines():
            m = re.match(r"\s*(.+?)\s+(\d+)\s+[0-9a-f]+\s+\((.*)\)\s*$", line)
            if not m:
                continue
            comm, pid, dso = m.group(1), int(m.group(2)), m.group(3)
            dso = re.sub(r"^.*/", "", re.sub(r"\.so\.[0-9.]+$", ".so", dso))
            # Code generated at run time: llvmpipe's compiled shaders.
            dso = re.sub(r"^(\[JIT\] tid \d+|perf-\d+\.map)$", "[JIT]", dso)
            counts[pid, comm, dso] = counts.get((pid, comm, dso), 0) + 1

        def samples(pid):
            return sorted(((n, c, d) for (p, c, d), n in counts.items() if p == pid),
                          reverse=True)

        per_call = 1e3 / self.frequency / max(calls, 1)
        result, accounted = {}, set()
        for name, pid in pids.items():
            rows = samples(pid)
            accounted.add(pid)
            split = {}
            for n, c, d in rows:
                what = category(name, c, d)
                split[what] = split.get(what, 0) + n * per_call
            result[name] = dict(ms=sum(n for n, _, _ in rows) * per_call, split=split,
                                top=[(c, d, n * per_call) for n, c, d in rows[:12]])
        other = sum(n for (p, _, _), n in counts.items() if p not in accounted and p != 0)
        result["other"] = dict(ms=other * per_call, top=[])
        return result


def percentile(values, q):
    return float(np.percentile(values, q, method="higher"))


def compare(a, b):
    """'equal', or how the result arrays differ."""
    if len(a) != len(b):
        return f"DIFFERENT ({len(a)} results against {len(b)})"
    notes = []
    for i, (ra, rb) in enumerate(zip(a, b)):
        for x, y in zip(ra, rb):
            x, y = np.asarray(x), np.asarray(y)
            if x.shape != y.shape:
                notes.append(f"#{i} shape {x.shape} vs {y.shape}")
            elif not np.array_equal(x, y):
                d = np.abs(x.astype(np.float64) - y.astype(np.float64))
                notes.append(f"#{i} {np.count_nonzero(d) / d.size:.2%} differ, max {d.max():g}")
    return "equal" if not notes else "DIFFERENT (" + "; ".join(notes) + ")"


def check_row(row, inp, analyses, g_rpc_for, g_out, p_out):
    """The row's check: equal, or the differences and, for files, where they come from."""
    verdict = compare(g_out, p_out)
    if verdict == "equal" or inp.encoded is None:
        return verdict
    # Glimpse's decoded pixels: a box filter of radius 0 returns them unchanged.
    ident = Caller([("box_filter", dict(rx=0, ry=0))], inp.ref, False)
    (g_pixels,), _ = ident(ident.method(g_rpc_for))
    g_pixels = g_pixels[0]
    d = np.abs(g_pixels.astype(np.int16) - inp.pixels.astype(np.int16))
    raw = pb.ImageRef(raw=pb.RawImage(
        layout=pb.ImageLayout(width=inp.pixels.shape[1], height=inp.pixels.shape[0],
                              channels=inp.pixels.shape[2], format=pb.SAMPLE_FORMAT_UINT8),
        data=np.ascontiguousarray(inp.pixels).tobytes()))
    on_raw = Caller(analyses, raw, row.analyze)
    g_raw, _ = on_raw(on_raw.method(g_rpc_for))
    same = compare(g_raw, p_out)
    return (f"DIFFERENT: the decoders' pixels differ in {np.count_nonzero(d) / d.size:.1%} of "
            f"samples (by at most {d.max()}); on OpenCV's pixels sent raw: {same}")


def run_row(row, inp, glimpse_svc, peer_svc, args):
    analyses = row.analyses(inp.pixels)
    caller = Caller(analyses, inp.ref, row.analyze)
    r = dict(row=row.name, input=inp.name, input_bytes=len(inp.ref.SerializeToString()),
             load=os.getloadavg()[0])
    services = (("glimpse", glimpse_svc), ("peer", peer_svc))
    rpcs = [caller.method(svc.channel) for _, svc in services]
    outs = {}
    for (key, _), rpc in zip(services, rpcs):
        outs[key], _ = caller(rpc)  # warm-up, and the answer to check
        caller(rpc)
    all_ms, all_timings = latency(caller, rpcs, args.seconds, args.runs)
    for (key, _), ms, timings in zip(services, all_ms, all_timings):
        med = {f: statistics.median(getattr(t, f) for t in timings) * 1e-6
               for f in ("decode_ns", "upload_ns", "queue_ns", "gpu_ns", "server_ns")}
        r[key] = dict(p50=percentile(ms, 50), p99=percentile(ms, 99), calls=len(ms),
                      decode=med["decode_ns"], upload=med["upload_ns"], queue=med["queue_ns"],
                      gpu=med["gpu_ns"], server=med["server_ns"],
                      rest=med["server_ns"] - med["decode_ns"] - med["upload_ns"] -
                      med["queue_ns"] - med["gpu_ns"],
                      client_wire=percentile(ms, 50) - med["server_ns"])
    for n in args.callers:
        for key, svc in services:
            if key == "glimpse":
                before = svc.info()
            def cell():
                return throughput(caller, svc.address, n, args.seconds, svc.proc.pid,
                                  args.client_processes)
            if args.profile and n == args.profile.callers:
                name = re.sub(r"[^a-z0-9]+", "-", f"{row.name} {key}".lower())
                (rate, cpu_ms, idle, errors), data = args.profile.record(name, cell)
                r[key]["profile"] = args.profile.breakdown(
                    data, {key: svc.proc.pid, "client": os.getpid()}, rate * args.seconds)
            else:
                rate, cpu_ms, idle, errors = cell()
            r[key][f"rps{n}"] = rate
            r[key][f"cpu_ms{n}"] = cpu_ms
            r[key][f"idle{n}"] = idle
            if key == "glimpse":
                # Images decoded into ordinary memory for want of staging room, and jobs that
                # waited for result buffer space: where a row's rate stops growing with callers.
                after = svc.info()
                r[key][f"staging_full{n}"] = after.staging_full - before.staging_full
                r[key][f"calls{n}"] = round(rate * args.seconds)
                r[key][f"result_peak{n}"] = after.result_buffer_peak_bytes
            if errors:
                r[key][f"errors{n}"] = sorted(set(errors))[:3] + [f"{len(errors)} in all"]
    for _ in range(2):  # the first call warms OpenCV up
        local_call(analyses, inp)
    ms = []
    end = time.perf_counter() + min(args.seconds, 2)
    while len(ms) < args.runs or time.perf_counter() < end:
        t0 = time.perf_counter()
        local_call(analyses, inp)
        ms.append((time.perf_counter() - t0) * 1e3)
    r["local"] = dict(p50=percentile(ms, 50), calls=len(ms))
    r["check"] = check_row(row, inp, analyses, glimpse_svc.channel, outs["glimpse"], outs["peer"])
    return r


# ---- output -----------------------------------------------------------------------------------

def format_row(r, callers):
    g, p = r["glimpse"], r["peer"]
    rates = "  ".join(f"@{n} {g[f'rps{n}']:.1f}/{p[f'rps{n}']:.1f} req/s" for n in callers)
    n = callers[-1]
    rates += f" | server CPU ms/call @{n} {g[f'cpu_ms{n}']:.2f}/{p[f'cpu_ms{n}']:.2f}"
    rates += f" | G no staging room @{n} {g[f'staging_full{n}']} of ~{g[f'calls{n}']}"
    rates += " | idle % " + "  ".join(f"@{c} {g[f'idle{c}']:.1f}/{p[f'idle{c}']:.1f}"
                                      for c in callers)
    return (f"{r['row']:<44} G p50 {g['p50']:8.1f} p99 {g['p99']:8.1f} | peer p50 {p['p50']:8.1f} "
            f"p99 {p['p99']:8.1f} | local {r['local']['p50']:7.1f} ms | {rates} | G split "
            f"dec {g['decode']:.1f} up {g['upload']:.1f} q {g['queue']:.1f} gpu {g['gpu']:.1f} "
            f"rest {g['rest']:.1f} | {r['check']}")


def markdown(rows, header, command, callers):
    rate_cols = "".join(f" Glimpse req/s @{n} | peer req/s @{n} | G/P @{n} |" for n in callers)
    out = [f"| row | input (request bytes) | Glimpse p50 / p99 ms (calls) | peer p50 / p99 ms "
           f"(calls) | "
           f"G/P p50 | local ms |{rate_cols} Glimpse server ms: decode / upload / queue / GPU / "
           f"rest | client+wire ms: Glimpse / peer | server CPU ms per call @{callers[-1]}: "
           f"Glimpse / peer | Glimpse images without staging room @{callers[-1]} (of calls) | "
           f"machine idle % {' / '.join(f'@{c}' for c in callers)}: Glimpse; peer | "
           f"same answer |",
           "|---|---|---:|---:|---:|---:|" + "---:|" * (3 * len(callers)) +
           "---|---|---|---:|---|---|"]
    n = callers[-1]
    idles = [f"idle{c}" for c in callers]
    for r in rows:
        g, p = r["glimpse"], r["peer"]
        rates = "".join(f" {g[f'rps{n}']:.1f} | {p[f'rps{n}']:.1f} | "
                        f"{g[f'rps{n}'] / p[f'rps{n}']:.2f}x |" for n in callers)
        errors = "; ".join(f"{k} errors @{n}: {', '.join(v[f'errors{n}'])}"
                           for k, v in (("Glimpse", g), ("peer", p)) for n in callers
                           if f"errors{n}" in v)
        out.append(
            f"| {r['row']} | {r['input']} ({r['input_bytes'] / 1e3:.0f} kB) | "
            f"{g['p50']:.1f} / {g['p99']:.1f} ({g['calls']}) | "
            f"{p['p50']:.1f} / {p['p99']:.1f} ({p['calls']}) | "
            f"{g['p50'] / p['p50']:.2f}x | {r['local']['p50']:.1f} |{rates} "
            f"{g['decode']:.1f} / {g['upload']:.1f} / {g['queue']:.1f} / {g['gpu']:.1f} / "
            f"{g['rest']:.1f} | {g['client_wire']:.1f} / {p['client_wire']:.1f} | "
            f"{g[f'cpu_ms{n}']:.2f} / {p[f'cpu_ms{n}']:.2f} | "
            f"{g[f'staging_full{n}']} ({g[f'calls{n}']}) | "
            f"{' / '.join(f'{g[idle]:.1f}' for idle in idles)}; "
            f"{' / '.join(f'{p[idle]:.1f}' for idle in idles)} | {r['check']}"
            f"{' ' + errors if errors else ''} |")
    loads = [r["load"] for r in rows]
    load = (f"Load average (1 min) of the machine as each row started: {min(loads):.1f} to "
            f"{max(loads):.1f} on {os.cpu_count()} CPUs (this run's processes included).")
    return "\n".join([*header, load, "", f"`{command}`", "", *out, "", *NOTES, ""])


# gRPC's threads in a callback-API server (names cut to 15 characters by the kernel).
GRPC_THREADS = ("nexting_thread", "default-executo", "grpc_global_tim")


def category(service, thread, obj):
    """What a (thread, shared object) share of a service's CPU time was for."""
    if service == "glimpse":
        return {"gl-driver": "kernels (llvmpipe)", "glimpse-host": "decode",
                "glimpse-gpu": "GL thread (upload, read-back, dispatch)"}.get(
            thread, "gRPC" if thread.startswith(GRPC_THREADS) else "other")
    if re.match(r"libopencv_(imgproc|core)", obj):
        return "analysis (OpenCV)"
    if re.match(r"lib(jpeg|png|z|webp|opencv_imgcodecs)", obj):
        return "decode"
    if obj.startswith("_multiarray_umath"):
        return "numpy"
    if obj == "[kernel.kallsyms]":
        return "kernel (page faults, sockets)"
    return "Python, gRPC, other"


def profile_markdown(rows, callers):
    """Per profiled row and service: CPU ms per call of the service, the client and the rest of
    the machine, then the service's and the client's largest (thread, shared object) shares."""
    out = [f"CPU ms per call over the throughput cell with {callers} callers (perf record -a: "
           "every CPU, idle left out). Thread names as the kernel reports them: gl-driver, "
           "llvmpipe's threads, running [JIT] (the shaders it compiled); glimpse-gpu, the thread "
           "that owns the GL context; glimpse-host, the decoders; nexting_thread and "
           "default-executo, gRPC's threads (reading requests, writing answers); python, the "
           "client's and the peer's threads.", "",
           "| row | service | service ms | what for, ms | client ms | other ms | the service's "
           "largest shares: thread / object ms | the client's largest shares |",
           "|---|---|---:|---|---:|---:|---|---|"]

    def top(entries, n):
        return "; ".join(f"{c} / {d} {ms:.2f}" for c, d, ms in entries[:n])
    for r in rows:
        for key in ("glimpse", "peer"):
            prof = r[key].get("profile")
            if not prof:
                continue
            split = "; ".join(f"{k} {v:.2f}" for k, v in
                              sorted(prof[key]["split"].items(), key=lambda kv: -kv[1]))
            out.append(f"| {r['row']} | {key} | {prof[key]['ms']:.2f} | {split} | "
                       f"{prof['client']['ms']:.2f} | {prof['other']['ms']:.2f} | "
                       f"{top(prof[key]['top'], 6)} | {top(prof['client']['top'], 3)} |")
    return "\n".join(out) + "\n"


NOTES = [
    "Latency: one caller, calls one after the other, alternating between Glimpse and the peer; "
    "p99 is the highest of the calls but one percent (with under 100 calls, the slowest). "
    "G/P p50: Glimpse's p50 over the peer's (under 1: Glimpse answers sooner). req/s @N: N "
    "callers calling back to back (threads of the client processes the header names), each on "
    "its own channel and connection; "
    "G/P @N: Glimpse's rate over the peer's (over 1: Glimpse serves more). The client, Glimpse "
    "and the peer share the same CPUs.",
    "",
    "Local: the floor, the peer's own decode and analysis in the client's process (no gRPC, no "
    "copy into messages). Glimpse server ms: medians of the Timing of the one-caller calls; rest "
    "= server - decode - upload - queue - GPU (below 0 where the parts' spans overlap). "
    "Server CPU ms per call: the service process's user + system CPU time (/proc) over the "
    "calls completed in the throughput cell with the most callers; 1000 / it is the photos per "
    "second one core of that server answers. Images without staging room: those of that cell "
    "that Glimpse decoded into ordinary memory because its staging memory (--staging-bytes) was "
    "full (ServerInfo.staging_full), beside the cell's calls. Machine idle: the share of all "
    "CPUs' time (/proc/stat: idle and I/O wait) that no process used over each throughput cell; "
    "where a service leaves CPUs idle with callers waiting, its rate is not the CPUs' limit. "
    "client+wire: p50 latency - the server's median own time (serializing, the loopback "
    "connection, reading the answer into numpy).",
    "",
    "Same answer: the arrays of Glimpse's and the peer's answers compared exactly once per row. "
    "Where a JPEG decodes to different pixels (Glimpse's decoder is not OpenCV's libjpeg), the "
    "row says how many samples differ (Glimpse's pixels fetched back with a box filter of radius "
    "0) and compares Glimpse's answer on OpenCV's pixels sent raw with the peer's. The peer's "
    "box filter is cv2.blur where it rounds as Glimpse does, floor(sum / area + 1/2), for every "
    "window sum (checked once per window size; true for 7x7), else exact window sums "
    "rounded in numpy. Compaction passes lo <= luma <= 255 (both bounds inclusive, as Glimpse "
    "defines it), lo the luma's 90th percentile.",
]


def machine():
    model = platform.processor() or "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC")


def git_commit(before=None):
    """HEAD, or the last commit made before the time `before` (seconds), with its subject."""
    args = ["git", "-C", str(HERE), "log", "-1", "--format=%h (%s)"]
    if before is not None:
        args.append(f"--before=@{int(before)}")
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--server-binary", required=True, help="the glimpse-server to start")
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="seconds per cell (latency, each throughput), default %(default)s")
    ap.add_argument("--runs", type=int, default=5,
                    help="at least this many one-caller calls per cell (default %(default)s)")
    ap.add_argument("--callers", default="4,16",
                    help="concurrent callers of the throughput columns (default %(default)s)")
    ap.add_argument("--client-processes", type=int, default=1,
                    help="client processes the throughput columns' callers are spread over "
                         "(default %(default)s: threads of this process)")
    ap.add_argument("--rows", default="", help="regular expression on the row names")
    ap.add_argument("--peer-workers", type=int, default=8,
                    help="the peer's gRPC worker threads (default %(default)s)")
    ap.add_argument("--seed", type=int, default=1, help="test image seed (default 1)")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="a flag passed on to glimpse-server, e.g. --server-arg=--staging-bytes=0 "
                         "(repeatable)")
    ap.add_argument("--profile", metavar="DIR",
                    help="profile the machine (perf record -a -g) over the throughput cells of "
                         "--profile-callers callers; perf data and a table per row go to DIR")
    ap.add_argument("--profile-callers", type=int, default=4,
                    help="the throughput column to profile (default %(default)s)")
    ap.add_argument("--profile-frequency", type=int, default=997,
                    help="perf samples per second per CPU (default %(default)s)")
    ap.add_argument("--markdown", help="also write the table as markdown to this file")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    if args.seconds <= 0:
        ap.error(f"--seconds must be positive, got {args.seconds}")
    try:
        args.callers = [int(c) for c in args.callers.split(",")]
        if any(c < 1 for c in args.callers):
            raise ValueError
    except ValueError:
        ap.error(f"--callers takes positive integers N,M,..., got {args.callers!r}")
    if not 1 <= args.peer_workers <= 256:
        ap.error(f"--peer-workers must be in [1, 256], got {args.peer_workers}")
    if args.profile:
        if args.profile_callers not in args.callers:
            ap.error(f"--profile-callers {args.profile_callers} is not one of --callers "
                     f"{args.callers}")
        args.profile = Profile(args.profile, args.profile_callers, args.profile_frequency)
    rows = [r for r in ROWS if re.search(args.rows, r.name)]
    if not rows:
        ap.error(f"--rows {args.rows!r} matches none of: {', '.join(r.name for r in ROWS)}")
    threads = int(os.environ.get("LP_NUM_THREADS") or os.cpu_count())
    cv2.setNumThreads(threads)
    print(f"images: seed {args.seed}", flush=True)
    inputs = make_inputs(args.seed)
    made = {}

    env = dict(os.environ, LP_NUM_THREADS=str(threads))
    g = Service("glimpse", [args.server_binary, "--listen=127.0.0.1:0", "--log-level=info",
                            f"--max-message-bytes={MAX_MESSAGE_BYTES}", *args.server_arg], env=env)
    results = []
    try:
        p = Service("peer", [sys.executable, str(HERE / "e2e_peer.py"), "--listen=127.0.0.1:0",
                             f"--workers={args.peer_workers}", f"--threads={threads}"],
                    env=env, health=False)
        try:
            info = g.info()
            built = os.path.getmtime(args.server_binary)
            now = time.time()
            header = [
                f"Machine: {machine()}. Glimpse {info.version}: renderer {info.renderer} "
                f"({info.gl_version}), LP_NUM_THREADS={threads}, warm-up {info.warm_up_ms} ms. "
                f"Peer: bench/e2e_peer.py, grpcio {grpc.__version__}, OpenCV {cv2.__version__}, "
                f"cv2.setNumThreads({threads}), {args.peer_workers} gRPC workers. Python "
                f"{platform.python_version()}, numpy {np.__version__}.",
                f"Run {utc(now)} at {git_commit()}; the server binary was built {utc(built)}, "
                f"when the last commit was {git_commit(built)}. "
                f"Server flags added: {' '.join(args.server_arg) or 'none'}. "
                f"Images: seed {args.seed}. Per cell: {args.seconds:g} s, at least "
                f"{args.runs} calls; throughput callers each on their own channel and "
                f"connection, "
                + (f"spread over {args.client_processes} client processes."
                   if args.client_processes > 1 else "threads of one client process."),
            ]
            print("\n".join(header), flush=True)
            for row in rows:
                if row.input not in made:
                    made[row.input] = inputs[row.input]()
                    inp = made[row.input]
                    print(f"  {inp.name}: {len(inp.encoded or inp.ref.raw.data)} bytes",
                          flush=True)
                r = run_row(row, made[row.input], g, p, args)
                results.append(r)
                print(format_row(r, args.callers), flush=True)
        finally:
            p.stop()
    finally:
        g.stop()
    command = "bench/e2e.py " + " ".join(sys.argv[1:])
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(results, header, command, args.callers))
    if args.profile:
        table = profile_markdown(results, args.profile.callers)
        (args.profile.dir / "profile.md").write_text(table)
        print(table, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(header=header, command=command, rows=results), f, indent=1)


if __name__ == "__main__":
    main()
