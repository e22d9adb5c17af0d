"""glimpse.aio.Client against the real server.

The synchronous client's tests run here a second time with their `client` fixtures replaced by
the asyncio client, each coroutine run to its end on the client's event loop: every check of
results (against reference.py) and of errors applies unchanged. Then what only asyncio has:
calls side by side from one client, cancellation, deadlines, `async with`, and the connection
options on a server with TLS and tokens.
"""
import asyncio
import inspect
import subprocess

import grpc
import numpy as np
import pytest
import pytest_asyncio  # python3-pytest-asyncio (deploy/install-deps.sh)

import glimpse
import glimpse.aio
import reference
from conftest import AWKWARD_SIZES, DTYPES, REPO, random_image, running_server
# The synchronous checks, collected again in this module with its fixtures below.
from test_analyses import (test_box_filter, test_box_filter_keep_png_and_chain,  # noqa: F401
                           test_compact, test_compact_cap_count_only_and_stream, test_histogram,
                           test_histogram_errors, test_integral_image,
                           test_integral_image_large_stream)
from test_analyze import (test_analyze_equals_the_single_calls, test_analyze_errors,  # noqa: F401
                          test_analyze_keep_and_file)
from test_store import (test_errors_carry_code_and_message, test_info_and_health,  # noqa: F401
                        test_inline_array_has_no_id, test_large_inputs_are_uploaded_then_deleted,
                        test_local_argument_errors, test_upload_array_round_trip,
                        test_upload_file_path_and_bytes, test_upload_non_contiguous_and_big_endian)


class Blocking:
    """A glimpse.aio.Client whose coroutine methods are called as plain functions: each runs to
    its end on an event loop of this object's own (made here, where the channel is made)."""

    def __init__(self, target, **kwargs):
        self._loop = asyncio.new_event_loop()

        async def make():
            return glimpse.aio.Client(target, **kwargs)

        self.aio = self._loop.run_until_complete(make())

    def __getattr__(self, name):
        coroutine_function = getattr(self.aio, name)
        assert asyncio.iscoroutinefunction(coroutine_function), name

        def call(*args, **kwargs):
            return self._loop.run_until_complete(coroutine_function(*args, **kwargs))
        return call

    def close(self):
        self._loop.run_until_complete(self.aio.close())
        self._loop.close()


@pytest.fixture
def client(server):
    c = Blocking(server, timeout=120)
    yield c
    c.close()


@pytest.fixture
def tiny_inline_client(server):
    c = Blocking(server, timeout=120, inline_bytes=0)
    yield c
    c.close()


@pytest_asyncio.fixture
async def aclient(server):
    async with glimpse.aio.Client(server, timeout=120) as c:
        yield c


def test_same_surface_as_the_blocking_client():
    public = {n for n in dir(glimpse.Client) if not n.startswith("_")}
    assert public == {n for n in dir(glimpse.aio.Client) if not n.startswith("_")}
    for name in public - {"close"}:
        if inspect.isgeneratorfunction(getattr(glimpse.Client, name)):  # analyze_many: items
            assert inspect.isasyncgenfunction(getattr(glimpse.aio.Client, name)), name
        else:
            assert asyncio.iscoroutinefunction(getattr(glimpse.aio.Client, name)), name
        assert getattr(glimpse.aio.Client, name).__doc__ == getattr(glimpse.Client, name).__doc__
    assert asyncio.iscoroutinefunction(glimpse.aio.Client.close)


@pytest.mark.asyncio
async def test_gather_twenty_histograms(aclient, rng):
    # Different sizes, formats and channel counts, all in flight at once on one channel.
    images = [random_image(rng, int(rng.integers(1, 90)), int(rng.integers(1, 90)),
                           int(rng.integers(1, 5)), DTYPES[int(rng.integers(len(DTYPES)))])
              for _ in range(20)]
    bins = [int(rng.integers(1, 300)) for _ in images]
    results = await asyncio.gather(*(aclient.histogram(a, bins=b) for a, b in zip(images, bins)))
    for i, (a, b, r) in enumerate(zip(images, bins, results)):
        lo, hi = (0.0, 1.0) if a.dtype == np.float32 else (0, int(np.iinfo(a.dtype).max) + 1)
        assert type(r) is glimpse.HistogramResult
        np.testing.assert_array_equal(r.counts, reference.histogram(a, b, lo, hi, "all"),
                                      err_msg=f"image {i}: shape {a.shape} {a.dtype} bins {b}")


