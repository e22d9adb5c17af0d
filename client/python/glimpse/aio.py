"""glimpse.aio.Client: glimpse.Client for asyncio, on grpc.aio; the same arguments, methods
(as coroutines), results and errors.

    import asyncio
    import glimpse.aio

    async def main():
        async with glimpse.aio.Client("localhost:50051") as g:
            h = await g.histogram("photo.png", bins=64, source="luma")
            # Calls from one client run side by side:
            counts = await asyncio.gather(*(g.histogram(p) for p in ("a.png", "b.png")))

    asyncio.run(main())

Make the client inside the event loop that uses it (a grpc.aio channel belongs to one loop).
"""
from typing import Optional

import grpc
import grpc.aio

from glimpse import _calls
from glimpse import client as _blocking
from glimpse._types import GlimpseError


def _awaitable(name: str):
    """The Client coroutine running Calls.<name>'s RPCs one after another."""
    steps = getattr(_calls.Calls, name)

    async def method(self, *args, **kwargs):
        return await _calls.drive_async(steps(self._calls, *args, **kwargs), self._send)

    method.__name__, method.__qualname__, method.__doc__ = name, f"Client.{name}", steps.__doc__
    method.__wrapped__ = steps  # help() and inspect.signature show its arguments
    return method


async def _streamed(messages):
    """A request iterator as an async generator: grpc.aio writes each message as the call has
    room for it, and the event loop runs in between."""
    for message in messages:
        yield message


class Client:
    """A connection to glimpse-server for asyncio: the arguments of glimpse.Client (target,
    tls_ca, tls_cert, tls_key, token, timeout, round_robin, inline_bytes, options), its methods
    as coroutines. `async with` closes it, or `await client.close()`. A cancelled call is
    cancelled on the server too; the client goes on working."""

    def __init__(self, target: Optional[str] = None, *, tls_ca=None, tls_cert=None, tls_key=None,
                 token: Optional[str] = None, timeout: Optional[float] = 300.0,
                 round_robin: bool = False, inline_bytes: int = 3 << 20, options=()):
        c = _calls.connection(target, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                              token=token, round_robin=round_robin, options=options)
        if c.credentials is not None:
            self._channel = grpc.aio.secure_channel(c.target, c.credentials, options=c.options)
        else:
            self._channel = grpc.aio.insecure_channel(c.target, options=c.options)
        self._stub, self._methods = _calls.stub_and_methods(self._channel)
        self._metadata = c.metadata
        self._timeout = timeout
        self._calls = _calls.Calls(inline_bytes)
        self.target = c.target

    async def close(self) -> None:
        """Closes the channel; calls still running end with CANCELLED."""
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _send(self, rpc: _calls.Rpc):
        """Runs one RPC to its result; gRPC errors become GlimpseErrors naming rpc.method."""
        request = _streamed(rpc.request) if rpc.request_stream else rpc.request
        call = self._methods[rpc.name](request, timeout=self._timeout, metadata=self._metadata)
        try:
            if not rpc.response_stream:
                return rpc.result_of(await call)
            async for message in call:
                rpc.reader.feed(message)
            return rpc.reader.finish()
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc(rpc.method, e) from None
        finally:
            call.cancel()  # a no-op once the call has ended; frees it when cancelled or on error

    async def analyze_many(self, images, analyses, *, ordered: bool = True,
                           max_in_flight: int = 0, timeout: Optional[float] = None):
        # The docstring is glimpse.Client.analyze_many's (set below the class).
        handed_over = []  # an async iterable's next image, for the shared request builder

        def one_at_a_time():
            while True:
                yield handed_over.pop()

        is_async = hasattr(images, "__aiter__")
        requests, reader = self._calls.batch("analyze_many",
                                             one_at_a_time() if is_async else images, analyses,
                                             ordered=ordered, max_in_flight=max_in_flight)

        async def request_iterator():
            yield next(requests)  # the header
            if not is_async:
                for message in requests:
                    yield message
                return
            async for image in images:
                handed_over.append(image)
                yield next(requests)

        call = self._methods["AnalyzeBatch" + _calls.SERIALIZED](request_iterator(), timeout=timeout,
                                             metadata=self._metadata)
        try:
            async for message in call:
                item = reader.feed(message)
                if item is not None:
                    yield item
            reader.finish()
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc("analyze_many", e) from None
        finally:
            call.cancel()

    # The store.
    upload = _awaitable("upload")
    image_info = _awaitable("image_info")
    list = _awaitable("list")
    delete = _awaitable("delete")
    info = _awaitable("info")
    health = _awaitable("health")
    # Analyses.
    histogram = _awaitable("histogram")
    integral_image = _awaitable("integral_image")
    compaction = _awaitable("compaction")
    compact = compaction  # the method's name before it took its analysis's name
    box_filter = _awaitable("box_filter")
    analyze = _awaitable("analyze")


Client.analyze_many.__doc__ = _blocking.Client.analyze_many.__doc__
