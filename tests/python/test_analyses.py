"""Every analysis through the client against numpy references, on random images of awkward
sizes, every format and 1-4 channels; results compared exactly."""
import itertools
import re

import grpc
import numpy as np
import pytest

import glimpse
import reference
from conftest import AWKWARD_SIZES, DTYPES, random_image

CASES = list(itertools.product(AWKWARD_SIZES, DTYPES, [1, 2, 3, 4]))
IDS = [f"{h}x{w}-{np.dtype(t).name}-{c}ch" for (h, w), t, c in CASES]


def full_range(dtype):
    return (0.0, 1.0) if dtype == np.float32 else (0, int(np.iinfo(dtype).max) + 1)


@pytest.mark.parametrize("size,dtype,channels", CASES, ids=IDS)
def test_histogram(client, rng, size, dtype, channels):
    a = random_image(rng, *size, channels, dtype)
    lo, hi = full_range(dtype)
    r = client.histogram(a)
    assert (r.bins, r.lo, r.hi) == (256, lo, hi)
    np.testing.assert_array_equal(r.counts, reference.histogram(a, 256, lo, hi, "all"))
    assert r.total == a.size and r.counts.dtype == np.uint64
    assert r.timing.server_ns > 0 and r.variant not in ("", "auto")
    # A sub-range, an odd bin count, one channel.
    lo, hi = (0.125, 0.75) if dtype == np.float32 else (3, int(hi * 0.8))
    bins = int(rng.integers(1, 300))
    ch = int(rng.integers(channels))
    r = client.histogram(a, bins=bins, lo=lo, hi=hi, channel=ch)
    np.testing.assert_array_equal(r.counts, reference.histogram(a, bins, lo, hi, "channel", ch))
    np.testing.assert_array_equal(np.asarray(r), r.counts)
    # The variant auto picked, named explicitly, gives the same counts.
    again = client.histogram(a, bins=bins, lo=lo, hi=hi, channel=ch, variant=r.variant)
    assert again.variant == r.variant
    np.testing.assert_array_equal(again.counts, r.counts)
    if channels >= 3:
        for source in ("luma", "rgb_mean"):
            lo, hi = full_range(dtype)
            r = client.histogram(a, bins=64, source=source)
            np.testing.assert_array_equal(r.counts, reference.histogram(a, 64, lo, hi, source),
                                          err_msg=source)


def test_histogram_errors(client):
    a = np.zeros((4, 4), np.uint8)
    for kwargs, field in [({"bins": 70000}, "bins"), ({"channel": 1}, "channel"),
                          ({"source": "luma"}, "luma"), ({"lo": 5, "hi": 5}, "")]:
        with pytest.raises(glimpse.GlimpseError) as e:
            client.histogram(a, **kwargs)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, kwargs
        assert field in e.value.details, e.value.details


@pytest.mark.parametrize("method,args,kwargs,message", [
    ("histogram", (), {"bins": -5}, "bins must be an integer in [0, 4294967295], got -5"),
    ("histogram", (), {"bins": 1 << 40},
     f"bins must be an integer in [0, 4294967295], got {1 << 40}"),
    ("histogram", (), {"channel": -1}, "channel must be an integer in [0, 4294967295], got -1"),
    ("histogram", (), {"lo": "0"}, "lo must be a number, got '0'"),
    ("box_filter", (-1,), {}, "rx must be an integer in [0, 4294967295], got -1"),
    ("box_filter", (1, -2), {}, "ry must be an integer in [0, 4294967295], got -2"),
    ("box_filter", (1,), {"keep": True, "label": 7}, "label must be a str, got 7"),
    ("compaction", (0, 1), {"max_results": 1 << 63},
     f"max_results must be an integer in [{-(1 << 63)}, {(1 << 63) - 1}], got {1 << 63}"),
    ("integral_image", (), {"squared": "yes"}, "squared must be True or False, got 'yes'"),
])
def test_options_a_field_cannot_hold_are_refused_naming_the_option(client, method, args, kwargs,
                                                                   message):
    """Protobuf alone says "Value out of range: -5": the client names the option, the value and
    what the field takes, before anything is sent; as an option of Analyze too."""
    a = np.zeros((4, 4), np.uint8)
    with pytest.raises((ValueError, TypeError)) as e:
        getattr(client, method)(a, *args, **kwargs)
    assert str(e.value) == message
    positional = {"box_filter": ("rx", "ry"), "compaction": ("lo", "hi")}.get(method, ())
    options = dict(zip(positional, args), **kwargs)
    with pytest.raises((ValueError, TypeError)) as e:
        client.analyze(a, [(method, options)])
    assert str(e.value) == message


