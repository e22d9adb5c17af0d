"""The client's calls without a transport: what glimpse.Client and glimpse.aio.Client share.

Each public method is a generator here (Calls) that builds its requests, yields one Rpc at a time
to the client running it, is sent back the RPC's result and returns the method's result. The
response of an RPC is read by a Reader as its messages arrive. glimpse.Client runs the Rpcs
blocking, glimpse.aio.Client awaits them: requests, parsing and errors have one owner here.

    calls = Calls(inline_bytes=3 << 20)
    steps = calls.histogram(array, bins=64)      # yields Rpc("histogram", "Histogram", ...)
    rpc = next(steps)
    steps.send(run(rpc))                         # raises StopIteration(HistogramResult)
"""
import dataclasses
import os
import re
from typing import Any, Iterator, Optional, Union

import grpc
import numpy as np
from google.protobuf.descriptor import FieldDescriptor

from glimpse import _health
from glimpse._types import (AnalyzeResult, BatchItem, BoxFilterResult, CompactionResult, Encoded,
                            GlimpseError, HistogramResult, ImageHandle, IntegralImageResult, Timing,
                            dtype_of_format, raw_pixels)
from glimpse.v1 import image_analytics_pb2 as pb
from glimpse.v1 import image_analytics_pb2_grpc as pb_grpc

ImageLike = Union[ImageHandle, Encoded, str, os.PathLike, bytes, bytearray, memoryview, np.ndarray]

_ID = re.compile(r"[0-9a-f]{32}")
_CHUNK = 1 << 20  # upload message size (the proto suggests 1 MiB)
_HISTOGRAM_SOURCES = {"all": pb.HISTOGRAM_SOURCE_ALL_CHANNELS, "channel": pb.HISTOGRAM_SOURCE_CHANNEL,
                      "luma": pb.HISTOGRAM_SOURCE_LUMA, "rgb_mean": pb.HISTOGRAM_SOURCE_RGB_MEAN}
_COMPACT_SOURCES = {"channel": pb.COMPACT_SOURCE_CHANNEL, "luma": pb.COMPACT_SOURCE_LUMA}
_BORDERS = {"reflect101": pb.BORDER_MODE_REFLECT101, "replicate": pb.BORDER_MODE_REPLICATE,
            "constant": pb.BORDER_MODE_CONSTANT}
_OUTPUTS = {"array": pb.PIXEL_ENCODING_RAW, "png": pb.PIXEL_ENCODING_PNG,
            "none": pb.PIXEL_ENCODING_NONE}
HEALTH_CHECK = "grpc.health.v1.Health/Check"


def _choice(name: str, value: str, table: dict) -> int:
    if value not in table:
        raise ValueError(f"{name} must be one of {', '.join(table)}, got {value!r}")
    return table[value]


_F = FieldDescriptor
_INTEGER_RANGES = {
    **dict.fromkeys((_F.TYPE_INT32, _F.TYPE_SINT32, _F.TYPE_SFIXED32), (-(1 << 31), (1 << 31) - 1)),
    **dict.fromkeys((_F.TYPE_UINT32, _F.TYPE_FIXED32), (0, (1 << 32) - 1)),
    **dict.fromkeys((_F.TYPE_INT64, _F.TYPE_SINT64, _F.TYPE_SFIXED64), (-(1 << 63), (1 << 63) - 1)),
    **dict.fromkeys((_F.TYPE_UINT64, _F.TYPE_FIXED64), (0, (1 << 64) - 1)),
}


def _what_field_takes(field: FieldDescriptor) -> str:
    if field.type in _INTEGER_RANGES:
        lo, hi = _INTEGER_RANGES[field.type]
        return f"an integer in [{lo}, {hi}]"
    if field.message_type is not None:
        return f"a {field.message_type.name}"
    return {_F.TYPE_DOUBLE: "a number", _F.TYPE_FLOAT: "a number", _F.TYPE_BOOL: "True or False",
            _F.TYPE_STRING: "a str", _F.TYPE_BYTES: "bytes"}.get(field.type, "a valid value")


