"""glimpse.Client: every RPC of glimpse.v1.ImageAnalytics, with numpy arrays in and out."""
import contextlib
import itertools
import os
import re
from typing import Iterator, List, Optional, Union

import grpc
import numpy as np

from glimpse import _health
from glimpse._types import (AnalyzeResult, BoxFilterResult, CompactResult, GlimpseError,
                            HistogramResult, ImageHandle, IntegralResult, Timing, dtype_of_format,
                            raw_pixels)
from glimpse.v1 import image_analytics_pb2 as pb
from glimpse.v1 import image_analytics_pb2_grpc as pb_grpc

ImageLike = Union[ImageHandle, str, os.PathLike, bytes, bytearray, memoryview, np.ndarray]

_ID = re.compile(r"[0-9a-f]{32}")
_CHUNK = 1 << 20  # upload message size (the proto suggests 1 MiB)
_HISTOGRAM_SOURCES = {"all": pb.HISTOGRAM_SOURCE_ALL_CHANNELS, "channel": pb.HISTOGRAM_SOURCE_CHANNEL,
                      "luma": pb.HISTOGRAM_SOURCE_LUMA, "rgb_mean": pb.HISTOGRAM_SOURCE_RGB_MEAN}
_COMPACT_SOURCES = {"channel": pb.COMPACT_SOURCE_CHANNEL, "luma": pb.COMPACT_SOURCE_LUMA}
_BORDERS = {"reflect101": pb.BORDER_MODE_REFLECT101, "replicate": pb.BORDER_MODE_REPLICATE,
            "constant": pb.BORDER_MODE_CONSTANT}
_OUTPUTS = {"array": pb.PIXEL_ENCODING_RAW, "png": pb.PIXEL_ENCODING_PNG,
            "none": pb.PIXEL_ENCODING_NONE}


def _choice(name: str, value: str, table: dict) -> int:
    if value not in table:
        raise ValueError(f"{name} must be one of {', '.join(table)}, got {value!r}")
    return table[value]


def _data_loss(method: str, message: str) -> GlimpseError:
    return GlimpseError(method, grpc.StatusCode.DATA_LOSS, message)


# ---- each analysis: its request from keyword options, and its result from its response messages
# (the messages its own RPC streams, which Analyze also carries). One plan per analysis name.

def _histogram_plan(method, *, bins: int = 256, lo: Optional[float] = None,
                    hi: Optional[float] = None, source: Optional[str] = None,
                    channel: Optional[int] = None, variant: str = "auto"):
    if source is None:
        source = "all" if channel is None else "channel"
    options = pb.HistogramOptions(bins=bins, channel=channel or 0,
                                  source=_choice("source", source, _HISTOGRAM_SOURCES))
    if lo is not None:
        options.lo = lo
    if hi is not None:
        options.hi = hi

    def parse(messages) -> HistogramResult:
        r = None
        for r in messages:
            pass
        if r is None:
            raise _data_loss(method, "no histogram in the answer")
        counts = np.array([h.counts for h in r.histograms], dtype=np.uint64).reshape(-1, r.bins)
        return HistogramResult(counts=counts, bins=r.bins, lo=r.lo, hi=r.hi, total=r.total,
                               source=source, variant=r.variant,
                               image=ImageHandle.from_proto(r.image),
                               timing=Timing.from_proto(r.timing))

    return pb.HistogramRequest(options=options, variant=variant), parse


def _integral_image_plan(method, *, squared: bool = False, variant: str = "auto"):
    def parse(messages) -> IntegralResult:
        header = trailer = None
        tables, received = [None, None], [0, 0]
        for m in messages:
            part = m.WhichOneof("part")
            if part == "header":
                header = m.header
                for t in range(2 if header.squared else 1):
                    tables[t] = np.empty(header.table_bytes, np.uint8)
            elif part == "chunk":
                c = m.chunk
                data = c.data  # each read of a bytes field copies it
                t = 1 if c.squared else 0
                row_bytes = header.width * header.channels * 8 if header else 0
                off, n = c.y0 * row_bytes, len(data)
                if tables[t] is None or n != c.rows * row_bytes or off + n > header.table_bytes:
                    raise _data_loss(method, f"a band of rows {c.y0}+{c.rows} ({n} bytes) "
                                     "does not fit the table the header announced")
                tables[t][off:off + n] = np.frombuffer(data, np.uint8)
                received[t] += n
            elif part == "trailer":
                trailer = m.trailer
        if header is None or trailer is None:
            raise _data_loss(method, "the stream ended without its header or trailer")
        dtype = np.dtype("<f8" if header.element == pb.INTEGRAL_ELEMENT_FLOAT64 else "<u8")
        shape = (header.height, header.width, header.channels)
        out = []
        for t in range(2 if header.squared else 1):
            if received[t] != header.table_bytes:
                raise _data_loss(method, f"received {received[t]} of {header.table_bytes} bytes "
                                 f"of the {'squared' if t else 'sum'} table")
            out.append(tables[t].view(dtype).reshape(shape).astype(dtype.newbyteorder("="),
                                                                   copy=False))
        return IntegralResult(table=out[0], squared_table=out[1] if len(out) > 1 else None,
                              variant=trailer.variant, image=ImageHandle.from_proto(header.image),
                              timing=Timing.from_proto(trailer.timing))

    return pb.IntegralImageRequest(options=pb.IntegralImageOptions(squared=squared),
                                   variant=variant), parse


