#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/<target>/seed-*): tiny valid files of
every format the server decodes, files whose headers claim too much, raw upload streams and
requests. Proto inputs are written as text and encoded with protoc. Standard library only (the
JPEG and WebP files are kept as bytes).

    tests/fuzz/make_seeds.py        (from the repository root; rewrites seed-* files only, so the
                                     crash-* regression inputs stay)
"""
import pathlib
import struct
import subprocess
import zlib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def png(w, h, color_type, depth, raw_rows, palette=None, claim=None, trns=None, interlace=0,
        filters=None, idats=1, exif=None):
    """A PNG of `raw_rows` (each scanline's bytes, after its filter byte: 0, or filters[i % n] for
    row i, the bytes then taken as filtered; with interlace 1, the scanlines of the Adam7 passes in
    order, as adam7_rows makes them), its image data compressed at level 9 and split into `idats`
    IDAT chunks, the first of one byte and the second empty when there are three or more."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    cw, ch = claim or (w, h)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cw, ch, depth, color_type,
                                                            0, 0, interlace))
    if palette:
        out += chunk(b"PLTE", palette)
    if trns:
        out += chunk(b"tRNS", trns)
    if exif:
        out += chunk(b"eXIf", exif)
    filters = filters or [0]
    z = zlib.compress(b"".join(bytes([filters[i % len(filters)]]) + r for i, r in enumerate(raw_rows)),
                      9 if idats > 1 else -1)
    if idats == 1:
        return out + chunk(b"IDAT", z) + chunk(b"IEND", b"")
    cuts = [0, 1, 1] + [1 + (len(z) - 1) * i // (idats - 2) for i in range(1, idats - 2)] + [len(z)]
    for a, b in zip(cuts, cuts[1:]):
        out += chunk(b"IDAT", z[a:b])
    return out + chunk(b"IEND", b"")


def exif(orientation, little=True, entries=1):
    """A TIFF block whose first IFD holds the EXIF orientation tag (a SHORT); `entries` is the
    count the IFD claims."""
    e = "<" if little else ">"
    return ((b"II" if little else b"MM") + struct.pack(e + "HIH", 42, 8, entries) +
            struct.pack(e + "HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(e + "I", 0))


def jpeg_with_exif(jpeg, tiff):
    """`jpeg` with an APP1 EXIF segment of `tiff` after SOI."""
    payload = b"Exif\0\0" + tiff
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


def webp_with_exif(simple, w, h, tiff):
    """The simple WebP file `simple` in the extended format (VP8X: EXIF and alpha flags), its
    image chunk, then an EXIF chunk of `tiff`."""
    body = (b"WEBP" + b"VP8X" + struct.pack("<I", 10) + bytes([0x18, 0, 0, 0]) +
            (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little") + simple[12:] +
            b"EXIF" + struct.pack("<I", len(tiff)) + tiff + b"\0" * (len(tiff) % 2))
    return b"RIFF" + struct.pack("<I", len(body)) + body


def adam7_rows(w, h, pixel):
    """The scanlines of the seven Adam7 passes of a w x h image of whole-byte pixels."""
    rows = []
    for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
                           (1, 0, 2, 2), (0, 1, 1, 2)):
        if x0 < w:
            rows += [b"".join(pixel(x, y) for x in range(x0, w, dx)) for y in range(y0, h, dy)]
    return rows


def bmp(w, h):
    pad = (4 - (w * 3) % 4) % 4
    pixels = b"".join(bytes((x * 40 + y * 70) % 256 for x in range(w * 3)) + b"\0" * pad
                      for y in range(h))
    header = struct.pack("<2sIHHI", b"BM", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    return header + info + pixels


def tga(w, h, channels):
    header = struct.pack("<BBBHHBHHHHBB", 0, 0, 3 if channels == 1 else 2, 0, 0, 0, 0, 0, w, h,
                         8 * channels, 0)
    return header + bytes((i * 37) % 256 for i in range(w * h * channels))


def hdr(w, h):
    head = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y %d +X %d\n" % (h, w)
    return head + bytes([128, 64, 32, 129] * (w * h))


# A 1x1 GIF89a (one colour table entry pair, one LZW-coded pixel).
GIF_1X1 = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c000000000100"
                        "010000020144003b")


# Small JPEG and WebP files of an 8x8 gradient, made with Pillow 9.4 (libjpeg-turbo 2.1, libwebp
# 1.2): im.save(buf, "JPEG", quality=50, optimize=True, subsampling=2 | 0, progressive=True; the
# grey and CMYK ones of im.convert("L" | "CMYK")), im.save(buf, "WEBP", quality=80 | lossless=True;
# the alpha one of an RGBA image). Kept as bytes so that this script needs no imaging library.
JPEG_420 = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffdb0043011112121815182f1a1a2f63423842636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363636363636363636363636363ffc000110800080008030122000211010311"
    "01ffc4001500010100000000000000000000000000000004ffc4001710010101010000000000000000000000"
    "0000052231ffc4001501010100000000000000000000000000000002ffc4001b110001040300000000000000"
    "00000000000001020304111321ffda000c03010002110311003f008e6c2e6001ae5c154adcba93a7ffd9"
)
JPEG_444 = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffdb0043011112121815182f1a1a2f63423842636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363636363636363636363636363ffc000110800080008030111000211010311"
    "01ffc40014000100000000000000000000000000000004ffc400171001000300000000000000000000000000"
    "05002231ffc40014010100000000000000000000000000000000ffc400181100030101000000000000000000"
    "0000000002042131ffda000c03010002110311003f0019a1652158437734ffd9"
)
JPEG_PROGRESSIVE = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffdb0043011112121815182f1a1a2f63423842636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363636363636363636363636363ffc200110800080008030122000211010311"
    "01ffc4001500010100000000000000000000000000000003ffc4001501010100000000000000000000000000"
    "000001ffda000c03010002100310000001885fffc4001510010100000000000000000000000000000300ffda"
    "000801010001050230bfffc40017110003010000000000000000000000000000020312ffda0008010301013f"
    "018d5b27ffc4001511010100000000000000000000000000000100ffda0008010201013f011bffc400141001"
    "00000000000000000000000000000000ffda0008010100063f027fffc4001510010100000000000000000000"
    "000000000061ffda0008010100013f2193ffda000c0301000200030000001003ffc400161100030000000000"
    "000000000000000000001121ffda0008010301013f105f4fffc4001611000300000000000000000000000000"
    "00000111ffda0008010201013f10643fffc4001510010100000000000000000000000000000031ffda000801"
    "0100013f108bffd9"
)
JPEG_GREY = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffc0000b080008000801011100ffc40014000100000000000000000000000000000004ffc4001710010003"
    "0000000000000000000000000005002231ffda0008010100003f0019a16527ffd9"
)
JPEG_CMYK = bytes.fromhex(
    "ffd8ffee000e41646f626500640000000000ffdb004300100b0c0e0c0a100e0d0e1211101318281a18161618"
    "3123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ff"
    "c000140800080008044311004d11005911004b1100ffc4001500010100000000000000000000000000000407"
    "ffc4001c10000200070000000000000000000000000005061622324363a1ffda000e0443004d0059004b0000"
    "3f001c1b8c1ca3af80d328b692807fffd9"
)
WEBP_LOSSY = bytes.fromhex(
    "524946464c000000574542505650382040000000f001009d012a0800080001402625a8027400dd8b5dce7600"
    "00fefd284ae3cf8ec9f5ccead287672d097d9c849f7fffd47f34172497fbfe7ed0ffdb1ff4040000"
)
WEBP_LOSSLESS = bytes.fromhex(
    "524946462c000000574542505650384c200000002f07c00100998ce87f6c0a518882f73f2024202cf17fa8e6"
    "c078444c00d8de00"
)
WEBP_ALPHA = bytes.fromhex(
    "524946469000000057454250565038580a00000010000000070000070000414c504827000000013f40906d1b"
    "52b8c1fa8888750806214979851452482185145238ffa388e87fc6b21dd7f30500005650382042000000f001"
    "009d012a0800080001402625a8027400dd8b5dceb20000fefd284ae3cf8ec9f5ccead287672d097cb57f5f5f"
    "ffa8fe682e1ff2c9fc463d1ff69ffd14ba0a0000"
)