@pytest.mark.asyncio
async def test_gather_every_analysis_on_uploaded_images(server, rng):
    # Streamed requests (uploads) and streamed responses interleaved on one channel.
    async with glimpse.aio.Client(server, timeout=120, inline_bytes=0) as c:
        sizes = AWKWARD_SIZES + [(131, 257)]
        images = [random_image(rng, h, w, 3, np.uint16).reshape(h, w, 3) for h, w in sizes]
        before = {i.image_id for i in await c.list()}
        integrals, compacts, boxes = await asyncio.gather(
            asyncio.gather(*(c.integral_image(a, squared=True) for a in images)),
            asyncio.gather(*(c.compaction(a, 1000, 40000, channel=2) for a in images)),
            asyncio.gather(*(c.box_filter(a, 3, 2, border="replicate") for a in images)))
        for a, t, k, b in zip(images, integrals, compacts, boxes):
            np.testing.assert_array_equal(t.table, reference.integral(a))
            np.testing.assert_array_equal(t.squared_table, reference.integral(a, squared=True))
            xy, values, total = reference.compact(a, 1000, 40000, channel=2)
            assert k.total == total
            np.testing.assert_array_equal(k.xy, xy)
            np.testing.assert_array_equal(k.values, values)
            np.testing.assert_array_equal(b.pixels, reference.box_filter(a, 3, 2, "replicate"))
        # Every temporary upload was deleted.
        assert {i.image_id for i in await c.list()} == before


def feeding(monkeypatch) -> asyncio.Event:
    """An event set once a response message has arrived (and is being read)."""
    event = asyncio.Event()
    feed = glimpse._calls.Reader.feed

    def feed_and_tell(reader, message):
        event.set()
        feed(reader, message)

    monkeypatch.setattr(glimpse._calls.Reader, "feed", feed_and_tell)
    return event


@pytest.mark.asyncio
async def test_cancel_a_streaming_call(aclient, rng, monkeypatch):
    big = rng.integers(0, 256, (1200, 1100, 4), dtype=np.uint8)
    handle = await aclient.upload(big)
    try:
        # The squared integral table streams 2 x 42 MB: far from done after its first message.
        first = feeding(monkeypatch)
        task = asyncio.ensure_future(aclient.integral_image(handle, squared=True))
        await asyncio.wait_for(first.wait(), 60)
        monkeypatch.undo()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        # The server let go of the call: the result bytes waiting for it are freed (a stream
        # stalled instead holds them, 32 MiB here).
        deadline = asyncio.get_running_loop().time() + 30
        while (await aclient.info()).result_buffer_used_bytes:
            assert asyncio.get_running_loop().time() < deadline, "the call's results are held"
            await asyncio.sleep(0.05)
        # The client goes on working on the same channel.
        a = random_image(rng, 17, 33, 3, np.uint8)
        r = await aclient.histogram(a, bins=32)
        np.testing.assert_array_equal(r.counts, reference.histogram(a, 32, 0, 256, "all"))
    finally:
        await aclient.delete(handle)


