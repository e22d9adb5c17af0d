"""Python client of glimpse-server: GPU image analytics over gRPC, with numpy arrays.

    import glimpse
    with glimpse.Client("localhost:50051") as g:
        h = g.histogram("photo.png", bins=64, source="luma")
        print(h.counts, h.timing.gpu_ms)
        # Several analyses in one call, nothing left on the server:
        hist, table = g.analyze("photo.png", [("histogram", {"bins": 64}),
                                              ("integral_image", {})])
        # A colour photo decoded to grey, its EXIF orientation tag ignored:
        g.integral_image(glimpse.Encoded("photo.jpg", channels=1, orientation="stored"))

glimpse.aio.Client is the same client for asyncio: its methods are coroutines.
"""
from glimpse._types import (AnalyzeResult, BatchItem, BoxFilterResult, CompactionResult,
                            CompactResult, Encoded, GlimpseError, HistogramResult, ImageHandle,
                            IntegralImageResult, IntegralResult, Timing)
from glimpse import aio
from glimpse.client import Client
from glimpse.plot import plot_histogram

__all__ = ["Client", "aio", "Encoded", "GlimpseError", "ImageHandle", "Timing", "HistogramResult",
           "IntegralImageResult", "CompactionResult", "BoxFilterResult", "AnalyzeResult", "BatchItem",
           "IntegralResult", "CompactResult",
           "plot_histogram"]