def _compaction_plan(method, *, lo: float, hi: float, outside: bool = False,
                     source: str = "channel", channel: int = 0, max_results: Optional[int] = None,
                     count_only: bool = False, variant: str = "auto"):
    options = pb.CompactOptions(source=_choice("source", source, _COMPACT_SOURCES),
                                channel=channel, lo=lo, hi=hi, outside=outside,
                                count_only=count_only)
    if max_results is not None:
        options.max_results = max_results

    def parse(messages) -> CompactResult:
        header = timing = None
        xy = values = None
        received = pixel_bytes = 0
        for m in messages:
            part = m.WhichOneof("part")
            if part == "header":
                header = m.header
                value_size = dtype_of_format(header.value_format).itemsize
                pixel_bytes = header.value_channels * value_size
                xy = np.zeros(header.returned * 8, np.uint8)
                values = np.zeros(header.returned * pixel_bytes, np.uint8)
                received = 0
            elif part == "chunk":
                c = m.chunk
                c_xy, c_values = c.xy, c.values  # each read of a bytes field copies it
                n = len(c_xy) // 8
                if header is None or c.first + n > header.returned or \
                        len(c_values) != n * pixel_bytes:
                    raise _data_loss(method, f"a chunk of {n} pixels at {c.first} does not "
                                     "fit the list the header announced")
                xy[c.first * 8:(c.first + n) * 8] = np.frombuffer(c_xy, np.uint8)
                values[c.first * pixel_bytes:(c.first + n) * pixel_bytes] = \
                    np.frombuffer(c_values, np.uint8)
                received += n
            elif part == "timing":
                timing = m.timing
        if header is None or timing is None:
            raise _data_loss(method, "the stream ended without its header or timing")
        if received != header.returned:
            raise _data_loss(method, f"received {received} of {header.returned} pixels")
        vdtype = dtype_of_format(header.value_format)
        return CompactResult(
            xy=xy.view("<u4").reshape(-1, 2).astype(np.uint32, copy=False),
            values=values.view(vdtype).reshape(-1, header.value_channels).astype(
                vdtype.newbyteorder("="), copy=False),
            total=header.total, truncated=header.truncated, variant=header.variant,
            image=ImageHandle.from_proto(header.image), timing=Timing.from_proto(timing))

    return pb.CompactRequest(options=options, variant=variant), parse


def _box_filter_plan(method, *, rx: int, ry: Optional[int] = None, border: str = "reflect101",
                     border_value: float = 0.0, keep: bool = False, label: str = "",
                     output: Optional[str] = None, variant: str = "auto"):
    if output is None:
        output = "none" if keep else "array"
    options = pb.BoxFilterOptions(rx=rx, ry=rx if ry is None else ry,
                                  border=_choice("border", border, _BORDERS),
                                  border_value=border_value)
    request = pb.BoxFilterRequest(options=options, variant=variant, keep=keep, label=label,
                                  encoding=_choice("output", output, _OUTPUTS))

    def parse(messages) -> BoxFilterResult:
        header = timing = data = None
        received = 0
        for m in messages:
            part = m.WhichOneof("part")
            if part == "header":
                header = m.header
                data = np.empty(header.data_bytes, np.uint8)
            elif part == "chunk":
                chunk = m.chunk  # each read of a bytes field copies it
                n = len(chunk)
                if data is None or received + n > len(data):
                    raise _data_loss(method, "more pixel bytes than the header announced")
                data[received:received + n] = np.frombuffer(chunk, np.uint8)
                received += n
            elif part == "timing":
                timing = m.timing
        if header is None or timing is None:
            raise _data_loss(method, "the stream ended without its header or timing")
        if received != header.data_bytes:
            raise _data_loss(method, f"received {received} of {header.data_bytes} bytes")
        pixels = png = None
        if output == "array":
            r = header.result
            dtype = dtype_of_format(r.format)
            pixels = data.view(dtype).reshape(r.height, r.width, r.channels).astype(
                dtype.newbyteorder("="), copy=False)
        elif output == "png":
            png = data.tobytes()
        return BoxFilterResult(pixels=pixels, png=png,
                               handle=ImageHandle.from_proto(header.result) if keep else None,
                               variant=header.variant, image=ImageHandle.from_proto(header.image),
                               timing=Timing.from_proto(timing))

    return request, parse


