"""Access control from the Python client: bearer tokens (argument and $GLIMPSE_TOKEN) against a
server with --tokens, and client certificates against one with --tls-client-ca, using a test CA
made by the openssl command in a temporary directory."""
import secrets
import subprocess

import grpc
import numpy as np
import pytest

import glimpse
from conftest import random_image, running_server


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    t = {"alice": secrets.token_hex(16), "bob": secrets.token_hex(16)}
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    path.write_text("".join(f"{tenant} {token}\n" for tenant, token in t.items()))
    return path, t


def test_tokens_name_the_tenant(tokens, rng, monkeypatch):
    path, t = tokens
    a = random_image(rng, 9, 7, 3, np.uint8)
    with running_server(f"--tokens={path}") as port:
        address = f"127.0.0.1:{port}"
        monkeypatch.delenv("GLIMPSE_TOKEN", raising=False)
        with glimpse.Client(address, timeout=30) as anyone:
            for call in (anyone.list, anyone.info, lambda: anyone.upload(a)):
                with pytest.raises(glimpse.GlimpseError) as e:
                    call()
                assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
            assert anyone.health() == "SERVING"  # probes need no token
        with glimpse.Client(address, timeout=30, token=secrets.token_hex(16)) as wrong:
            with pytest.raises(glimpse.GlimpseError) as e:
                wrong.list()
            assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        with glimpse.Client(address, timeout=30, token=t["alice"]) as alice, \
                glimpse.Client(address, timeout=30, token=t["bob"]) as bob:
            assert alice.info().access_control
            handle = alice.upload(a)
            assert [i.image_id for i in alice.list()] == [handle.image_id]
            assert bob.list() == []
            for call in (lambda: bob.image_info(handle), lambda: bob.histogram(handle),
                         lambda: bob.delete(handle)):
                with pytest.raises(glimpse.GlimpseError) as e:
                    call()
                assert e.value.code == grpc.StatusCode.NOT_FOUND
            np.testing.assert_array_equal(alice.box_filter(handle, 0, 0).pixels, a.reshape(9, 7, 3))
        # The token from the environment.
        monkeypatch.setenv("GLIMPSE_TOKEN", t["alice"])
        with glimpse.Client(address, timeout=30) as from_env:
            assert [i.image_id for i in from_env.list()] == [handle.image_id]
            assert from_env.delete(handle) == handle.bytes


def make_pki(d):
    script = """
set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key; }
ca() { key $1; openssl req -x509 -new -key $1.key -days 2 -subj "/CN=$1" -out $1.crt; }
cert() { key $1; openssl req -new -key $1.key -subj "$3" -out $1.csr
  printf '%s\\n' "$4" > $1.ext
  openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2 \\
    -extfile $1.ext -out $1.crt; }
ca ca
cert server ca /CN=localhost 'subjectAltName=DNS:localhost,IP:127.0.0.1'
cert alice ca /CN=alice 'extendedKeyUsage=clientAuth'
cert bob ca /CN=bob 'extendedKeyUsage=clientAuth'
"""
    subprocess.run(["bash", "-c", script], cwd=d, check=True, capture_output=True)


def test_client_certificates_name_the_tenant(tmp_path, rng):
    make_pki(tmp_path)
    a = random_image(rng, 5, 11, 1, np.uint8)
    with running_server(f"--tls-cert={tmp_path / 'server.crt'}",
                        f"--tls-key={tmp_path / 'server.key'}",
                        f"--tls-client-ca={tmp_path / 'ca.crt'}") as port:
        def client(who):
            return glimpse.Client(f"127.0.0.1:{port}", timeout=30, tls_ca=tmp_path / "ca.crt",
                                  tls_cert=tmp_path / f"{who}.crt",
                                  tls_key=(tmp_path / f"{who}.key").read_bytes(),
                                  options=[("grpc.ssl_target_name_override", "localhost")])
        with client("alice") as alice, client("bob") as bob:
            handle = alice.upload(a)
            assert alice.image_info(handle).image_id == handle.image_id
            with pytest.raises(glimpse.GlimpseError) as e:
                bob.image_info(handle)
            assert e.value.code == grpc.StatusCode.NOT_FOUND
            assert bob.list() == []
        # Without a certificate the handshake fails.
        with glimpse.Client(f"127.0.0.1:{port}", timeout=10, tls_ca=tmp_path / "ca.crt",
                            options=[("grpc.ssl_target_name_override", "localhost")]) as none:
            with pytest.raises(glimpse.GlimpseError) as e:
                none.list()
            assert e.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(ValueError):
        glimpse.Client("127.0.0.1:1", tls_cert=tmp_path / "alice.crt")