def _set(message, name: str, value) -> None:
    """message.<name> = value, where protobuf's refusal of a value its field cannot hold ("Value
    out of range: -1") is raised again naming the option, the value and what the field takes.
    The server owns the options' own limits (bins in [1, 65536], ...) and names them."""
    field = message.DESCRIPTOR.fields_by_name[name]
    try:
        if field.message_type is not None:
            getattr(message, name).CopyFrom(value)
        else:
            setattr(message, name, value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name} must be {_what_field_takes(field)}, got {value!r}") from None


def _message(message_type, **fields):
    """message_type(**fields), each field set by _set."""
    message = message_type()
    for name, value in fields.items():
        _set(message, name, value)
    return message


def _data_loss(method: str, message: str) -> GlimpseError:
    return GlimpseError(method, grpc.StatusCode.DATA_LOSS, message)


# ---- transport-independent pieces: the RPC to run, its response reader, the channel's settings

_END = object()


class Reader:
    """Reads one response as its messages arrive: feed(message) for each, then finish() returns
    the result. `body` is a started generator that takes messages by `m = (yield)` until END."""

    def __init__(self, body):
        self._body = body
        next(body)

    def feed(self, message) -> None:
        self._body.send(message)

    def finish(self):
        try:
            self._body.send(_END)
        except StopIteration as done:
            return done.value
        raise RuntimeError("a response reader went on past the end of its stream")


def _reader(body_function):
    """Decorates a generator function reading messages into a function returning its Reader."""
    def start(*args, **kwargs) -> Reader:
        return Reader(body_function(*args, **kwargs))
    return start


@dataclasses.dataclass
class Rpc:
    """One RPC for a client to run. `name`: an ImageAnalytics method, or HEALTH_CHECK (the keys
    of stub_and_methods()); `request`: a message, or an iterator of messages when
    request_stream (for a name ending in SERIALIZED, their bytes). Every response message goes
    to `reader`, whose result is the RPC's; without one the (single) response message is.
    Errors name `method`, the client method calling."""
    method: str
    name: str
    request: Any
    request_stream: bool = False
    response_stream: bool = False
    reader: Optional[Reader] = None

    def result_of(self, response):
        """The result of a call with a single response message."""
        if self.reader is None:
            return response
        self.reader.feed(response)
        return self.reader.finish()


# The Rpc.name suffix of a method whose requests the client sends as bytes it serialized itself
# (with_image_data, _chunked): the same method, without the stub's serializer.
SERIALIZED = ":serialized"


def stub_and_methods(channel):
    """The channel's ImageAnalytics stub, and its multi-callables by Rpc.name (a grpc or a
    grpc.aio channel): every method by its name, and each analysis taking one ImageRef and each
    method reading a stream also by its name + SERIALIZED."""
    stub = pb_grpc.ImageAnalyticsStub(channel)
    service = pb.DESCRIPTOR.services_by_name["ImageAnalytics"]
    methods = {name: getattr(stub, name) for name in service.methods_by_name}
    for m in service.methods:
        if not m.client_streaming and "image" not in m.input_type.fields_by_name:
            continue
        make = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
                (True, False): channel.stream_unary, (True, True): channel.stream_stream}[
                    (m.client_streaming, m.server_streaming)]
        methods[m.name + SERIALIZED] = make(
            f"/{service.full_name}/{m.name}", request_serializer=None,
            response_deserializer=getattr(pb, m.output_type.name).FromString)
    methods[HEALTH_CHECK] = _health.check_method(channel)
    return stub, methods


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length_delimited(number: int, length: int) -> bytes:
    """The key and length of a length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(length)


def with_image_data(request, kind: str, head, data, within: Optional[str] = None) -> bytes:
    """`request` (its `image` unset) serialized with image.<kind> = `head` (a RawImage or
    EncodedImage, its `data` unset) holding `data` (any bytes-like object): the bytes protobuf
    would write for the whole message, with `data` copied once, into them. Building the message
    instead copies the pixels three times (to bytes, into the message, out of it). `within`: the
    name of an AnalyzeBatchRequest field that holds `request` (a BatchImage): the bytes are then
    that AnalyzeBatchRequest's."""
    data = memoryview(data).cast("B")
    n = data.nbytes
    inner = head.SerializeToString() + _length_delimited(
        head.DESCRIPTOR.fields_by_name["data"].number, n)
    ref = _length_delimited(pb.ImageRef.DESCRIPTOR.fields_by_name[kind].number, len(inner) + n)
    image = _length_delimited(request.DESCRIPTOR.fields_by_name["image"].number,
                              len(ref) + len(inner) + n)
    head_bytes = request.SerializeToString() + image + ref + inner
    if within is not None:
        head_bytes = _length_delimited(
            pb.AnalyzeBatchRequest.DESCRIPTOR.fields_by_name[within].number,
            len(head_bytes) + n) + head_bytes
    return b"".join((head_bytes, data))