# Analyze's analyses by name (the proto's field names; "compact" as the method is called).
_PLANS = {"histogram": _histogram_plan, "integral_image": _integral_image_plan,
          "compaction": _compaction_plan, "compact": _compaction_plan,
          "box_filter": _box_filter_plan}
_FIELDS = {"compact": "compaction"}


def _pem(source) -> Optional[bytes]:
    """PEM bytes from bytes or a file path; None stays None."""
    if source is None:
        return None
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    with open(source, "rb") as f:
        return f.read()


class Client:
    """A connection to glimpse-server.

    target: "host:port" (default $GLIMPSE_SERVER, else localhost:50051), or any gRPC target such
    as "dns:///glimpse-headless:50051"; round_robin=True then spreads calls over every address.
    tls_ca: a PEM file path or PEM bytes to trust (TLS), or True for the system's roots.
    tls_cert, tls_key: a client certificate and its private key (PEM file paths or PEM bytes) for
    a server with --tls-client-ca (mutual TLS); they imply TLS with the system's roots unless
    tls_ca says otherwise.
    token: sent as "authorization: Bearer TOKEN" metadata on every call, for a server with
    --tokens (default $GLIMPSE_TOKEN; "" sends none).
    timeout: each call's deadline in seconds (None: none).
    inline_bytes: arrays and files up to this size travel inside the analysis request; larger
    ones are uploaded, analysed by id and deleted (the server's message limit is 4 MiB).
    """

    def __init__(self, target: Optional[str] = None, *, tls_ca=None, tls_cert=None, tls_key=None,
                 token: Optional[str] = None, timeout: Optional[float] = 300.0,
                 round_robin: bool = False, inline_bytes: int = 3 << 20, options=()):
        target = target or os.environ.get("GLIMPSE_SERVER") or "localhost:50051"
        if token is None:
            token = os.environ.get("GLIMPSE_TOKEN")
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")
        opts = [("grpc.max_receive_message_length", 64 << 20)]
        if round_robin:
            opts.append(("grpc.lb_policy_name", "round_robin"))
        opts.extend(options)
        if tls_ca or tls_cert is not None:
            roots = None if tls_ca is True else _pem(tls_ca)
            creds = grpc.ssl_channel_credentials(root_certificates=roots,
                                                 private_key=_pem(tls_key),
                                                 certificate_chain=_pem(tls_cert))
            self._channel = grpc.secure_channel(target, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(target, options=opts)
        self._stub = pb_grpc.ImageAnalyticsStub(self._channel)
        self._health = _health.check_method(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._timeout = timeout
        self._inline_bytes = inline_bytes
        self.target = target

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- calls -------------------------------------------------------------------------------

    def _unary(self, method: str, rpc, request):
        try:
            return rpc(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc(method, e) from None

    def _stream(self, method: str, rpc, request) -> Iterator:
        call = rpc(request, timeout=self._timeout, metadata=self._metadata)
        try:
            yield from call
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc(method, e) from None
        finally:
            call.cancel()  # a no-op once the stream has ended; frees it when the caller stops

    def _upload(self, method: str, header, data: memoryview) -> ImageHandle:
        header.total_bytes = len(data)

        def messages():
            yield pb.UploadImageRequest(header=header, chunk=bytes(data[:_CHUNK]))
            for off in range(_CHUNK, len(data), _CHUNK):
                yield pb.UploadImageRequest(chunk=bytes(data[off:off + _CHUNK]))

        try:
            r = self._stub.UploadImage(messages(), timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc(method, e) from None
        return ImageHandle.from_proto(r.image)

    @contextlib.contextmanager
    def _image_ref(self, method: str, image: ImageLike) -> Iterator[pb.ImageRef]:
        """The ImageRef for `image`; a large array or file is stored for the call, then freed."""
        ref = pb.ImageRef()
        temporary = None
        if isinstance(image, ImageHandle):
            ref.image_id = image.image_id
        elif isinstance(image, str) and _ID.fullmatch(image) and not os.path.exists(image):
            ref.image_id = image
        elif isinstance(image, np.ndarray):
            layout, pixels = raw_pixels(image)
            if pixels.nbytes <= self._inline_bytes:
                ref.raw.layout.CopyFrom(layout)
                ref.raw.data = pixels.tobytes()
            else:
                temporary = self._upload(method, pb.UploadHeader(raw=layout),
                                         memoryview(pixels).cast("B"))
        else:
            data = self._encoded_bytes(image)
            if len(data) <= self._inline_bytes:
                ref.encoded.data = data
            else:
                temporary = self._upload(method, pb.UploadHeader(encoded=pb.EncodedUpload()),
                                         memoryview(data))
        if temporary is not None:
            ref.image_id = temporary.image_id
        try:
            yield ref
        finally:
            if temporary is not None:
                with contextlib.suppress(GlimpseError):
                    self.delete(temporary)

    @staticmethod
    def _encoded_bytes(image) -> bytes:
        if isinstance(image, (bytes, bytearray, memoryview)):
            return bytes(image)
        if isinstance(image, (str, os.PathLike)):
            with open(image, "rb") as f:
                return f.read()
        raise TypeError("image must be an ImageHandle, an image id, a numpy array, a path or "
                        f"encoded bytes, got {type(image).__name__}")

    # ---- the store ---------------------------------------------------------------------------

    def upload(self, image, *, label: Optional[str] = None, channels: int = 0) -> ImageHandle:
        """Stores an image: a numpy array (H, W) or (H, W, C) of uint8/uint16/float32, a path to
        an image file, or the bytes of one. `channels` (1-4) converts an encoded file on decode."""
        if isinstance(image, np.ndarray):
            if channels:
                raise ValueError(f"channels applies to encoded files, not arrays (got {channels})")
            layout, pixels = raw_pixels(image)
            header = pb.UploadHeader(raw=layout, label=label or "")
            return self._upload("upload", header, memoryview(pixels).cast("B"))
        if not 0 <= channels <= 4:
            raise ValueError(f"channels must be in [0, 4], got {channels}")
        if label is None:
            label = os.path.basename(os.fspath(image)) if isinstance(image, (str, os.PathLike)) else ""
        data = self._encoded_bytes(image)
        header = pb.UploadHeader(encoded=pb.EncodedUpload(desired_channels=channels), label=label)
        return self._upload("upload", header, memoryview(data))

    def image_info(self, image: Union[ImageHandle, str]) -> ImageHandle:
        image_id = image.image_id if isinstance(image, ImageHandle) else image
        return ImageHandle.from_proto(self._unary(
            "image_info", self._stub.GetImageInfo, pb.GetImageInfoRequest(image_id=image_id)))

    def list(self) -> List[ImageHandle]:
        """Stored images, most recently used first."""
        r = self._unary("list", self._stub.ListImages, pb.ListImagesRequest())
        return [ImageHandle.from_proto(i) for i in r.images]

    def delete(self, image: Union[ImageHandle, str]) -> int:
        """Frees a stored image; returns the bytes freed."""
        image_id = image.image_id if isinstance(image, ImageHandle) else image
        return self._unary("delete", self._stub.DeleteImage,
                           pb.DeleteImageRequest(image_id=image_id)).freed_bytes

    def info(self) -> pb.ServerInfo:
        """The server's version, device, limits, settings, queue and store (a ServerInfo)."""
        return self._unary("info", self._stub.GetServerInfo, pb.GetServerInfoRequest())

    def health(self, service: str = "") -> str:
        """The health service's answer: "SERVING", "NOT_SERVING", ..."""
        r = self._unary("health", self._health, _health.HealthCheckRequest(service=service))
        return _health.status_name(r)

    # ---- analyses ----------------------------------------------------------------------------

    def histogram(self, image: ImageLike, **options) -> HistogramResult:
        """Histograms over [lo, hi) (default the format's range): bins=256, lo, hi, source "all"
        (one per channel, the default), "channel", "luma" or "rgb_mean", channel, variant."""
        request, parse = _histogram_plan("histogram", **options)
        with self._image_ref("histogram", image) as ref:
            request.image.CopyFrom(ref)
            return parse([self._unary("histogram", self._stub.Histogram, request)])

    def integral_image(self, image: ImageLike, **options) -> IntegralResult:
        """The inclusive summed-area table (and that of squares, squared=True), (H, W, C) uint64
        or float64."""
        request, parse = _integral_image_plan("integral_image", **options)
        with self._image_ref("integral_image", image) as ref:
            request.image.CopyFrom(ref)
            return parse(self._stream("integral_image", self._stub.IntegralImage, request))

    def compact(self, image: ImageLike, lo: float, hi: float, **options) -> CompactResult:
        """The pixels whose value (a channel, or luma) lies in [lo, hi], or outside it
        (outside=True), in row-major order, with the exact total; source, channel, max_results,
        count_only, variant."""
        request, parse = _compaction_plan("compact", lo=lo, hi=hi, **options)
        with self._image_ref("compact", image) as ref:
            request.image.CopyFrom(ref)
            return parse(self._stream("compact", self._stub.Compact, request))

    def box_filter(self, image: ImageLike, rx: int, ry: Optional[int] = None,
                   **options) -> BoxFilterResult:
        """The mean over a (2rx+1) x (2ry+1) window (ry defaults to rx); border, border_value.
        output "array" (the default without keep) returns the (H, W, C) pixels, "png" a PNG file
        (uint8 images), "none" nothing (the default with keep); keep=True stores the result:
        `.handle`."""
        request, parse = _box_filter_plan("box_filter", rx=rx, ry=ry, **options)
        with self._image_ref("box_filter", image) as ref:
            request.image.CopyFrom(ref)
            return parse(self._stream("box_filter", self._stub.BoxFilter, request))

    def analyze(self, image: ImageLike, analyses, *, keep: bool = False,
                label: str = "") -> AnalyzeResult:
        """Several analyses of one image in one Analyze call: `analyses` is a list of
        (name, options) pairs, name one of "histogram", "integral_image", "compaction" (or
        "compact"), "box_filter", options the keyword arguments of the method of that name
        (without the image). Arrays and files are streamed whatever their size and not kept unless
        keep=True (then `.kept` is the stored image). Returns the results in order."""
        method = "analyze"
        header = pb.AnalyzeHeader(keep=keep, label=label)
        parsers = []
        for name, options in analyses:
            if name not in _PLANS:
                raise ValueError(f"analysis must be one of {', '.join(_PLANS)}, got {name!r}")
            request, parse = _PLANS[name](method, **dict(options))
            getattr(header.analyses.add(), _FIELDS.get(name, name)).CopyFrom(request)
            parsers.append(parse)
        data = memoryview(b"")
        if isinstance(image, ImageHandle):
            header.image.image_id = image.image_id
        elif isinstance(image, str) and _ID.fullmatch(image) and not os.path.exists(image):
            header.image.image_id = image
        elif isinstance(image, np.ndarray):
            layout, pixels = raw_pixels(image)
            header.upload.raw.CopyFrom(layout)
            data = memoryview(pixels).cast("B")
        else:
            data = memoryview(self._encoded_bytes(image))
            header.upload.encoded.SetInParent()
            if isinstance(image, (str, os.PathLike)):
                header.upload.label = os.path.basename(os.fspath(image))
        if header.HasField("upload"):
            header.upload.total_bytes = len(data)

        def messages():
            yield pb.AnalyzeRequest(header=header, chunk=bytes(data[:_CHUNK]))
            for off in range(_CHUNK, len(data), _CHUNK):
                yield pb.AnalyzeRequest(chunk=bytes(data[off:off + _CHUNK]))

        kept, timing = [None], [None]

        def parts():
            for m in self._stream(method, self._stub.Analyze, messages()):
                part = m.WhichOneof("part")
                if part == "kept":
                    kept[0] = ImageHandle.from_proto(m.kept)
                elif part == "timing":
                    timing[0] = m.timing
                else:
                    yield m.index, getattr(m, part)

        results = [None] * len(parsers)
        # The parts arrive in order, each analysis's together: each result is read as it streams.
        for index, group in itertools.groupby(parts(), key=lambda p: p[0]):
            if index >= len(parsers) or results[index] is not None:
                raise _data_loss(method, f"parts of analysis {index} out of order")
            results[index] = parsers[index](m for _, m in group)
        if timing[0] is None or any(r is None for r in results):
            raise _data_loss(method, "the stream ended before every result and its timing")
        return AnalyzeResult(results=results, kept=kept[0], timing=Timing.from_proto(timing[0]))