def image_seeds():
    grey = [bytes([0, 128, 255])]
    rgb = [bytes(range(i * 9, i * 9 + 9)) for i in range(2)]
    rgba = [bytes(range(i * 8, i * 8 + 8)) for i in range(2)]
    grey16 = [struct.pack(">HH", 1, 65535), struct.pack(">HH", 256, 4097)]
    files = {
        "png-grey-3x1": png(3, 1, 0, 8, grey),
        "png-rgb-3x2": png(3, 2, 2, 8, rgb),
        "png-rgba-2x2": png(2, 2, 6, 8, rgba),
        "png-grey-alpha-1x1": png(1, 1, 4, 8, [b"\x10\x20"]),
        "png-palette-2x1": png(2, 1, 3, 8, [b"\x00\x01"], palette=b"\xff\x00\x00\x00\xff\x00"),
        "png-grey1bit-8x1": png(8, 1, 0, 1, [b"\xa5"]),
        "png-grey16-2x2": png(2, 2, 0, 16, grey16),
        "png-rgb16-1x1": png(1, 1, 2, 16, [struct.pack(">HHH", 1, 2, 60000)]),
        # Headers claiming 10^10 and 2^31-1 x 1 pixels: refused before any decoding.
        "png-claims-100000x100000": png(1, 1, 0, 8, [b"\0"], claim=(100000, 100000)),
        "png-claims-2147483647x1": png(1, 1, 0, 8, [b"\0"], claim=(2147483647, 1)),
        "png-truncated": png(3, 2, 2, 8, rgb)[:40],
        "pgm-3x2": b"P5\n3 2\n255\n" + bytes([0, 1, 2, 253, 254, 255]),
        "pgm16-2x1": b"P5\n# sixteen bits\n2 1\n65535\n" + struct.pack(">HH", 258, 65534),
        "ppm-2x2": b"P6 2 2 255\n" + bytes(range(12)),
        "ppm-truncated": b"P6 2 2 255\n" + bytes(range(5)),
        "bmp-3x2": bmp(3, 2),
        "tga-rgb-2x2": tga(2, 2, 3),
        "tga-grey-3x1": tga(3, 1, 1),
        "hdr-2x1": hdr(2, 1),
        "gif-1x1": GIF_1X1,
        "png-palette-trns-3x1": png(3, 1, 3, 2, [b"\x1b"], palette=bytes(range(12)),
                                    trns=b"\x00\x80"),
        "png-grey2bit-trns-5x1": png(5, 1, 0, 2, [b"\x1b\x40"], trns=b"\x00\x01"),
        "png-rgba16-2x1": png(2, 1, 6, 16, [struct.pack(">8H", 1, 2, 3, 65535, 4, 5, 6, 0)]),
        "png-rgb-adam7-5x5": png(5, 5, 2, 8, adam7_rows(5, 5, lambda x, y: bytes((x * 50, y * 50, 7))),
                                 interlace=1),
        "png-rgb-trns-2x1": png(2, 1, 2, 8, [b"\x01\x02\x03\x04\x05\x06"],
                                trns=b"\x00\x01\x00\x02\x00\x03"),
        # Every filter type, image data in several IDAT chunks (one of 1 byte, one empty).
        "png-rgb-filters-idats-7x5": png(7, 5, 2, 8, [bytes((x * 31 + y * 7) % 256 for x in range(21))
                                                      for y in range(5)],
                                         filters=[0, 1, 2, 3, 4], idats=5),
        "png-rgba-filters-idats-6x5": png(6, 5, 6, 8, [bytes((x * 13 + y * 50) % 256 for x in range(24))
                                                       for y in range(5)],
                                          filters=[4, 3, 2, 1, 4], idats=4),
        "png-grey16-adam7-filters-9x9": png(
            9, 9, 0, 16, adam7_rows(9, 9, lambda x, y: struct.pack(">H", x * 7000 + y * 300)),
            interlace=1, filters=[1, 2, 3, 4, 0], idats=3),
        "png-palette4-trns-idats-5x3": png(5, 3, 3, 4, [b"\x01\x23\x40", b"\x56\x78\x10",
                                                        b"\x21\x43\x50"],
                                           palette=bytes(range(27)), trns=b"\x00\x80\xff",
                                           filters=[1, 4, 3], idats=3),
        "png-grey-alpha16-adam7-3x3": png(
            3, 3, 4, 16, adam7_rows(3, 3, lambda x, y: struct.pack(">HH", x * 9000, y * 20000)),
            interlace=1, filters=[0, 1, 2, 3, 4], idats=3),
        "jpeg-420-8x8": JPEG_420,
        "jpeg-444-8x8": JPEG_444,
        "jpeg-progressive-8x8": JPEG_PROGRESSIVE,
        "jpeg-grey-8x8": JPEG_GREY,
        "jpeg-cmyk-8x8": JPEG_CMYK,
        "jpeg-truncated": JPEG_420[:len(JPEG_420) * 2 // 3],
        "webp-lossy-8x8": WEBP_LOSSY,
        "webp-lossless-8x8": WEBP_LOSSLESS,
        "webp-alpha-8x8": WEBP_ALPHA,
        "webp-truncated": WEBP_LOSSY[:60],
        # EXIF orientation tags: turned (5-8 swap width and height), and a block that cannot
        # be read (an IFD claiming more entries than it holds), which leaves the image as stored.
        "jpeg-444-8x8-exif-6": jpeg_with_exif(JPEG_444, exif(6)),
        "jpeg-420-8x8-exif-3-big-endian": jpeg_with_exif(JPEG_420, exif(3, little=False)),
        "jpeg-grey-8x8-exif-short-ifd": jpeg_with_exif(JPEG_GREY, exif(8, entries=40)[:20]),
        "png-rgb-3x2-exif-8": png(3, 2, 2, 8, rgb, exif=exif(8, little=False)),
        "png-rgba16-2x1-exif-5": png(2, 1, 6, 16, [struct.pack(">8H", 1, 2, 3, 65535, 4, 5, 6, 0)],
                                     exif=exif(5)),
        "webp-lossless-8x8-exif-7": webp_with_exif(WEBP_LOSSLESS, 8, 8, exif(7)),
        # RIFF, then VP8X flagging animation on a 3x2 canvas: refused.
        "webp-animated-header": bytes.fromhex("52494646160000005745425056503858" "0a000000"
                                              "02000000020000010000"),
    }
    out = {}
    for name, data in files.items():
        out[name] = b"\0" + data           # desired_channels 0: as stored
    out["png-rgb-3x2-as-grey"] = b"\1" + files["png-rgb-3x2"]
    out["png-grey-3x1-as-rgba"] = b"\4" + files["png-grey-3x1"]
    out["pgm16-2x1-as-rgb"] = b"\3" + files["pgm16-2x1"]
    out["jpeg-420-8x8-as-grey-alpha"] = b"\2" + files["jpeg-420-8x8"]
    out["jpeg-cmyk-8x8-as-grey"] = b"\1" + files["jpeg-cmyk-8x8"]
    out["webp-alpha-8x8-as-grey"] = b"\1" + files["webp-alpha-8x8"]
    out["png-palette-trns-3x1-as-rgba"] = b"\4" + files["png-palette-trns-3x1"]
    out["png-rgba16-2x1-as-grey"] = b"\1" + files["png-rgba16-2x1"]
    return out, files


def text_bytes(data):
    return '"' + "".join("\\%03o" % b for b in data) + '"'


def encode(message, text, package="glimpse.fuzz", proto=HERE / "fuzz_inputs.proto"):
    return subprocess.run(
        ["protoc", f"--proto_path={HERE}", f"--proto_path={ROOT / 'proto'}",
         f"--encode={package}.{message}", str(proto)],
        input=text.encode(), capture_output=True, check=True).stdout


def upload_seeds(files):
    raw = bytes(range(18))
    def stream(header, chunks, limits="max_upload_bytes: 1048576 max_image_pixels: 65536"):
        msgs = [f"messages {{ header {{ {header} }} chunk: {text_bytes(chunks[0])} }}"]
        msgs += [f"messages {{ chunk: {text_bytes(c)} }}" for c in chunks[1:]]
        return encode("UploadInput", limits + "\n" + "\n".join(msgs))
    png_file = files["png-rgb-3x2"]
    return {
        "raw-uint8-3x2x3-two-chunks": stream(
            "raw { width: 3 height: 2 channels: 3 format: SAMPLE_FORMAT_UINT8 } total_bytes: 18",
            [raw[:7], raw[7:]]),
        "raw-uint16-1x1x1": stream("raw { width: 1 height: 1 channels: 1 format: SAMPLE_FORMAT_UINT16 }",
                                   [b"\x01\x02"]),
        "raw-float32-2x1x2-empty-first": stream(
            "raw { width: 2 height: 1 channels: 2 format: SAMPLE_FORMAT_FLOAT32 } label: \"f\"",
            [b"", struct.pack("<4f", 0.0, 1.5, -2.0, 1e30)]),
        "raw-short": stream("raw { width: 2 height: 2 channels: 4 format: SAMPLE_FORMAT_UINT8 }",
                            [raw[:5]]),
        "raw-over-pixel-limit": stream(
            "raw { width: 300 height: 300 channels: 1 format: SAMPLE_FORMAT_UINT8 }", [b""]),
        "encoded-png-three-chunks": stream(
            f"encoded {{ }} total_bytes: {len(png_file)}",
            [png_file[:10], png_file[10:30], png_file[30:]]),
        "encoded-png-desired-4": stream("encoded { desired_channels: 4 }", [png_file]),
        "encoded-pgm16": stream("encoded { }", [files["pgm16-2x1"]]),
        "encoded-jpeg-two-chunks": stream("encoded { desired_channels: 1 }",
                                          [JPEG_420[:100], JPEG_420[100:]]),
        "encoded-webp": stream("encoded { }", [WEBP_ALPHA]),
        "encoded-jpeg-exif-6": stream("encoded { orientation: ORIENTATION_FROM_FILE }",
                                      [files["jpeg-444-8x8-exif-6"]]),
        "encoded-png-exif-8-as-stored": stream("encoded { orientation: ORIENTATION_AS_STORED }",
                                               [files["png-rgb-3x2-exif-8"]]),
        "encoded-total-mismatch": stream("encoded { } total_bytes: 5", [png_file]),
    }


def options_seeds():
    layouts = [
        "width: 3 height: 2 channels: 3 format: SAMPLE_FORMAT_UINT8",
        "width: 16384 height: 16384 channels: 1 format: SAMPLE_FORMAT_UINT8",
        "width: 257 height: 1 channels: 4 format: SAMPLE_FORMAT_UINT16",
        "width: 1 height: 4096 channels: 2 format: SAMPLE_FORMAT_FLOAT32",
    ]
    analyses = {
        "histogram_options": [
            "histogram { }",
            "histogram { options { bins: 65536 lo: -1 hi: 2 source: HISTOGRAM_SOURCE_CHANNEL channel: 2 } variant: \"shared_atomics\" }",
            "histogram { options { bins: 7 source: HISTOGRAM_SOURCE_LUMA } variant: \"private_rows\" }",
            "histogram { options { source: HISTOGRAM_SOURCE_RGB_MEAN lo: 0 hi: 0 } }",
        ],
        "integral_image_options": [
            "integral_image { }",
            "integral_image { options { squared: true } variant: \"auto\" }",
            "integral_image { variant: \"naive\" }",
        ],
        "compaction_options": [
            "compaction { }",
            "compaction { options { source: COMPACT_SOURCE_LUMA lo: 10 hi: 200 outside: true max_results: 5 } variant: \"ordered_scan\" }",
            "compaction { options { channel: 1 count_only: true max_results: -1 } }",
        ],
        "box_filter_options": [
            "box_filter { }",
            "box_filter { options { rx: 7 ry: 1 border: BORDER_MODE_CONSTANT border_value: 3.5 } encoding: PIXEL_ENCODING_PNG variant: \"separable\" }",
            "box_filter { options { rx: 1073741824 } encoding: PIXEL_ENCODING_RAW keep: true }",
        ],
    }
    out = {}
    for target, requests in analyses.items():
        seeds = {}
        for i, request in enumerate(requests):
            layout = layouts[i % len(layouts)]
            part = [131072, 8192, 1 << 30][i % 3]
            seeds[f"request-{i}"] = encode(
                "OptionsInput", f"layout {{ {layout} }} part_bytes: {part} analysis {{ {request} }}")
        out[target] = seeds
    return out


def analyze_seeds(files):
    every = ("analyses { histogram { } } analyses { integral_image { options { squared: true } } } "
             "analyses { compaction { options { hi: 100 } } } "
             "analyses { box_filter { options { rx: 1 ry: 2 } encoding: PIXEL_ENCODING_RAW } }")
    raw = bytes((i * 13) % 256 for i in range(5 * 3 * 4))
    png_file = files["png-rgba-2x2"]
    seeds = {
        "inline-raw-every-analysis": (
            f"messages {{ header {{ image {{ raw {{ layout {{ width: 5 height: 3 channels: 4 "
            f"format: SAMPLE_FORMAT_UINT8 }} data: {text_bytes(raw)} }} }} {every} }} }}"),
        "upload-png-chunks-keep": (
            f"messages {{ header {{ upload {{ encoded {{ }} }} {every} keep: true label: \"k\" }} "
            f"chunk: {text_bytes(png_file[:20])} }} messages {{ chunk: {text_bytes(png_file[20:])} }}"),
        "upload-raw-uint16": (
            "messages { header { upload { raw { width: 2 height: 2 channels: 1 "
            "format: SAMPLE_FORMAT_UINT16 } } analyses { histogram { options { bins: 16 "
            "source: HISTOGRAM_SOURCE_CHANNEL } } } analyses { compaction { options { "
            "count_only: true } } } } chunk: " + text_bytes(bytes(range(8))) + " }"),
        "inline-encoded-pgm16-box": (
            f"messages {{ header {{ image {{ encoded {{ data: {text_bytes(files['pgm16-2x1'])} }} }} "
            "analyses { box_filter { options { rx: 3 border: BORDER_MODE_REPLICATE } "
            "encoding: PIXEL_ENCODING_PNG } } } }"),
        "upload-float-integral": (
            "messages { header { upload { raw { width: 3 height: 1 channels: 1 "
            "format: SAMPLE_FORMAT_FLOAT32 } } analyses { integral_image { } } } } "
            "messages { chunk: " + text_bytes(struct.pack("<3f", 1, -2, 3.5)) + " }"),
        "no-header": "messages { chunk: \"x\" }",
    }
    return {name: encode("AnalyzeInput", text) for name, text in seeds.items()}


def request_seeds():
    """Requests as clients send them (each target type's bytes), and bytes protobuf refuses: a
    string that is not UTF-8, a length past the end, a group never closed, an end-group alone."""
    def v1(message, text):
        return encode(message, text, "glimpse.v1", ROOT / "proto" / "glimpse" / "v1" /
                      "image_analytics.proto")
    seeds = {
        "histogram-raw": v1("HistogramRequest",
                            "image { raw { layout { width: 2 height: 1 channels: 3 "
                            "format: SAMPLE_FORMAT_UINT8 } data: \"abcdef\" } } "
                            "options { bins: 16 } variant: \"auto\""),
        "box-filter-id": v1("BoxFilterRequest",
                            "image { image_id: \"0123456789abcdef0123456789abcdef\" } "
                            "options { rx: 3 } keep: true label: \"blurred\""),
        "upload-header": v1("UploadImageRequest",
                            "header { encoded { desired_channels: 1 } label: \"a.png\" "
                            "total_bytes: 9 } chunk: \"\\211PNG\""),
        "analyze-header": v1("AnalyzeRequest",
                             "header { image { encoded { data: \"x\" } } analyses { histogram "
                             "{ } } analyses { box_filter { options { rx: 1 } } } label: \"k\" }"),
        "batch-image": v1("AnalyzeBatchRequest", "image { key: \"k\" image { image_id: \"x\" } }"),
        "batch-raw": v1("AnalyzeBatchRequest",
                        "image { key: \"k\" image { raw { layout { width: 1 height: 1 "
                        "channels: 3 format: SAMPLE_FORMAT_UINT8 } data: \"abc\" } } }"),
        "batch-header": v1("AnalyzeBatchRequest",
                           "header { analyses { compaction { } } ordered: true max_in_flight: 3 }"),
        "not-utf8": b"\x0a\x06\x0a\x04ab\xff\xfe",
        "length-past-end": b"\x0a\x09\x0a\x03abc",
        "group-unclosed": b"\x2b\x08\x01\x12\x01\xff",
        "end-group-alone": b"\x2c",
    }
    return seeds


def write(target, seeds):
    d = HERE / target
    d.mkdir(exist_ok=True)
    for old in d.glob("seed-*"):
        old.unlink()
    for name, data in seeds.items():
        (d / f"seed-{name}").write_bytes(data)


def main():
    images, files = image_seeds()
    write("image_decode", images)
    write("upload", upload_seeds(files))
    for target, seeds in options_seeds().items():
        write(target, seeds)
    write("analyze_request", analyze_seeds(files))
    write("request_parse", request_seeds())


if __name__ == "__main__":
    main()