def _pem(source) -> Optional[bytes]:
    """PEM bytes from bytes or a file path; None stays None."""
    if source is None:
        return None
    if isinstance(source, (bytes, bytearray)):
        return bytes(source)
    with open(source, "rb") as f:
        return f.read()


@dataclasses.dataclass
class Connection:
    """What a channel is made from: credentials None for a plaintext channel."""
    target: str
    credentials: Optional[grpc.ChannelCredentials]
    options: list
    metadata: Optional[tuple]


def connection(target: Optional[str], *, tls_ca, tls_cert, tls_key, token: Optional[str],
               round_robin: bool, options) -> Connection:
    """The constructor arguments of both clients (see glimpse.Client) resolved."""
    target = target or os.environ.get("GLIMPSE_SERVER") or "localhost:50051"
    if token is None:
        token = os.environ.get("GLIMPSE_TOKEN")
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key must be given together")
    opts = [("grpc.max_receive_message_length", 64 << 20)]
    if round_robin:
        opts.append(("grpc.lb_policy_name", "round_robin"))
    opts.extend(options)
    credentials = None
    if tls_ca or tls_cert is not None:
        roots = None if tls_ca is True else _pem(tls_ca)
        credentials = grpc.ssl_channel_credentials(root_certificates=roots,
                                                   private_key=_pem(tls_key),
                                                   certificate_chain=_pem(tls_cert))
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    return Connection(target, credentials, opts, metadata)


# ---- each analysis: its request from keyword options, and a reader of its response messages
# (the messages its own RPC streams, which Analyze also carries). One plan per analysis name.

def _histogram_plan(method, *, bins: int = 256, lo: Optional[float] = None,
                    hi: Optional[float] = None, source: Optional[str] = None,
                    channel: Optional[int] = None, variant: str = "auto"):
    if source is None:
        source = "all" if channel is None else "channel"
    options = _message(pb.HistogramOptions, bins=bins, channel=channel or 0,
                       source=_choice("source", source, _HISTOGRAM_SOURCES))
    if lo is not None:
        _set(options, "lo", lo)
    if hi is not None:
        _set(options, "hi", hi)

    @_reader
    def read():
        r = None
        while (m := (yield)) is not _END:
            r = m
        if r is None:
            raise _data_loss(method, "no histogram in the answer")
        counts = np.array([h.counts for h in r.histograms], dtype=np.uint64).reshape(-1, r.bins)
        return HistogramResult(counts=counts, bins=r.bins, lo=r.lo, hi=r.hi, total=r.total,
                               source=source, variant=r.variant,
                               image=ImageHandle.from_proto(r.image),
                               timing=Timing.from_proto(r.timing))

    return _message(pb.HistogramRequest, options=options, variant=variant), read()


def _integral_image_plan(method, *, squared: bool = False, variant: str = "auto"):
    @_reader
    def read():
        header = trailer = None
        tables, received = [None, None], [0, 0]
        while (m := (yield)) is not _END:
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
        return IntegralImageResult(table=out[0], squared_table=out[1] if len(out) > 1 else None,
                              variant=trailer.variant, image=ImageHandle.from_proto(header.image),
                              timing=Timing.from_proto(trailer.timing))

    return _message(pb.IntegralImageRequest,
                    options=_message(pb.IntegralImageOptions, squared=squared),
                    variant=variant), read()


