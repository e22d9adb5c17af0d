"""glimpse.Client: every RPC of glimpse.v1.ImageAnalytics, with numpy arrays in and out.

The requests, results and errors are glimpse._calls's; this module only runs its RPCs blocking.
"""
from typing import Optional

import grpc

from glimpse import _calls
from glimpse._types import GlimpseError
from glimpse._calls import ImageLike  # noqa: F401 -- the type of every `image` argument


def _blocking(name: str):
    """The Client method running Calls.<name>'s RPCs one after another."""
    steps = getattr(_calls.Calls, name)

    def method(self, *args, **kwargs):
        return _calls.drive(steps(self._calls, *args, **kwargs), self._send)

    method.__name__, method.__qualname__, method.__doc__ = name, f"Client.{name}", steps.__doc__
    method.__wrapped__ = steps  # help() and inspect.signature show its arguments
    return method


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
    options: more gRPC channel options, (name, value) pairs.

    glimpse.aio.Client takes the same arguments and has the same methods, as coroutines.
    """

    def __init__(self, target: Optional[str] = None, *, tls_ca=None, tls_cert=None, tls_key=None,
                 token: Optional[str] = None, timeout: Optional[float] = 300.0,
                 round_robin: bool = False, inline_bytes: int = 3 << 20, options=()):
        c = _calls.connection(target, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                              token=token, round_robin=round_robin, options=options)
        if c.credentials is not None:
            self._channel = grpc.secure_channel(c.target, c.credentials, options=c.options)
        else:
            self._channel = grpc.insecure_channel(c.target, options=c.options)
        self._stub, self._methods = _calls.stub_and_methods(self._channel)
        self._metadata = c.metadata
        self._timeout = timeout
        self._calls = _calls.Calls(inline_bytes)
        self.target = c.target

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, rpc: _calls.Rpc):
        """Runs one RPC to its result; gRPC errors become GlimpseErrors naming rpc.method."""
        multicallable = self._methods[rpc.name]
        try:
            if not rpc.response_stream:
                return rpc.result_of(multicallable(rpc.request, timeout=self._timeout,
                                                   metadata=self._metadata))
            call = multicallable(rpc.request, timeout=self._timeout, metadata=self._metadata)
            try:
                for message in call:
                    rpc.reader.feed(message)
            finally:
                call.cancel()  # a no-op once the stream has ended; frees it after a bad message
            return rpc.reader.finish()
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc(rpc.method, e) from None

    def analyze_many(self, images, analyses, *, ordered: bool = True, max_in_flight: int = 0,
                     timeout: Optional[float] = None):
        """The same analyses of many images in one AnalyzeBatch call, as an iterator of
        BatchItems, one per image: in input order (ordered=True), else as each completes.
        `images`: any iterable (a generator is read only as the call has room for more) of numpy
        arrays, paths, encoded bytes, ImageHandles or ids, or (key, image) pairs; each is sent
        inline (within inline_bytes). `analyses`: as for analyze(). An image that fails gives
        an item with `.error` (a GlimpseError) and the others go on; a failure of the whole call
        raises GlimpseError. `max_in_flight`: fewer images in flight than the server's bound.
        `timeout`: the whole call's deadline in seconds (default: none). glimpse.aio's is an
        async iterator of the same items (`async for item in ...`), and takes an async iterable
        of images too."""
        requests, reader = self._calls.batch("analyze_many", images, analyses, ordered=ordered,
                                             max_in_flight=max_in_flight)
        call = self._methods["AnalyzeBatch" + _calls.SERIALIZED](requests, timeout=timeout, metadata=self._metadata)
        try:
            for message in call:
                item = reader.feed(message)
                if item is not None:
                    yield item
            reader.finish()
        except grpc.RpcError as e:
            raise GlimpseError.from_rpc("analyze_many", e) from None
        finally:
            call.cancel()  # a no-op once the stream has ended; frees it when the caller stops

    # The store.
    upload = _blocking("upload")
    image_info = _blocking("image_info")
    list = _blocking("list")
    delete = _blocking("delete")
    info = _blocking("info")
    health = _blocking("health")
    # Analyses.
    histogram = _blocking("histogram")
    integral_image = _blocking("integral_image")
    compaction = _blocking("compaction")
    compact = compaction  # the method's name before it took its analysis's name
    box_filter = _blocking("box_filter")
    analyze = _blocking("analyze")