def test_a_wrong_option_name_names_the_method(client):
    a = np.zeros((4, 4), np.uint8)
    with pytest.raises(TypeError, match=r"^histogram\(\) got an unexpected keyword argument 'binz'"):
        client.histogram(a, binz=4)
    with pytest.raises(TypeError, match=r"^box_filter\(\) got an unexpected keyword argument 'foo'"):
        client.analyze(a, [("box_filter", {"rx": 1, "foo": 2})])


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0, 3), (3, 0, 4)])
def test_arrays_without_pixels_are_refused_by_the_server_naming_the_side(client, shape):
    """An empty array reaches the server, which owns the limits and names the side that is 0."""
    a = np.zeros(shape, np.uint8)
    side = "width" if shape[1] == 0 else "height"  # the width is checked first
    for call in (lambda: client.histogram(a), lambda: client.upload(a),
                 lambda: client.analyze(a, [("histogram", {})])):
        with pytest.raises(glimpse.GlimpseError) as e:
            call()
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        # image.raw.layout.width (inline), header.raw.width (upload), header.upload.raw.width
        assert re.search(rf"raw(\.layout)?\.{side} must be in \[1, \d+\].*, got 0$",
                         e.value.details), e.value.details


@pytest.mark.parametrize("size,dtype,channels", CASES, ids=IDS)
def test_integral_image(client, rng, size, dtype, channels):
    a = random_image(rng, *size, channels, dtype)
    r = client.integral_image(a, squared=True)
    want = np.float64 if dtype == np.float32 else np.uint64
    assert r.table.dtype == want and r.squared_table.dtype == want
    assert r.table.shape == (size[0], size[1], channels)
    np.testing.assert_array_equal(r.table, reference.integral(a))
    np.testing.assert_array_equal(r.squared_table, reference.integral(a, squared=True))
    plain = client.integral_image(a, variant=r.variant)
    assert plain.squared_table is None and plain.variant == r.variant
    np.testing.assert_array_equal(plain.table, r.table)


def test_integral_image_large_stream(tiny_inline_client, rng):
    # Several 1 MiB bands: the table is assembled from the stream at the right rows.
    a = rng.integers(0, 65536, (611, 389, 3), dtype=np.uint16)
    r = tiny_inline_client.integral_image(a, squared=True)
    np.testing.assert_array_equal(r.table, reference.integral(a))
    np.testing.assert_array_equal(r.squared_table, reference.integral(a, squared=True))


@pytest.mark.parametrize("size,dtype,channels", CASES, ids=IDS)
def test_compact(client, rng, size, dtype, channels):
    a = random_image(rng, *size, channels, dtype)
    top = 1.0 if dtype == np.float32 else float(np.iinfo(dtype).max)
    lo, hi = sorted(rng.uniform(0, top, 2))
    if dtype != np.float32:
        lo, hi = float(int(lo)), float(int(hi))
    ch = int(rng.integers(channels))
    for outside in (False, True):
        r = client.compaction(a, lo, hi, channel=ch, outside=outside)
        xy, values, total = reference.compact(a, lo, hi, outside, "channel", ch)
        assert r.total == total and not r.truncated
        np.testing.assert_array_equal(r.xy, xy)
        np.testing.assert_array_equal(r.values, values)
        assert r.values.dtype == dtype and r.xy.dtype == np.uint32
    if channels >= 3:
        r = client.compaction(a, lo, hi, source="luma")
        xy, values, total = reference.compact(a, lo, hi, False, "luma")
        assert r.total == total
        np.testing.assert_array_equal(r.xy, xy)
        np.testing.assert_array_equal(r.values, values)


