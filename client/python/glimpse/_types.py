"""The values the client returns, and the conversions between numpy and the wire formats."""
import dataclasses
import os
from typing import Optional, Union

import grpc
import numpy as np

from glimpse.v1 import image_analytics_pb2 as pb

# Samples travel little-endian (proto/glimpse/v1/image_analytics.proto, SampleFormat).
_DTYPE_OF_FORMAT = {
    pb.SAMPLE_FORMAT_UINT8: np.dtype("<u1"),
    pb.SAMPLE_FORMAT_UINT16: np.dtype("<u2"),
    pb.SAMPLE_FORMAT_FLOAT32: np.dtype("<f4"),
}
_FORMAT_OF_KIND = {("u", 1): pb.SAMPLE_FORMAT_UINT8, ("u", 2): pb.SAMPLE_FORMAT_UINT16,
                   ("f", 4): pb.SAMPLE_FORMAT_FLOAT32}
FORMAT_NAMES = {pb.SAMPLE_FORMAT_UINT8: "uint8", pb.SAMPLE_FORMAT_UINT16: "uint16",
                pb.SAMPLE_FORMAT_FLOAT32: "float32"}
ORIENTATIONS = {"file": pb.ORIENTATION_FROM_FILE, "stored": pb.ORIENTATION_AS_STORED}


class GlimpseError(Exception):
    """A call failed: `code` is the grpc.StatusCode, `details` the server's message (which names
    the field, the value and the limit), `method` the client method that failed."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str):
        super().__init__(f"{method}: {code.name}: {details}")
        self.method = method
        self.code = code
        self.details = details

    @classmethod
    def from_rpc(cls, method: str, error: grpc.RpcError) -> "GlimpseError":
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        return cls(method, code, details or "")


def dtype_of_format(fmt: int) -> np.dtype:
    if fmt not in _DTYPE_OF_FORMAT:
        raise GlimpseError("decode", grpc.StatusCode.DATA_LOSS, f"unknown sample format {fmt}")
    return _DTYPE_OF_FORMAT[fmt]


def raw_pixels(array: np.ndarray):
    """(layout, its little-endian bytes as a flat uint8 array) of an (H, W) or (H, W, C)
    uint8/uint16/float32 array. An array with no pixels passes: the server names the side that is
    0 and its limit."""
    a = np.asarray(array)
    if a.ndim not in (2, 3):
        raise ValueError(f"image array must have shape (H, W) or (H, W, C), got shape {a.shape}")
    channels = 1 if a.ndim == 2 else a.shape[2]
    if not 1 <= channels <= 4:
        raise ValueError(f"image array must have 1 to 4 channels, got {channels} "
                         f"(shape {a.shape})")
    fmt = _FORMAT_OF_KIND.get((a.dtype.kind, a.dtype.itemsize))
    if fmt is None:
        raise TypeError(f"image array dtype must be uint8, uint16 or float32, got {a.dtype}")
    a = np.ascontiguousarray(a, dtype=_DTYPE_OF_FORMAT[fmt])
    layout = pb.ImageLayout(width=a.shape[1], height=a.shape[0], channels=channels, format=fmt)
    return layout, a.reshape(-1).view(np.uint8)


@dataclasses.dataclass(frozen=True)
class Encoded:
    """An encoded file and how the server decodes it; pass it as any `image` (an analysis, analyze,
    analyze_many, upload). `source`: a path or the file's bytes (a path or bytes passed alone are
    Encoded(them)). `channels`: 0 keeps the file's own, 1-4 converts on decode (1: grey, a
    JPEG's own luma, of other files (77 R + 150 G + 29 B) >> 8; 3: colour, an alpha channel
    dropped; 4: an opaque alpha channel added where the file has none). `orientation`: "file" turns a
    JPEG, PNG or WebP as its EXIF orientation tag says (as viewers show it, and as cv2.imdecode
    gives JPEG and PNG files), "stored" keeps the pixels as the file stores them.

        g.histogram(glimpse.Encoded("photo.jpg", channels=1), bins=64)
    """
    source: Union[str, os.PathLike, bytes, bytearray, memoryview]
    channels: int = 0
    orientation: str = "file"

    def __post_init__(self):
        if not isinstance(self.source, (str, os.PathLike, bytes, bytearray, memoryview)):
            raise TypeError("Encoded.source must be a path or the bytes of an encoded file, got "
                            f"{type(self.source).__name__}")
        if isinstance(self.channels, bool) or not isinstance(self.channels, int) \
                or not 0 <= self.channels <= 4:
            raise ValueError(f"channels must be an integer in [0, 4], got {self.channels!r}")
        if self.orientation not in ORIENTATIONS:
            raise ValueError(f"orientation must be one of {', '.join(ORIENTATIONS)}, got "
                             f"{self.orientation!r}")

    def __repr__(self) -> str:
        source = (repr(os.fspath(self.path)) if self.path is not None
                  else f"<{memoryview(self.source).nbytes} bytes>")
        return f"Encoded({source}, channels={self.channels}, orientation={self.orientation!r})"

    @property
    def path(self) -> Optional[Union[str, os.PathLike]]:
        """`source` when it is a path, else None."""
        return self.source if isinstance(self.source, (str, os.PathLike)) else None

    def fields(self) -> dict:
        """The decoding fields of EncodedImage and EncodedUpload (the proto's)."""
        return {"desired_channels": self.channels,
                "orientation": ORIENTATIONS[self.orientation]}


@dataclasses.dataclass(frozen=True)
class ImageHandle:
    """A stored image (the fields of ImageInfo); pass it, or its image_id, as any `image`."""
    image_id: str
    width: int
    height: int
    channels: int
    format: str          # "uint8", "uint16" or "float32"
    bytes: int           # GPU memory it holds
    label: str = ""
    origin: str = ""     # "upload" or "box_filter"
    created_unix_ms: int = 0
    last_used_unix_ms: int = 0
    expires_unix_ms: int = 0  # 0 = never

    @property
    def shape(self):
        return (self.height, self.width, self.channels)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.format)

    @classmethod
    def from_proto(cls, info) -> "ImageHandle":
        return cls(image_id=info.image_id, width=info.width, height=info.height,
                   channels=info.channels, format=FORMAT_NAMES.get(info.format, "unspecified"),
                   bytes=info.bytes, label=info.label, origin=info.origin,
                   created_unix_ms=info.created_unix_ms, last_used_unix_ms=info.last_used_unix_ms,
                   expires_unix_ms=info.expires_unix_ms)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Where a call's time went on the server, in nanoseconds (see Timing in the proto)."""
    queue_ns: int = 0
    gpu_ns: int = 0
    upload_ns: int = 0
    decode_ns: int = 0
    server_ns: int = 0

    @property
    def gpu_ms(self) -> float:
        return self.gpu_ns * 1e-6

    @property
    def server_ms(self) -> float:
        return self.server_ns * 1e-6

    @classmethod
    def from_proto(cls, t) -> "Timing":
        return cls(t.queue_ns, t.gpu_ns, t.upload_ns, t.decode_ns, t.server_ns)


