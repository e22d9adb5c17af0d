"""Upload, list, info, delete, health, connection options and errors."""
import os
import shutil
import struct
import subprocess
import zlib

import grpc
import numpy as np
import pytest

import glimpse
from glimpse import _calls
from glimpse._types import raw_pixels
from glimpse.v1 import image_analytics_pb2 as pb
from conftest import DTYPES, REPO, random_image, running_server

SAMPLE = REPO / "samples" / "glimpse-sample.png"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_inline_image_bytes_parse_as_the_message_they_stand_for(rng, dtype, channels):
    """The client writes an analysis request with its image inline itself, the pixels copied
    once; protobuf must read it back as the message built field by field."""
    h, w = (int(v) for v in rng.integers(1, 300, 2))
    a = random_image(rng, h, w, channels, dtype)
    layout, pixels = raw_pixels(a)
    encoded = rng.integers(0, 256, int(rng.integers(0, 40000)), dtype=np.uint8).tobytes()
    requests = [pb.HistogramRequest(variant="private_array"),
                pb.IntegralImageRequest(options=pb.IntegralImageOptions(squared=True)),
                pb.CompactRequest(), pb.BoxFilterRequest(options=pb.BoxFilterOptions(rx=3))]
    for request in requests:
        for kind, head, data in (("raw", pb.RawImage(layout=layout), pixels),
                                 ("encoded", pb.EncodedImage(), encoded)):
            wire = _calls.with_image_data(request, kind, head, data)
            expected = type(request)()
            expected.CopyFrom(request)
            getattr(expected.image, kind).CopyFrom(head)
            getattr(expected.image, kind).data = bytes(memoryview(data).cast("B"))
            assert type(request).FromString(wire) == expected, (type(request).__name__, kind)
            assert len(wire) == len(expected.SerializeToString())
    # A batch's image: the BatchImage inside its AnalyzeBatchRequest.
    key = "k" * int(rng.integers(0, 300))
    for kind, head, data in (("raw", pb.RawImage(layout=layout), pixels),
                             ("encoded", pb.EncodedImage(), encoded)):
        wire = _calls.with_image_data(pb.BatchImage(key=key), kind, head, data, within="image")
        expected = pb.AnalyzeBatchRequest(image=pb.BatchImage(key=key))
        getattr(expected.image.image, kind).CopyFrom(head)
        getattr(expected.image.image, kind).data = bytes(memoryview(data).cast("B"))
        assert pb.AnalyzeBatchRequest.FromString(wire) == expected, ("AnalyzeBatchRequest", kind)
        assert len(wire) == len(expected.SerializeToString())


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, "random"])
def test_upload_stream_bytes_parse_as_the_messages_they_stand_for(rng, size):
    """An upload's (and Analyze's) request stream, written by the client with each chunk copied
    once, reads back as the header with the first 1 MiB chunk, then 1 MiB chunks."""
    n = int(rng.integers(0, 5 << 20)) if size == "random" else size
    data = memoryview(rng.integers(0, 256, n, dtype=np.uint8)).cast("B")
    mib = 1 << 20
    for kind, header in ((pb.UploadImageRequest, pb.UploadHeader(label="l", total_bytes=n)),
                         (pb.AnalyzeRequest, pb.AnalyzeHeader(keep=True, label="l"))):
        got = [kind.FromString(b) for b in _calls._chunked(kind, header, data)]
        expected = [kind(header=header, chunk=bytes(data[:mib]))] + [
            kind(chunk=bytes(data[off:off + mib])) for off in range(mib, n, mib)]
        assert got == expected, (kind.__name__, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_upload_array_round_trip(client, rng, dtype, channels):
    h, w = rng.integers(1, 70, 2)
    a = random_image(rng, h, w, channels, dtype)
    handle = client.upload(a, label="round trip")
    try:
        assert (handle.height, handle.width, handle.channels) == (h, w, channels)
        assert handle.format == np.dtype(dtype).name and handle.dtype == dtype
        assert handle.bytes >= a.nbytes and handle.label == "round trip"
        assert handle.origin == "upload" and len(handle.image_id) == 32
        assert client.image_info(handle.image_id).shape == handle.shape
        assert handle.image_id in [i.image_id for i in client.list()]
        # The identity filter returns the stored pixels: the bytes went up in the right order.
        back = client.box_filter(handle, 0, 0).pixels
        np.testing.assert_array_equal(back, a.reshape(h, w, channels))
    finally:
        assert client.delete(handle) == handle.bytes
    with pytest.raises(glimpse.GlimpseError) as e:
        client.image_info(handle)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_upload_non_contiguous_and_big_endian(client, rng):
    a = rng.integers(0, 65536, (40, 30, 4), dtype=np.uint16)
    view = a[::2, ::3, 1:]                       # strided, 3 channels
    swapped = view.astype(view.dtype.newbyteorder(">"))
    for arr in (view, swapped):
        handle = client.upload(arr)
        try:
            np.testing.assert_array_equal(client.box_filter(handle, 0).pixels, view)
        finally:
            client.delete(handle)


def test_upload_file_path_and_bytes(client):
    by_path = client.upload(SAMPLE)
    by_bytes = client.upload(SAMPLE.read_bytes(), label="bytes", channels=1)
    try:
        assert by_path.label == SAMPLE.name
        assert (by_path.width, by_path.height, by_path.channels) == (640, 480, 3)
        assert by_bytes.channels == 1 and by_bytes.label == "bytes"
        a = client.box_filter(by_path, 0).pixels
        # The same file sent inline by path gives the same analysis as the stored copy.
        assert (client.histogram(str(SAMPLE)).counts == client.histogram(by_path).counts).all()
        assert (client.histogram(a).counts == client.histogram(by_path).counts).all()
    finally:
        client.delete(by_path)
        client.delete(by_bytes)


def exif_block(orientation, little=True):
    """A TIFF block whose first IFD holds the EXIF orientation tag (a SHORT)."""
    e = "<" if little else ">"
    return ((b"II" if little else b"MM") + struct.pack(e + "HI", 42, 8) + struct.pack(e + "H", 1) +
            struct.pack(e + "HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(e + "I", 0))


def png_with_exif(png, tiff):
    """The PNG file with an eXIf chunk of `tiff` after its IHDR chunk (8 + 25 bytes in)."""
    chunk = (struct.pack(">I", len(tiff)) + b"eXIf" + tiff +
             struct.pack(">I", zlib.crc32(b"eXIf" + tiff)))
    return png[:33] + chunk + png[33:]


def jpeg_with_exif(jpeg, tiff):
    """The JPEG file with an APP1 EXIF segment of `tiff` after its SOI marker."""
    payload = b"Exif\0\0" + tiff
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


# What a viewer shows of the stored image `a` for each EXIF orientation, in numpy's terms.
SHOWN = {
    1: lambda a: a,
    2: np.fliplr,
    3: lambda a: np.rot90(a, 2),
    4: np.flipud,
    5: lambda a: a.swapaxes(0, 1),
    6: lambda a: np.rot90(a, -1),  # a quarter turn clockwise
    7: lambda a: np.rot90(a, 2).swapaxes(0, 1),
    8: lambda a: np.rot90(a, 1),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_turns_the_image_as_viewers_show_it(client, orientation):
    data = png_with_exif(SAMPLE.read_bytes(), exif_block(orientation, little=orientation % 2 == 0))
    stored = client.upload(data, orientation="stored")
    shown = client.upload(data, label="shown")
    try:
        assert (stored.width, stored.height) == (640, 480)
        a = client.box_filter(stored, 0).pixels
        want = SHOWN[orientation](a)
        assert (shown.height, shown.width, shown.channels) == want.shape
        b = client.box_filter(shown, 0).pixels
        assert b.shape == want.shape and (b == want).all()
        # The file sent inline is turned the same way, and every analysis follows.
        assert (client.box_filter(data, 0).pixels == want).all()
        table = client.integral_image(data).table
        assert table.shape == want.shape and int(table[-1, -1, 0]) == int(want[:, :, 0].sum())
        assert (table[:, -1, 0] == want[:, :, 0].astype(np.uint64).sum(axis=1).cumsum()).all()
    finally:
        client.delete(stored)
        client.delete(shown)


def test_exif_orientation_matches_opencvs_reading_of_jpeg_and_png(client):
    """cv2.imdecode (IMREAD_COLOR) turns JPEG and PNG files as their tag says: the same pixels."""
    cv2 = pytest.importorskip("cv2")
    bgr = cv2.imdecode(np.frombuffer(SAMPLE.read_bytes(), np.uint8), cv2.IMREAD_COLOR)
    ok, jpeg = cv2.imencode(".jpg", bgr[:101, :67])
    assert ok
    for orientation in range(1, 9):
        tiff = exif_block(orientation)
        for data in (png_with_exif(SAMPLE.read_bytes(), tiff), jpeg_with_exif(jpeg.tobytes(), tiff)):
            want = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
            got = client.box_filter(data, 0).pixels
            assert got.shape == want.shape and (got == want).all(), orientation


def test_orientation_is_checked_before_anything_is_sent(client):
    with pytest.raises(ValueError, match="orientation must be one of file, stored, got 'sideways'"):
        client.upload(SAMPLE, orientation="sideways")
    with pytest.raises(ValueError, match="orientation applies to encoded files"):
        client.upload(np.zeros((2, 2), np.uint8), orientation="stored")


@pytest.mark.parametrize("inline", [True, False])
def test_encoded_files_decode_as_asked_in_every_call(client, tiny_inline_client, inline):
    """glimpse.Encoded carries channels and orientation to the decoder wherever a file goes:
    inline in an analysis or stored for it (tiny_inline_client), streamed by analyze, in a batch
    (inline), and to upload. The file is tagged 6 (a quarter turn clockwise), so each option shows."""
    c = client if inline else tiny_inline_client
    data = png_with_exif(SAMPLE.read_bytes(), exif_block(6))
    want = {}
    for channels in (0, 1, 4):
        for orientation in ("file", "stored"):
            stored = c.upload(data, channels=channels, orientation=orientation)
            try:
                want[channels, orientation] = c.box_filter(stored, 0).pixels
            finally:
                c.delete(stored)
    assert want[0, "stored"].shape == (480, 640, 3) and want[0, "file"].shape == (640, 480, 3)
    assert want[1, "file"].shape == (640, 480, 1) and want[4, "stored"].shape == (480, 640, 4)
    for (channels, orientation), pixels in want.items():
        what = (channels, orientation)
        encoded = glimpse.Encoded(data, channels=channels, orientation=orientation)
        assert (c.box_filter(encoded, 0).pixels == pixels).all(), what
        counts = c.histogram(encoded).counts
        assert counts.shape[0] == pixels.shape[2], what
        table = c.integral_image(encoded).table
        assert table.shape == pixels.shape, what
        assert (table[-1, -1] == pixels.reshape(-1, pixels.shape[2]).sum(axis=0)).all(), what
        box, = c.analyze(encoded, [("box_filter", {"rx": 0})])
        assert (box.pixels == pixels).all(), what
        if inline:  # a batch's images travel inline only
            item, = c.analyze_many([encoded], [("box_filter", {"rx": 0})])
            assert item.ok and (item[0].pixels == pixels).all(), what
        kept = c.upload(encoded)
        try:
            assert kept.shape == pixels.shape, what
        finally:
            c.delete(kept)


def test_encoded_paths_label_and_key_as_plain_paths_do(client, tmp_path):
    path = tmp_path / "tagged.png"
    path.write_bytes(png_with_exif(SAMPLE.read_bytes(), exif_block(8)))
    encoded = glimpse.Encoded(path, channels=1, orientation="stored")
    kept = client.upload(encoded)
    try:
        assert kept.label == "tagged.png" and kept.shape == (480, 640, 1)
    finally:
        client.delete(kept)
    item, = client.analyze_many([encoded], [("histogram", {})])
    assert item.key == str(path) and item[0].counts.shape == (1, 256)
    turned, = client.analyze_many([glimpse.Encoded(str(path))], [("integral_image", {})])
    assert turned[0].table.shape == (640, 480, 3)


def test_encoded_options_are_checked_before_anything_is_sent(client):
    with pytest.raises(ValueError, match="channels must be an integer in \\[0, 4\\], got 5"):
        glimpse.Encoded(SAMPLE, channels=5)
    with pytest.raises(ValueError, match="channels must be an integer in \\[0, 4\\], got True"):
        glimpse.Encoded(SAMPLE, channels=True)
    with pytest.raises(ValueError, match="orientation must be one of file, stored, got 'up'"):
        glimpse.Encoded(SAMPLE, orientation="up")
    with pytest.raises(TypeError, match="Encoded.source must be a path or the bytes"):
        glimpse.Encoded(np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="not both: got channels=1, orientation='file' with "
                                         "Encoded\\('.*glimpse-sample.png', channels=0, "
                                         "orientation='file'\\)"):
        client.upload(glimpse.Encoded(SAMPLE), channels=1)
    assert repr(glimpse.Encoded(b"\xff" * 5000, channels=1)) == \
        "Encoded(<5000 bytes>, channels=1, orientation='file')"
    with pytest.raises(FileNotFoundError):
        client.histogram(glimpse.Encoded("/nonexistent/photo.jpg"))


def test_a_file_name_in_another_encoding_is_labelled_as_text(client, tmp_path):
    """A file named in Latin-1 on a Linux file system (its name not UTF-8) is sent with that name
    as its label or key, what UTF-8 cannot read shown as U+FFFD: by upload, analyze and
    analyze_many."""
    path = tmp_path / os.fsdecode(b"caf\xe9 \xff.png")
    shutil.copyfile(SAMPLE, path)
    handle = client.upload(path)
    try:
        assert handle.label == "caf\ufffd \ufffd.png", handle.label
    finally:
        client.delete(handle)
    result = client.analyze(path, [("histogram", {})], keep=True)
    try:
        assert result.kept.label == "caf\ufffd \ufffd.png", result.kept
    finally:
        client.delete(result.kept)
    # A batch's key is the whole path, as text.
    items = list(client.analyze_many([path, SAMPLE], [("histogram", {})]))
    assert [i.ok for i in items] == [True, True], [i.error for i in items]
    assert items[0].key == str(tmp_path / "caf\ufffd \ufffd.png"), items[0].key


def test_large_inputs_are_uploaded_then_deleted(tiny_inline_client, rng):
    c = tiny_inline_client
    before = {i.image_id for i in c.list()}
    a = random_image(rng, 33, 45, 3, np.uint8)
    r = c.histogram(a)
    assert r.image.image_id != ""           # analysed by id, not inline
    assert r.counts.sum() == a.size
    c.histogram(SAMPLE)                      # a file, too
    assert {i.image_id for i in c.list()} == before


def test_inline_array_has_no_id(client, rng):
    r = client.histogram(random_image(rng, 5, 7, 2, np.uint16))
    assert r.image.image_id == "" and r.image.shape == (5, 7, 2)


def test_info_and_health(client):
    info = client.info()
    assert info.renderer and info.version
    assert {"histogram", "integral_image", "box_filter"} <= set(info.analyses)
    assert len(info.analyses) == 4
    assert client.health() == "SERVING"
    assert client.health("glimpse.v1.ImageAnalytics") == "SERVING"
    with pytest.raises(glimpse.GlimpseError) as e:
        client.health("no.such.Service")
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_token_and_round_robin_target(server):
    port = server.rsplit(":", 1)[1]
    with glimpse.Client(f"dns:///127.0.0.1:{port}", round_robin=True, token="secret",
                        timeout=30) as c:
        assert c.health() == "SERVING"
        assert c.histogram(np.zeros((3, 3), np.uint8), bins=4).counts.tolist() == [[9, 0, 0, 0]]


def test_errors_carry_code_and_message(client):
    cases = [
        (lambda: client.histogram("0" * 32), grpc.StatusCode.NOT_FOUND, "0" * 32),
        (lambda: client.delete("f" * 32), grpc.StatusCode.NOT_FOUND, "f" * 32),
        (lambda: client.upload(b"not an image"), grpc.StatusCode.INVALID_ARGUMENT, ""),
        (lambda: client.histogram(b"\x89PNG\r\n\x1a\n broken"),
         grpc.StatusCode.INVALID_ARGUMENT, ""),
        (lambda: client.histogram(np.zeros((4, 4), np.uint8), variant="no_such_variant"),
         grpc.StatusCode.INVALID_ARGUMENT, "no_such_variant"),
    ]
    for call, code, text in cases:
        with pytest.raises(glimpse.GlimpseError) as e:
            call()
        assert e.value.code == code, e.value
        assert text in e.value.details
        assert code.name in str(e.value)


def _len(number: int, payload: bytes) -> bytes:
    """A length-delimited field (payloads under 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


_NOT_UTF8 = b"ab\xff\xfe"  # byte 2 is 0xff
_UTF8_FAULT = "is not UTF-8: byte 2 of its 4 is 0xff"

# Each method, a request protobuf cannot parse, and what the answer must say. Python's protobuf
# cannot build these (it refuses text that is not UTF-8); C++'s can, and any hand-made bytes can.
_MALFORMED = [
    ("Histogram", "unary", _len(1, _len(1, _NOT_UTF8)),
     "the request is not a glimpse.v1.HistogramRequest: image.image_id " + _UTF8_FAULT),
    ("IntegralImage", "server_stream", _len(3, _NOT_UTF8),
     "the request is not a glimpse.v1.IntegralImageRequest: variant " + _UTF8_FAULT),
    ("Compact", "server_stream", _len(1, b"\x0a\x09abc"),
     "the request is not a glimpse.v1.CompactRequest: image.image_id at byte 2 declares 9 bytes "
     "where 3 remain in image"),
    ("BoxFilter", "server_stream", _len(6, _NOT_UTF8),
     "the request is not a glimpse.v1.BoxFilterRequest: label " + _UTF8_FAULT),
    ("GetImageInfo", "unary", _len(1, _NOT_UTF8),
     "the request is not a glimpse.v1.GetImageInfoRequest: image_id " + _UTF8_FAULT),
    ("DeleteImage", "unary", b"\x0f",
     "the request is not a glimpse.v1.DeleteImageRequest: image_id: wire type 7 at byte 0 does "
     "not exist (protobuf's are 0 to 5)"),
    ("ListImages", "unary", b"\x08",
     "the request is not a glimpse.v1.ListImagesRequest: field 1: its varint at byte 0 runs past "
     "the end of the message"),
    ("GetServerInfo", "unary", b"\x0b\x10\x01",
     "the request is not a glimpse.v1.GetServerInfoRequest: field 1: its group is never closed"),
    ("UploadImage", "client_stream", _len(1, _len(3, _NOT_UTF8)),
     "message 1 of the stream is not a glimpse.v1.UploadImageRequest: header.label " + _UTF8_FAULT),
    ("Analyze", "bidi", _len(1, _len(5, _NOT_UTF8)),
     "message 1 of the stream is not a glimpse.v1.AnalyzeRequest: header.label " + _UTF8_FAULT),
    ("AnalyzeBatch", "bidi", _len(1, _len(1, _len(1, _len(3, _NOT_UTF8)))),
     "message 1 of the stream is not a glimpse.v1.AnalyzeBatchRequest: "
     "header.analyses[0].histogram.variant " + _UTF8_FAULT),
]


@pytest.mark.parametrize("method,kind,request_bytes,message", _MALFORMED,
                         ids=[m[0] for m in _MALFORMED])
def test_a_request_that_does_not_parse_is_refused_with_its_fault(server, method, kind,
                                                                 request_bytes, message):
    """Every method parses its requests itself: bytes protobuf refuses are INVALID_ARGUMENT naming
    the message type, the field and the fault (gRPC's own parse would answer UNIMPLEMENTED with
    no message, or end a stream as if the client had stopped sending)."""
    path = f"/glimpse.v1.ImageAnalytics/{method}"
    with grpc.insecure_channel(server) as channel:
        make = getattr(channel, {"unary": "unary_unary", "server_stream": "unary_stream",
                                 "client_stream": "stream_unary", "bidi": "stream_stream"}[kind])
        call = make(path, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as e:
            if kind in ("unary", "server_stream"):
                answer = call(request_bytes, timeout=30)
            else:
                answer = call(iter([request_bytes]), timeout=30)
            if kind in ("server_stream", "bidi"):
                list(answer)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert message in e.value.details(), e.value.details()


def test_a_batch_message_that_does_not_parse_fails_as_its_image(server, tmp_path):
    """A message of a batch that does not parse is the image at its place failing: the images
    around it are answered, and the summary counts it (the batch does not end early with OK)."""
    header = pb.AnalyzeBatchRequest(header=pb.AnalyzeBatchHeader(
        analyses=[pb.Analysis(histogram=pb.HistogramRequest())], ordered=True))
    image = pb.AnalyzeBatchRequest(image=pb.BatchImage(key="k", image=pb.ImageRef(
        raw=pb.RawImage(layout=pb.ImageLayout(width=2, height=2, channels=1,
                                              format=pb.SAMPLE_FORMAT_UINT8),
                        data=bytes(4)))))
    bad = _len(2, _len(1, _NOT_UTF8))  # image.key
    stream = [header.SerializeToString(), image.SerializeToString(), bad,
              image.SerializeToString()]
    with grpc.insecure_channel(server) as channel:
        call = channel.stream_stream("/glimpse.v1.ImageAnalytics/AnalyzeBatch",
                                     request_serializer=None, response_deserializer=None)
        answers = [pb.AnalyzeBatchResponse.FromString(m) for m in call(iter(stream), timeout=60)]
    ends = {a.index: a.end for a in answers if a.HasField("end")}
    assert sorted(ends) == [0, 1, 2], answers
    assert not ends[0].HasField("error") and not ends[2].HasField("error"), ends
    assert ends[1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0], ends[1]
    assert ("message 3 of the stream is not a glimpse.v1.AnalyzeBatchRequest: image.key "
            + _UTF8_FAULT) in ends[1].error.message, ends[1]
    summary = [a.summary for a in answers if a.HasField("summary")]
    assert len(summary) == 1 and summary[0].images == 3 and summary[0].failed == 1, summary


def test_unreachable_server():
    with glimpse.Client("127.0.0.1:1", timeout=5) as c:
        with pytest.raises(glimpse.GlimpseError) as e:
            c.info()
    assert e.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_local_argument_errors(client):
    with pytest.raises(TypeError, match="int32"):
        client.upload(np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="5"):
        client.histogram(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(ValueError, match=r"\(4,\)"):
        client.histogram(np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="source"):
        client.histogram(np.zeros((2, 2), np.uint8), source="hue")
    with pytest.raises(ValueError, match="border"):
        client.box_filter(np.zeros((2, 2), np.uint8), 1, border="wrap")
    with pytest.raises(TypeError, match="list"):
        client.histogram([[1, 2]])
    with pytest.raises(FileNotFoundError):
        client.histogram("/no/such/file.png")


def test_tls(tmp_path):
    # A self-signed certificate for localhost (openssl comes with ca-certificates).
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    with running_server(f"--tls-cert={cert}", f"--tls-key={key}") as port:
        for ca in (str(cert), cert.read_bytes()):
            with glimpse.Client(f"localhost:{port}", tls_ca=ca, timeout=30) as c:
                assert c.health() == "SERVING"
                assert c.histogram(np.full((2, 3), 7, np.uint8), bins=8).counts[0, 0] == 6
        with glimpse.Client(f"localhost:{port}", timeout=5) as plain:
            with pytest.raises(glimpse.GlimpseError) as e:
                plain.info()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