def _compaction_plan(method, *, lo: float, hi: float, outside: bool = False,
                     source: str = "channel", channel: int = 0, max_results: Optional[int] = None,
                     count_only: bool = False, variant: str = "auto"):
    options = _message(pb.CompactOptions, source=_choice("source", source, _COMPACT_SOURCES),
                       channel=channel, lo=lo, hi=hi, outside=outside, count_only=count_only)
    if max_results is not None:
        _set(options, "max_results", max_results)

    @_reader
    def read():
        header = timing = None
        xy = values = None
        received = pixel_bytes = 0
        while (m := (yield)) is not _END:
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
        return CompactionResult(
            xy=xy.view("<u4").reshape(-1, 2).astype(np.uint32, copy=False),
            values=values.view(vdtype).reshape(-1, header.value_channels).astype(
                vdtype.newbyteorder("="), copy=False),
            total=header.total, truncated=header.truncated, variant=header.variant,
            image=ImageHandle.from_proto(header.image), timing=Timing.from_proto(timing))

    return _message(pb.CompactRequest, options=options, variant=variant), read()


def _box_filter_plan(method, *, rx: int, ry: Optional[int] = None, border: str = "reflect101",
                     border_value: float = 0.0, keep: bool = False, label: str = "",
                     output: Optional[str] = None, variant: str = "auto"):
    if output is None:
        output = "none" if keep else "array"
    options = _message(pb.BoxFilterOptions, rx=rx, ry=rx if ry is None else ry,
                       border=_choice("border", border, _BORDERS), border_value=border_value)
    request = _message(pb.BoxFilterRequest, options=options, variant=variant, keep=keep,
                       label=label, encoding=_choice("output", output, _OUTPUTS))

    @_reader
    def read():
        header = timing = data = None
        received = 0
        while (m := (yield)) is not _END:
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

    return request, read()


# Analyze's analyses by name (the proto's field names; "compact" as the method is called).
_PLANS = {"histogram": _histogram_plan, "integral_image": _integral_image_plan,
          "compaction": _compaction_plan, "compact": _compaction_plan,
          "box_filter": _box_filter_plan}
_FIELDS = {"compact": "compaction"}
# A wrong keyword then reads "histogram() got an unexpected keyword argument 'binz'", naming the
# method the caller called rather than this module's function.
for _name in ("histogram", "integral_image", "compaction", "box_filter"):
    _PLANS[_name].__qualname__ = _PLANS[_name].__name__ = _name


@_reader
def _read_analyze(method, readers):
    """Analyze's parts, each analysis's together and in order, each read by its own reader as it
    streams."""
    results = [None] * len(readers)
    kept = timing = None
    current = None  # the index whose parts are streaming
    while (m := (yield)) is not _END:
        part = m.WhichOneof("part")
        if part == "kept":
            kept = ImageHandle.from_proto(m.kept)
        elif part == "timing":
            timing = m.timing
        else:
            if m.index != current:
                if current is not None:
                    results[current] = readers[current].finish()
                    readers[current] = None
                if m.index >= len(readers) or readers[m.index] is None:
                    raise _data_loss(method, f"parts of analysis {m.index} out of order")
                current = m.index
            readers[current].feed(getattr(m, part))
    if current is not None:
        results[current] = readers[current].finish()
        readers[current] = None
    if timing is None or any(r is not None for r in readers):
        raise _data_loss(method, "the stream ended before every result and its timing")
    return AnalyzeResult(results=results, kept=kept, timing=Timing.from_proto(timing))


def _as_encoded(image) -> Encoded:
    """`image` (not an array, handle or id) as an Encoded file: an Encoded as it is, a path or
    bytes with the default decoding."""
    if isinstance(image, Encoded):
        return image
    if isinstance(image, (str, os.PathLike, bytes, bytearray, memoryview)):
        return Encoded(image)
    raise TypeError("image must be an ImageHandle, an image id, a numpy array, a path, "
                    f"encoded bytes or a glimpse.Encoded, got {type(image).__name__}")


def _encoded_bytes(encoded: Encoded) -> bytes:
    if encoded.path is None:
        return bytes(encoded.source)
    with open(encoded.path, "rb") as f:
        return f.read()


def _path_text(path) -> str:
    """A path as text for a protobuf string field (UTF-8): a name in another encoding (Linux names
    are bytes) has what does not decode as UTF-8 replaced by U+FFFD."""
    text = os.fsdecode(os.fspath(path))
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _file_label(path) -> str:
    """A path's file name as a label."""
    return os.path.basename(_path_text(path))


