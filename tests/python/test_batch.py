"""analyze_many through the Python client: one item per image equal to the numpy references, from
arrays, files, bytes and ids, a generator read lazily, a bad image in the middle answered with its
own error while the others go on; ordered and unordered; the asyncio client."""
import asyncio

import numpy as np
import pytest

import glimpse
import glimpse.aio
import reference
from conftest import random_image

EVERY = [("histogram", {"bins": 64}),
         ("integral_image", {"squared": True}),
         ("compaction", {"lo": 100, "hi": 180, "channel": 0}),
         ("box_filter", {"rx": 2, "ry": 1})]


def check_every(a, results):
    a3 = a if a.ndim == 3 else a[:, :, None]
    h, integral, c, box = results
    np.testing.assert_array_equal(h.counts, reference.histogram(a, 64, 0, 256, "all"))
    np.testing.assert_array_equal(integral.table, reference.integral(a3))
    np.testing.assert_array_equal(integral.squared_table, reference.integral(a3, squared=True))
    xy, values, total = reference.compact(a, 100, 180, channel=0)
    assert c.total == total
    np.testing.assert_array_equal(c.xy, xy)
    np.testing.assert_array_equal(c.values, values)
    np.testing.assert_array_equal(box.pixels.reshape(a3.shape), reference.box_filter(a3, 2, 1))


def arrays(rng, n):
    sizes = [(1, 1), (1, 29), (23, 1), (17, 33), (61, 47), (200, 131)]
    return [random_image(rng, *sizes[i % len(sizes)], 1 + i % 4, np.uint8) for i in range(n)]


@pytest.mark.parametrize("ordered", [True, False])
def test_arrays_match_the_references_and_a_bad_image_gets_its_own_error(client, rng, ordered):
    images = arrays(rng, 9)
    bad = np.zeros((4, 4, 7), np.uint8)  # seven channels: refused by the client
    corrupt = b"\x89PNG\r\n\x1a\n not really a PNG"
    inputs = images[:3] + [bad] + images[3:6] + [corrupt] + images[6:]
    items = list(client.analyze_many(inputs, EVERY, ordered=ordered))
    assert len(items) == len(inputs)
    indices = [i.index for i in items]
    if ordered:
        assert indices == list(range(len(inputs)))
    else:
        assert sorted(indices) == list(range(len(inputs)))
    by_index = {i.index: i for i in items}
    assert not by_index[3].ok and "channels" in by_index[3].error.details
    assert by_index[3].error.details.startswith("images[3]")
    assert not by_index[7].ok
    assert by_index[7].error.code.name == "INVALID_ARGUMENT"
    assert "images[7]" in by_index[7].error.details
    assert "image.encoded.data" in by_index[7].error.details
    with pytest.raises(glimpse.GlimpseError):
        by_index[7][0]
    good = [i for i in range(len(inputs)) if i not in (3, 7)]
    for i in good:
        item = by_index[i]
        assert item.ok, item.error
        assert item.key == str(i)
        check_every(inputs[i], item.results.results)
        assert item.timing.server_ns > 0


def test_a_generator_is_read_lazily_and_files_bytes_ids_mix(client, rng, tmp_path):
    cv2 = pytest.importorskip("cv2")
    a = random_image(rng, 37, 53, 3, np.uint8).reshape(37, 53, 3)
    path = tmp_path / "photo.png"
    assert cv2.imwrite(str(path), a[:, :, ::-1])  # OpenCV writes BGR: the file holds a as RGB
    handle = client.upload(a)
    pulled = []

    def images():
        for i in range(40):
            pulled.append(i)
            if i % 4 == 0:
                yield str(path)
            elif i % 4 == 1:
                yield ("bytes-%d" % i, path.read_bytes())
            elif i % 4 == 2:
                yield handle
            else:
                yield a

    try:
        it = client.analyze_many(images(), [("histogram", {"bins": 64})], max_in_flight=2)
        items = list(it)
        assert pulled == list(range(40))
        assert [i.index for i in items] == list(range(40))
        want = reference.histogram(a, 64, 0, 256, "all")
        for item in items:
            assert item.ok, item.error
            np.testing.assert_array_equal(item[0].counts, want)
        assert items[0].key == str(path)
        assert items[1].key == "bytes-1"
    finally:
        client.delete(handle)


def test_a_generator_is_pulled_only_as_the_call_has_room_and_stopping_cancels(client, rng):
    a = random_image(rng, 256, 256, 3, np.uint8)  # 192 KiB a message
    pulled = [0]

    def endless():
        while True:
            pulled[0] += 1
            yield a

    it = client.analyze_many(endless(), [("histogram", {})], max_in_flight=2)
    want = reference.histogram(a, 256, 0, 256, "all")
    for _, item in zip(range(5), it):
        assert item.ok
        np.testing.assert_array_equal(item[0].counts, want)
    # Five answers, two in flight on the server, and what gRPC's windows hold on the way: far
    # from all of an endless generator (here, far below 64 MiB of requests).
    assert pulled[0] < 300, pulled[0]
    it.close()  # the call is cancelled; the client goes on working
    assert client.health() == "SERVING"


def test_aio_client_yields_the_same_items(server, rng):
    images = arrays(rng, 7)

    async def main():
        async def agen():
            for a in images:
                await asyncio.sleep(0)
                yield a

        async with glimpse.aio.Client(server) as g:
            from_list = [i async for i in g.analyze_many(images, EVERY[:1])]
            from_agen = [i async for i in g.analyze_many(agen(), EVERY[:1], ordered=False)]
        return from_list, from_agen

    from_list, from_agen = asyncio.run(main())
    assert [i.index for i in from_list] == list(range(len(images)))
    assert sorted(i.index for i in from_agen) == list(range(len(images)))
    for items in (from_list, from_agen):
        for item in items:
            np.testing.assert_array_equal(
                item[0].counts, reference.histogram(images[item.index], 64, 0, 256, "all"))
