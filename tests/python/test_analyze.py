"""Analyze through the Python client: every analysis in one call equals its own method's result
and the numpy reference, from an array, a file and an id; keep; bad input."""
import numpy as np
import pytest

import glimpse
import reference
from conftest import REPO, random_image

EVERY = [("histogram", {"bins": 64}),
         ("integral_image", {"squared": True}),
         ("compaction", {"lo": 100, "hi": 180, "channel": 1}),
         ("box_filter", {"rx": 2, "ry": 3})]


def check_every(a, results):
    """The four results of EVERY against the numpy references."""
    h, integral, c, box = results
    np.testing.assert_array_equal(h.counts, reference.histogram(a, 64, 0, 256, "all"))
    np.testing.assert_array_equal(integral.table, reference.integral(a))
    np.testing.assert_array_equal(integral.squared_table, reference.integral(a, squared=True))
    xy, values, total = reference.compact(a, 100, 180, channel=1)
    assert c.total == total
    np.testing.assert_array_equal(c.xy, xy)
    np.testing.assert_array_equal(c.values, values)
    np.testing.assert_array_equal(box.pixels, reference.box_filter(a, 2, 3))


@pytest.mark.parametrize("size", [(1, 1), (23, 1), (61, 47)])
def test_analyze_equals_the_single_calls(client, rng, size):
    a = random_image(rng, *size, 3, np.uint8).reshape(size[0], size[1], -1)
    r = client.analyze(a, EVERY)
    assert len(r) == 4 and r.kept is None and r.timing.server_ns > 0
    check_every(a, r.results)
    single = [client.histogram(a, bins=64), client.integral_image(a, squared=True),
              client.compaction(a, 100, 180, channel=1), client.box_filter(a, 2, 3)]
    np.testing.assert_array_equal(r[0].counts, single[0].counts)
    np.testing.assert_array_equal(r[1].table, single[1].table)
    np.testing.assert_array_equal(r[1].squared_table, single[1].squared_table)
    assert r[2].total == single[2].total
    np.testing.assert_array_equal(r[2].xy, single[2].xy)
    np.testing.assert_array_equal(r[2].values, single[2].values)
    np.testing.assert_array_equal(r[3].pixels, single[3].pixels)
    # Nothing stayed on the server.
    assert not any(i.origin.startswith("analyze") for i in client.list())
    # By id: the same results.
    handle = client.upload(a)
    try:
        again = client.analyze(handle, EVERY)
        np.testing.assert_array_equal(again[0].counts, r[0].counts)
        np.testing.assert_array_equal(again[3].pixels, r[3].pixels)
    finally:
        client.delete(handle)


def test_analyze_keep_and_file(client, rng, tmp_path):
    a = random_image(rng, 40, 30, 1, np.uint16).reshape(40, 30)
    r = client.analyze(a, [("histogram", {"bins": 7}), ("compact", {"lo": 0, "hi": 999})],
                       keep=True, label="kept")
    assert r.kept is not None and r.kept.label == "kept"
    np.testing.assert_array_equal(r[0].counts, client.histogram(r.kept, bins=7).counts)
    assert r[1].total == int(np.count_nonzero(a <= 999))
    client.delete(r.kept)
    # A file, streamed: the same counts as the single call.
    sample = str(REPO / "samples" / "glimpse-sample.png")
    f = client.analyze(sample, [("histogram", {"source": "luma", "bins": 16})])
    np.testing.assert_array_equal(f[0].counts, client.histogram(sample, source="luma", bins=16).counts)
    assert f[0].image.image_id == ""


def test_analyze_errors(client):
    a = np.zeros((4, 4), np.uint8)
    with pytest.raises(ValueError, match="analysis must be one of"):
        client.analyze(a, [("blur", {})])
    with pytest.raises(glimpse.GlimpseError) as e:
        client.analyze(a, [("histogram", {}), ("histogram", {"bins": 70000})])
    assert e.value.code.name == "INVALID_ARGUMENT" and "analyses[1] (histogram)" in str(e.value)
    with pytest.raises(glimpse.GlimpseError) as e:
        client.analyze(a, [])
    assert "header.analyses must hold 1 to 64" in str(e.value)
    with pytest.raises(glimpse.GlimpseError) as e:
        client.analyze("0123456789abcdef0123456789abcdef", [("histogram", {})])
    assert e.value.code.name == "NOT_FOUND"