def _is_image_id(image) -> bool:
    return isinstance(image, str) and bool(_ID.fullmatch(image)) and not os.path.exists(image)


def _chunked(message_type, header, data: memoryview) -> Iterator[bytes]:
    """The request stream of an upload, serialized (for the method's name + SERIALIZED): the
    header with the first chunk, then 1 MiB chunks, each copied once, from `data`, into the
    bytes of its message."""
    chunk = message_type.DESCRIPTOR.fields_by_name["chunk"].number
    first = message_type(header=header).SerializeToString()
    for off in range(0, max(len(data), 1), _CHUNK):  # one message even for no data
        part = data[off:off + _CHUNK]
        field = _length_delimited(chunk, len(part)) if len(part) else b""
        yield b"".join((first if off == 0 else b"", field, part))


_STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


class BatchReader:
    """Reads AnalyzeBatch's answer: feed(message) returns a BatchItem when an image's end
    marker arrives (else None); finish() checks that the summary came and returns it. Each image's
    parts are read by fresh readers of the analyses' plans, as Analyze's are. `local_errors`:
    index -> GlimpseError for images the client could not send (read by the time their end
    arrives)."""

    def __init__(self, method: str, analyses, local_errors: dict):
        self._method = method
        self._analyses = analyses
        self._local_errors = local_errors
        self._open = {}  # index -> the Analyze reader of its parts
        self.summary = None

    def feed(self, m):
        part = m.WhichOneof("part")
        if part == "summary":
            self.summary = m.summary
            return None
        if part == "result":
            reader = self._open.get(m.index)
            if reader is None:
                readers = [_PLANS[name](self._method, **dict(options))[1]
                           for name, options in self._analyses]
                reader = self._open[m.index] = _read_analyze(self._method, readers)
            reader.feed(m.result)
            return None
        if part != "end":
            raise _data_loss(self._method, f"unexpected part {part!r} of image {m.index}")
        reader = self._open.pop(m.index, None)
        timing = Timing.from_proto(m.end.timing)
        error = self._local_errors.pop(m.index, None)
        if error is None and m.end.HasField("error"):
            code = _STATUS_CODES.get(m.end.error.code, grpc.StatusCode.UNKNOWN)
            error = GlimpseError(self._method, code, m.end.error.message)
        if error is not None:
            return BatchItem(m.index, m.key, None, error, timing)
        if reader is None:
            raise _data_loss(self._method, f"image {m.index} ended without its results")
        reader.feed(pb.AnalyzeResponse(timing=m.end.timing))
        return BatchItem(m.index, m.key, reader.finish(), None, timing)

    def finish(self):
        if self.summary is None or self._open:
            raise _data_loss(self._method, "the stream ended before every image and the summary")
        return self.summary


