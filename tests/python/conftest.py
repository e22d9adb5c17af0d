"""Starts the real glimpse-server on a free port for the session and hands out clients and seeded
random images. The server binary: $GLIMPSE_SERVER_BINARY, else build/server/glimpse-server.
Without an EGL context the tests skip, unless GLIMPSE_REQUIRE_GPU_CONTEXT=1 (CI)."""
import contextlib
import os
import pathlib
import re
import secrets
import signal
import subprocess
import tempfile
import time
import zlib

import numpy as np
import pytest

import glimpse

REPO = pathlib.Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("GLIMPSE_TEST_SEED") or secrets.randbits(32))
# Sizes that break tiling assumptions: single pixels, single rows and columns, primes, one past a
# 16-wide workgroup.
AWKWARD_SIZES = [(1, 1), (1, 29), (23, 1), (17, 33), (61, 47)]
DTYPES = [np.uint8, np.uint16, np.float32]


def pytest_report_header(config):
    return f"glimpse: seed {SEED} (GLIMPSE_TEST_SEED={SEED} repeats this run)"


def random_image(rng, height, width, channels, dtype):
    """Random samples over the whole range of integer formats; float samples are multiples of
    1/256 in [0, 1), so every sum the server forms in double is exact and comparisons can be."""
    shape = (height, width) if channels == 1 and rng.integers(2) else (height, width, channels)
    if dtype == np.float32:
        return (rng.integers(0, 256, shape) / 256).astype(np.float32)
    return rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)


@pytest.fixture
def rng(request):
    seed = [SEED, zlib.crc32(request.node.nodeid.encode())]
    print(f"seed {seed} (GLIMPSE_TEST_SEED={SEED})")
    return np.random.default_rng(seed)


@contextlib.contextmanager
def running_server(*flags):
    """Starts the server binary on a free port with extra flags; yields its port; SIGTERM at the
    end must stop it with exit code 0."""
    binary = os.environ.get("GLIMPSE_SERVER_BINARY") or str(REPO / "build/server/glimpse-server")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no server binary at {binary} (build it, or set GLIMPSE_SERVER_BINARY)")
    log = tempfile.NamedTemporaryFile("w+", prefix="glimpse-server-", suffix=".log")
    # No start-up warm-up: the C++ service tests cover it, and these calls need none.
    proc = subprocess.Popen([binary, "--listen=127.0.0.1:0", "--shutdown-grace-s=5", "--warm-up=0",
                             *flags],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            text = pathlib.Path(log.name).read_text()
            m = re.search(r"listening on .*\(port (\d+)\)", text)
            if m:
                port = int(m.group(1))
            elif proc.poll() is not None:
                if "opening the GL context" in text and os.environ.get(
                        "GLIMPSE_REQUIRE_GPU_CONTEXT") != "1":
                    pytest.skip(f"no EGL context: {text}")
                pytest.fail(f"server exited at start-up:\n{text}")
            else:
                time.sleep(0.1)
        if port is None:
            pytest.fail(f"no port reported within 60 s:\n{pathlib.Path(log.name).read_text()}")
        yield port
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, pathlib.Path(log.name).read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def server():
    """The address of a glimpse-server running for the whole session."""
    with running_server() as port:
        address = f"127.0.0.1:{port}"
        with glimpse.Client(address, timeout=30) as c:
            assert c.health() == "SERVING"
        yield address


@pytest.fixture
def client(server):
    with glimpse.Client(server, timeout=120) as c:
        yield c


@pytest.fixture
def tiny_inline_client(server):
    """Sends nothing inline: every array or file is uploaded, analysed by id and deleted."""
    with glimpse.Client(server, timeout=120, inline_bytes=0) as c:
        yield c