@pytest.mark.asyncio
async def test_cancel_an_upload_stores_nothing(server, rng, monkeypatch):
    async with glimpse.aio.Client(server, timeout=120) as c:
        before = {i.image_id for i in await c.list()}
        sent = asyncio.Event()
        streamed = glimpse.aio._streamed

        async def stalls_after_the_header(messages):
            async for m in streamed(messages):
                yield m
                sent.set()
                await asyncio.sleep(3600)  # the rest never goes

        monkeypatch.setattr(glimpse.aio, "_streamed", stalls_after_the_header)
        a = rng.integers(0, 256, (2048, 1024, 3), dtype=np.uint8)  # 6 MiB: 6 messages
        task = asyncio.ensure_future(c.upload(a))
        await asyncio.wait_for(sent.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        monkeypatch.undo()
        assert {i.image_id for i in await c.list()} == before
        handle = await c.upload(a[:5, :7])
        try:
            np.testing.assert_array_equal((await c.box_filter(handle, 0)).pixels, a[:5, :7])
        finally:
            await c.delete(handle)


@pytest.mark.asyncio
async def test_cancel_deletes_the_temporary_upload(server, rng, monkeypatch):
    # A large array is uploaded for the call, analysed by id, deleted, even when the call is
    # cancelled during the analysis.
    async with glimpse.aio.Client(server, timeout=120, inline_bytes=0) as c:
        before = {i.image_id for i in await c.list()}
        a = rng.integers(0, 256, (1200, 1100, 4), dtype=np.uint8)
        analysing = feeding(monkeypatch)
        task = asyncio.ensure_future(c.integral_image(a, squared=True))
        await asyncio.wait_for(analysing.wait(), 60)
        monkeypatch.undo()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert {i.image_id for i in await c.list()} == before


@pytest.mark.asyncio
async def test_deadline_exceeded(server, aclient, rng):
    handle = await aclient.upload(rng.integers(0, 256, (1200, 1100, 4), dtype=np.uint8))
    try:
        async with glimpse.aio.Client(server, timeout=0.02) as hurried:
            with pytest.raises(glimpse.GlimpseError) as e:
                await hurried.integral_image(handle, squared=True)
        assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert e.value.method == "integral_image"
        assert str(e.value).startswith("integral_image: DEADLINE_EXCEEDED: ")
        assert (await aclient.image_info(handle)).image_id == handle.image_id
    finally:
        await aclient.delete(handle)


@pytest.mark.asyncio
async def test_errors_are_the_blocking_clients(server, aclient):
    a = np.zeros((4, 4), np.uint8)
    calls = [("histogram", (a,), {"bins": 70000}, "bins"),
             ("histogram", (a,), {"channel": 1}, "channel"),
             ("compact", (a, 0, 1), {"channel": 3}, "channel"),
             ("box_filter", (a.astype(np.float32), 1), {"output": "png"}, ""),
             ("analyze", (a, [("histogram", {}), ("histogram", {"bins": 70000})]), {},
              "analyses[1] (histogram)"),
             ("image_info", ("0" * 32,), {}, "0" * 32)]
    with glimpse.Client(server, timeout=30) as blocking:
        for name, args, kwargs, field in calls:
            with pytest.raises(glimpse.GlimpseError) as want:
                getattr(blocking, name)(*args, **kwargs)
            with pytest.raises(glimpse.GlimpseError) as got:
                await getattr(aclient, name)(*args, **kwargs)
            assert str(got.value) == str(want.value)
            assert (got.value.method, got.value.code) == (want.value.method, want.value.code)
            assert field in got.value.details, got.value.details
    with pytest.raises(glimpse.GlimpseError) as e:
        await aclient.histogram(a, bins=70000)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "bins" in e.value.details and "70000" in e.value.details
    with pytest.raises(ValueError, match="source must be one of .*got 'hue'"):
        await aclient.histogram(a, source="hue")


@pytest.mark.asyncio
async def test_results_are_the_blocking_clients(server, aclient, rng):
    a = random_image(rng, 29, 31, 3, np.uint8).reshape(29, 31, 3)
    with glimpse.Client(server, timeout=30) as blocking:
        for name, args, kwargs in [("histogram", (a,), {"bins": 17}),
                                   ("integral_image", (a,), {}),
                                   ("compact", (a, 10, 200), {}),
                                   ("box_filter", (a, 1, 2), {}),
                                   ("analyze", (a, [("histogram", {})]), {})]:
            want = getattr(blocking, name)(*args, **kwargs)
            got = await getattr(aclient, name)(*args, **kwargs)
            assert type(got) is type(want), name
        grey = glimpse.Encoded(REPO / "samples" / "glimpse-sample.png", channels=1,
                               orientation="stored")
        got = (await aclient.box_filter(grey, 0)).pixels
        assert got.shape == (480, 640, 1) and (got == blocking.box_filter(grey, 0).pixels).all()
        handle = await aclient.upload(a, label="both")
        try:
            assert await aclient.image_info(handle) == blocking.image_info(handle)
            assert handle.image_id in [i.image_id for i in blocking.list()]
        finally:
            assert await aclient.delete(handle) == handle.bytes


@pytest.mark.asyncio
async def test_unreachable_server():
    async with glimpse.aio.Client("127.0.0.1:1", timeout=5) as c:
        with pytest.raises(glimpse.GlimpseError) as e:
            await c.info()
    assert e.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert e.value.method == "info"


@pytest.mark.asyncio
async def test_tls_and_tokens(tmp_path, rng, monkeypatch):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    tokens = tmp_path / "tokens"
    tokens.write_text("alice 0123456789abcdef0123456789abcdef\n")
    monkeypatch.delenv("GLIMPSE_TOKEN", raising=False)
    a = random_image(rng, 3, 5, 1, np.uint8)
    with running_server(f"--tls-cert={cert}", f"--tls-key={key}", f"--tokens={tokens}") as port:
        target = f"localhost:{port}"
        async with glimpse.aio.Client(target, tls_ca=cert.read_bytes(), timeout=30,
                                      token="0123456789abcdef0123456789abcdef") as alice:
            h = await alice.histogram(a, bins=8)
            np.testing.assert_array_equal(h.counts, reference.histogram(a, 8, 0, 256, "all"))
            assert (await alice.info()).access_control
        async with glimpse.aio.Client(target, tls_ca=str(cert), timeout=30) as anyone:
            assert await anyone.health() == "SERVING"
            with pytest.raises(glimpse.GlimpseError) as e:
                await anyone.list()
            assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        monkeypatch.setenv("GLIMPSE_TOKEN", "0123456789abcdef0123456789abcdef")
        async with glimpse.aio.Client(target, tls_ca=cert, timeout=30) as from_env:
            assert await from_env.list() == []
        async with glimpse.aio.Client(target, timeout=5) as plaintext:
            with pytest.raises(glimpse.GlimpseError) as e:
                await plaintext.health()
            assert e.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(ValueError, match="tls_cert and tls_key"):
        glimpse.aio.Client("127.0.0.1:1", tls_cert=cert)