class Calls:
    """The public methods of both clients as generators of Rpcs (see the module's comment).
    inline_bytes: arrays and files up to this size travel inside the analysis request; larger
    ones are uploaded, analysed by id and deleted."""

    def __init__(self, inline_bytes: int):
        self._inline_bytes = inline_bytes

    # ---- helpers -----------------------------------------------------------------------------

    def _upload(self, method: str, header, data: memoryview):
        header.total_bytes = len(data)
        r = yield Rpc(method, "UploadImage" + SERIALIZED,
                      _chunked(pb.UploadImageRequest, header, data),
                      request_stream=True)
        return ImageHandle.from_proto(r.image)

    def _image_ref(self, method: str, image: ImageLike, request):
        """What `request` (an analysis request) sends for `image`: (the request, or the bytes of
        it with the image inline; the temporary image it names, or None). A large array or file
        is stored for the call, and the caller deletes it."""
        if isinstance(image, ImageHandle):
            request.image.image_id = image.image_id
            return request, None
        if _is_image_id(image):
            request.image.image_id = image
            return request, None
        if isinstance(image, np.ndarray):
            layout, pixels = raw_pixels(image)
            if pixels.nbytes <= self._inline_bytes:
                return with_image_data(request, "raw", pb.RawImage(layout=layout), pixels), None
            temporary = yield from self._upload(method, pb.UploadHeader(raw=layout),
                                                memoryview(pixels).cast("B"))
        else:
            encoded = _as_encoded(image)
            data = _encoded_bytes(encoded)
            if len(data) <= self._inline_bytes:
                return with_image_data(request, "encoded", pb.EncodedImage(**encoded.fields()),
                                       data), None
            temporary = yield from self._upload(
                method, pb.UploadHeader(encoded=pb.EncodedUpload(**encoded.fields())),
                memoryview(data))
        request.image.image_id = temporary.image_id
        return request, temporary

    def _forget(self, temporary: Optional[ImageHandle]):
        """Deletes an image stored for one call; a failure leaves it to expire."""
        if temporary is None:
            return
        try:
            yield Rpc("delete", "DeleteImage", pb.DeleteImageRequest(image_id=temporary.image_id))
        except GlimpseError:
            pass

    def _analysis(self, method: str, name: str, image: ImageLike, request, reader: Reader,
                  response_stream: bool = True):
        """One analysis RPC on `image`, whose temporary copy (if any) is deleted after it."""
        request, temporary = yield from self._image_ref(method, image, request)
        if isinstance(request, bytes):
            name += SERIALIZED
        try:
            result = yield Rpc(method, name, request, response_stream=response_stream,
                               reader=reader)
        except GeneratorExit:  # the client dropped the call: no more Rpcs may be yielded
            raise
        except BaseException:
            yield from self._forget(temporary)
            raise
        yield from self._forget(temporary)
        return result

    # ---- the store ---------------------------------------------------------------------------

    def upload(self, image, *, label: Optional[str] = None, channels: int = 0,
               orientation: str = "file"):
        """Stores an image: a numpy array (H, W) or (H, W, C) of uint8/uint16/float32, a path to
        an image file, the bytes of one, or a glimpse.Encoded. `channels` (1-4) converts an
        encoded file on decode. `orientation`: "file" turns a JPEG, PNG or WebP as its EXIF
        orientation tag says (as viewers show it, and as cv2.imdecode does JPEG and PNG),
        "stored" keeps the pixels as the file stores them (both as in Encoded, which may carry
        them instead). Returns its ImageHandle."""
        if isinstance(image, np.ndarray):
            if channels:
                raise ValueError(f"channels applies to encoded files, not arrays (got {channels})")
            if orientation != "file":
                raise ValueError("orientation applies to encoded files, not arrays")
            layout, pixels = raw_pixels(image)
            header = _message(pb.UploadHeader, raw=layout, label=label or "")
            return (yield from self._upload("upload", header, memoryview(pixels).cast("B")))
        if isinstance(image, Encoded):
            if channels != 0 or orientation != "file":
                raise ValueError("channels and orientation go to upload or to its Encoded image, "
                                 f"not both: got channels={channels!r}, orientation={orientation!r} "
                                 f"with {image}")
            encoded = image
        else:
            encoded = Encoded(_as_encoded(image).source, channels, orientation)
        if label is None:
            label = "" if encoded.path is None else _file_label(encoded.path)
        data = _encoded_bytes(encoded)
        header = _message(pb.UploadHeader, encoded=pb.EncodedUpload(**encoded.fields()),
                          label=label)
        return (yield from self._upload("upload", header, memoryview(data)))

    def image_info(self, image: Union[ImageHandle, str]):
        """The ImageHandle of a stored image."""
        image_id = image.image_id if isinstance(image, ImageHandle) else image
        r = yield Rpc("image_info", "GetImageInfo", pb.GetImageInfoRequest(image_id=image_id))
        return ImageHandle.from_proto(r)

    def list(self):
        """Stored images (ImageHandles), most recently used first."""
        r = yield Rpc("list", "ListImages", pb.ListImagesRequest())
        return [ImageHandle.from_proto(i) for i in r.images]

    def delete(self, image: Union[ImageHandle, str]):
        """Frees a stored image; returns the bytes freed."""
        image_id = image.image_id if isinstance(image, ImageHandle) else image
        r = yield Rpc("delete", "DeleteImage", pb.DeleteImageRequest(image_id=image_id))
        return r.freed_bytes

    def info(self):
        """The server's version, device, limits, settings, queue and store (a ServerInfo)."""
        return (yield Rpc("info", "GetServerInfo", pb.GetServerInfoRequest()))

    def health(self, service: str = ""):
        """The health service's answer: "SERVING", "NOT_SERVING", ..."""
        r = yield Rpc("health", HEALTH_CHECK, _health.HealthCheckRequest(service=service))
        return _health.status_name(r)

    # ---- analyses ----------------------------------------------------------------------------

    def histogram(self, image: ImageLike, **options):
        """Histograms over [lo, hi) (default the format's range): bins=256, lo, hi, source "all"
        (one per channel, the default), "channel", "luma" or "rgb_mean", channel, variant.
        Returns a HistogramResult."""
        request, reader = _histogram_plan("histogram", **options)
        return (yield from self._analysis("histogram", "Histogram", image, request, reader,
                                          response_stream=False))

    def integral_image(self, image: ImageLike, **options):
        """The inclusive summed-area table (and that of squares, squared=True), (H, W, C) uint64
        or float64: an IntegralImageResult."""
        request, reader = _integral_image_plan("integral_image", **options)
        return (yield from self._analysis("integral_image", "IntegralImage", image, request,
                                          reader))

    def compaction(self, image: ImageLike, lo: float, hi: float, **options):
        """The pixels whose value (a channel, or luma) lies in [lo, hi], or outside it
        (outside=True), in row-major order, with the exact total; source, channel, max_results,
        count_only, variant. Returns a CompactionResult."""
        request, reader = _compaction_plan("compaction", lo=lo, hi=hi, **options)
        return (yield from self._analysis("compaction", "Compact", image, request, reader))

    def box_filter(self, image: ImageLike, rx: int, ry: Optional[int] = None, **options):
        """The mean over a (2rx+1) x (2ry+1) window (ry defaults to rx); border, border_value.
        output "array" (the default without keep) returns the (H, W, C) pixels, "png" a PNG file
        (uint8 and uint16 images), "none" nothing (the default with keep); keep=True stores the
        result: `.handle`. Returns a BoxFilterResult."""
        request, reader = _box_filter_plan("box_filter", rx=rx, ry=ry, **options)
        return (yield from self._analysis("box_filter", "BoxFilter", image, request, reader))

    def analyze(self, image: ImageLike, analyses, *, keep: bool = False, label: str = ""):
        """Several analyses of one image in one Analyze call: `analyses` is a list of
        (name, options) pairs, name one of "histogram", "integral_image", "compaction" (or
        "compact"), "box_filter", options the keyword arguments of the method of that name
        (without the image). Arrays and files are streamed whatever their size and not kept unless
        keep=True (then `.kept` is the stored image). Returns an AnalyzeResult: the results in
        order."""
        method = "analyze"
        header = _message(pb.AnalyzeHeader, keep=keep, label=label)
        readers = []
        for name, options in analyses:
            if name not in _PLANS:
                raise ValueError(f"analysis must be one of {', '.join(_PLANS)}, got {name!r}")
            request, reader = _PLANS[name](method, **dict(options))
            getattr(header.analyses.add(), _FIELDS.get(name, name)).CopyFrom(request)
            readers.append(reader)
        data = memoryview(b"")
        if isinstance(image, ImageHandle):
            header.image.image_id = image.image_id
        elif _is_image_id(image):
            header.image.image_id = image
        elif isinstance(image, np.ndarray):
            layout, pixels = raw_pixels(image)
            header.upload.raw.CopyFrom(layout)
            data = memoryview(pixels).cast("B")
        else:
            encoded = _as_encoded(image)
            data = memoryview(_encoded_bytes(encoded))
            header.upload.encoded.CopyFrom(pb.EncodedUpload(**encoded.fields()))
            if encoded.path is not None:
                header.upload.label = _file_label(encoded.path)
        if header.HasField("upload"):
            header.upload.total_bytes = len(data)
        return (yield Rpc(method, "Analyze" + SERIALIZED, _chunked(pb.AnalyzeRequest, header, data),
                          request_stream=True, response_stream=True,
                          reader=_read_analyze(method, readers)))


    # ---- batches (run by the clients' analyze_many, an iterator rather than one result) -------

    def batch(self, method: str, images, analyses, *, ordered: bool = True,
              max_in_flight: int = 0):
        """(request iterator, BatchReader) of one AnalyzeBatch call. The iterator yields each
        message serialized (for the method of SERIALIZED) and takes the next image from `images`
        only when gRPC asks for the next message, so a generator is read lazily. Each item is an
        image (see _batch_image) or a (key, image) pair. An image the client cannot send
        (unreadable file, bad array, larger than inline_bytes) goes as an empty message, keeping
        the positions, and its item carries the client's error."""
        header = _message(pb.AnalyzeBatchHeader, ordered=ordered, max_in_flight=max_in_flight)
        analyses = [(name, dict(options)) for name, options in analyses]
        for name, options in analyses:
            if name not in _PLANS:
                raise ValueError(f"analysis must be one of {', '.join(_PLANS)}, got {name!r}")
            request, _ = _PLANS[name](method, **options)
            getattr(header.analyses.add(), _FIELDS.get(name, name)).CopyFrom(request)
        if not analyses:
            raise ValueError("analyses must name at least one analysis")
        local_errors = {}

        def requests():
            """Each message serialized (the AnalyzeBatch method of SERIALIZED)."""
            yield pb.AnalyzeBatchRequest(header=header).SerializeToString()
            for index, item in enumerate(images):
                key = None
                if isinstance(item, tuple) and len(item) == 2:
                    key, item = item
                message = pb.BatchImage(key=str(index) if key is None else str(key))
                try:
                    path = item.path if isinstance(item, Encoded) else item
                    if key is None and isinstance(path, (str, os.PathLike)):
                        message.key = _path_text(path)
                    request = self._batch_image(item, message)
                except (OSError, ValueError, TypeError) as e:
                    message.ClearField("image")
                    request = pb.AnalyzeBatchRequest(image=message).SerializeToString()
                    local_errors[index] = GlimpseError(
                        method, grpc.StatusCode.INVALID_ARGUMENT, f"images[{index}]: {e}")
                yield request

        return requests(), BatchReader(method, analyses, local_errors)

    def _batch_image(self, image, message) -> bytes:
        """The serialized AnalyzeBatchRequest whose `image` is `message` (a BatchImage, its key
        set) holding an image sent inline: an ImageHandle or id, a numpy array, a path, or
        encoded bytes or an Encoded (each within inline_bytes: upload larger ones and pass their handle)."""
        if isinstance(image, ImageHandle) or _is_image_id(image):
            message.image.image_id = image.image_id if isinstance(image, ImageHandle) else image
            return pb.AnalyzeBatchRequest(image=message).SerializeToString()
        if isinstance(image, np.ndarray):
            layout, data = raw_pixels(image)
            kind, head = "raw", pb.RawImage(layout=layout)
        else:
            encoded = _as_encoded(image)
            data = _encoded_bytes(encoded)
            kind, head = "encoded", pb.EncodedImage(**encoded.fields())
        if len(data) > self._inline_bytes:  # raw_pixels' data is a flat uint8 array
            raise ValueError(f"the image is {len(data)} bytes, over inline_bytes "
                             f"({self._inline_bytes}): upload it and pass its handle")
        return with_image_data(message, kind, head, data, within="image")


# The public methods, in the order the clients list them.
PUBLIC = ("upload", "image_info", "list", "delete", "info", "health", "histogram",
          "integral_image", "compaction", "box_filter", "analyze")


def drive(steps, send):
    """Runs a Calls generator: each Rpc through send(rpc) -> result; whatever send raises is
    raised inside the generator (which may clean up with more Rpcs). Returns its result."""
    value, error = None, None
    while True:
        try:
            rpc = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        try:
            value, error = send(rpc), None
        except BaseException as e:  # noqa: B036 -- handed to the generator, which re-raises it
            value, error = None, e


async def drive_async(steps, send):
    """drive() with a coroutine function `send`: the same steps, each Rpc awaited."""
    value, error = None, None
    while True:
        try:
            rpc = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        try:
            value, error = await send(rpc), None
        except BaseException as e:  # noqa: B036 -- cancellation too: the generator re-raises it
            value, error = None, e