@dataclasses.dataclass
class HistogramResult:
    """counts: uint64 array, one row per histogram (per channel for source "all"), `bins` columns.
    Bin i counts values in [edges[i], edges[i + 1]); `np.asarray(result)` is `counts`."""
    counts: np.ndarray
    bins: int
    lo: float
    hi: float
    total: int
    source: str
    variant: str
    image: ImageHandle
    timing: Timing

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(self.lo, self.hi, self.bins + 1)

    def __array__(self, dtype=None):
        return self.counts if dtype is None else self.counts.astype(dtype)


@dataclasses.dataclass
class IntegralImageResult:
    """Inclusive summed-area tables of shape (H, W, C): uint64 for 8/16-bit images (exact),
    float64 for float images; squared_table only when asked for."""
    table: np.ndarray
    squared_table: Optional[np.ndarray]
    variant: str
    image: ImageHandle
    timing: Timing


@dataclasses.dataclass
class CompactionResult:
    """The passing pixels in row-major order: xy (N, 2) uint32 columns x, y; values (N, C) in the
    image's dtype. `total` is exact even when `truncated` says the list was capped."""
    xy: np.ndarray
    values: np.ndarray
    total: int
    truncated: bool
    variant: str
    image: ImageHandle
    timing: Timing


@dataclasses.dataclass
class BoxFilterResult:
    """pixels: (H, W, C) array in the image's dtype (output="array"); png: the file (output="png");
    handle: the stored result (keep=True). `np.asarray(result)` is `pixels`."""
    pixels: Optional[np.ndarray]
    png: Optional[bytes]
    handle: Optional[ImageHandle]
    variant: str
    image: ImageHandle
    timing: Timing

    def __array__(self, dtype=None):
        if self.pixels is None:
            raise ValueError("box_filter was called without output='array': no pixels")
        return self.pixels if dtype is None else self.pixels.astype(dtype)


@dataclasses.dataclass
class AnalyzeResult:
    """results: each analysis's result (HistogramResult, IntegralImageResult, CompactionResult,
    BoxFilterResult) in the order asked; kept: the stored image (keep=True); timing: the whole
    call's (GPU and queue time summed over the analyses)."""
    results: list
    kept: Optional[ImageHandle]
    timing: Timing

    def __getitem__(self, i):
        return self.results[i]

    def __len__(self):
        return len(self.results)


@dataclasses.dataclass
class BatchItem:
    """One image's answer in analyze_many: `index` (its position in the input), `key` (the name
    it was sent under: a path as given, else the index as text), and either `results` (an
    AnalyzeResult: each analysis's result in the order asked) or `error` (a GlimpseError for this
    image alone: its code and the server's message naming the field, the value and the limit);
    `timing` is this image's."""
    index: int
    key: str
    results: Optional[AnalyzeResult]
    error: Optional[GlimpseError]
    timing: Optional[Timing]

    @property
    def ok(self) -> bool:
        return self.error is None

    def __getitem__(self, i):
        if self.error is not None:
            raise self.error
        return self.results[i]


# The result types' names before they took their analyses' names; kept so that code written
# against them still runs.
IntegralResult = IntegralImageResult
CompactResult = CompactionResult