def test_compact_cap_count_only_and_stream(tiny_inline_client, rng):
    c = tiny_inline_client
    a = rng.integers(0, 256, (517, 709), dtype=np.uint8)
    xy, values, total = reference.compact(a, 10, 240)
    r = c.compaction(a, 10, 240)                     # several chunks
    assert r.total == total
    np.testing.assert_array_equal(r.xy, xy)
    np.testing.assert_array_equal(r.values, values)
    cap = int(rng.integers(1, total))
    r = c.compaction(a, 10, 240, max_results=cap, variant=r.variant)
    assert r.truncated and r.total == total and len(r.xy) == cap
    np.testing.assert_array_equal(r.xy, xy[:cap])
    r = c.compaction(a, 10, 240, count_only=True)
    assert r.total == total and not r.truncated and r.xy.shape == (0, 2)
    with pytest.raises(glimpse.GlimpseError) as e:
        c.compaction(a, 0, 1, channel=3)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "channel" in e.value.details


def test_earlier_names_still_work(client, rng):
    # The method and result types were named compact, CompactResult and IntegralResult before
    # they took their analyses' names; code written against those names still runs.
    assert glimpse.CompactResult is glimpse.CompactionResult
    assert glimpse.IntegralResult is glimpse.IntegralImageResult
    a = rng.integers(0, 256, (37, 53), dtype=np.uint8)
    old, new = client.compact(a, 10, 99), client.compaction(a, 10, 99)
    assert isinstance(old, glimpse.CompactionResult) and old.total == new.total
    np.testing.assert_array_equal(old.xy, new.xy)
    assert isinstance(client.integral_image(a), glimpse.IntegralImageResult)


@pytest.mark.parametrize("size,dtype,channels", CASES, ids=IDS)
def test_box_filter(client, rng, size, dtype, channels):
    a = random_image(rng, *size, channels, dtype)
    for border in ("reflect101", "replicate", "constant"):
        rx, ry = int(rng.integers(0, 5)), int(rng.integers(0, 40))   # ry often past the image
        value = 0.25 if dtype == np.float32 else float(rng.integers(0, 200))
        r = client.box_filter(a, rx, ry, border=border, border_value=value)
        want = reference.box_filter(a, rx, ry, border, value)
        np.testing.assert_array_equal(r.pixels, want, err_msg=f"{border} rx={rx} ry={ry}")
        assert r.pixels.dtype == dtype and r.handle is None
        np.testing.assert_array_equal(np.asarray(r), r.pixels)


def test_box_filter_keep_png_and_chain(client, rng):
    a = random_image(rng, 45, 67, 3, np.uint8)
    want = reference.box_filter(a, 2, 1)
    kept = client.box_filter(a, 2, 1, keep=True, label="blurred")
    try:
        assert kept.pixels is None and kept.handle.origin == "box_filter"
        assert kept.handle.label == "blurred" and kept.handle.shape == (45, 67, 3)
        # Chained on the server by id: the histogram of the kept result.
        np.testing.assert_array_equal(client.histogram(kept.handle).counts,
                                      reference.histogram(want, 256, 0, 256, "all"))
        both = client.box_filter(a, 2, 1, keep=True, output="array")
        client.delete(both.handle)
        np.testing.assert_array_equal(both.pixels, want)
    finally:
        client.delete(kept.handle)
    png = client.box_filter(a, 2, 1, output="png").png
    assert png.startswith(b"\x89PNG")
    # The server decodes its own PNG back to the same pixels.
    np.testing.assert_array_equal(client.box_filter(png, 0).pixels, want)
    # 16-bit results as 16-bit PNG files: OpenCV's decoder (libpng) reads back the same pixels.
    cv2 = pytest.importorskip("cv2")
    a16 = random_image(rng, 37, 53, 3, np.uint16)
    r16 = client.box_filter(a16, 1, output="png")
    back = cv2.imdecode(np.frombuffer(r16.png, np.uint8), cv2.IMREAD_UNCHANGED)
    assert back.dtype == np.uint16
    np.testing.assert_array_equal(back[:, :, ::-1], client.box_filter(a16, 1).pixels)
    with pytest.raises(glimpse.GlimpseError) as e:
        client.box_filter(a.astype(np.float32), 1, output="png")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "uint8 or uint16" in e.value.details


def test_plot_histogram(client, rng, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    r = client.histogram(random_image(rng, 20, 30, 3, np.uint8), bins=32)
    ax = glimpse.plot_histogram(r, log=True)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["red", "green", "blue"]
    ax.figure.savefig(tmp_path / "h.png")
