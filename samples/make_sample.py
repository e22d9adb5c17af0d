#!/usr/bin/env python3
"""Writes glimpse-sample.png: a 640x480 RGB test scene (sky gradient, sun, hills, checker field,
mild noise) drawn from formulas only, so the file is reproducible and free of third-party rights.
The committed PNG is this script's output; it is dedicated to the public domain (CC0 1.0).

    python3 samples/make_sample.py [OUT.png]
"""
import math
import struct
import sys
import zlib

W, H = 640, 480


def pixel(x, y, rnd):
    # Sky: blue to pale orange towards the horizon.
    t = y / (H * 0.62)
    r, g, b = 40 + 200 * t, 90 + 120 * t, 200 - 40 * t
    # Sun.
    d = math.hypot(x - 470, y - 150)
    if d < 48:
        r, g, b = 255, 230, 120
    elif d < 70:
        k = (70 - d) / 22
        r, g, b = r + (255 - r) * k * 0.6, g + (220 - g) * k * 0.6, b
    # Two ranges of hills.
    far = H * 0.55 + 30 * math.sin(x / 57.0) + 12 * math.sin(x / 13.0 + 1)
    near = H * 0.70 + 45 * math.sin(x / 91.0 + 2) + 8 * math.sin(x / 7.0)
    if y > far:
        r, g, b = 70, 110, 90
    if y > near:
        shade = 0.75 + 0.25 * math.sin((x + y) / 23.0)
        r, g, b = 40 * shade, 140 * shade, 60 * shade
    # A checker field in the lower left.
    if x < 200 and y > H - 120:
        on = ((x // 20) + (y // 20)) % 2
        r, g, b = (230, 230, 230) if on else (25, 25, 25)
    n = (rnd() % 17) - 8  # mild noise, so histograms are not all spikes
    return tuple(max(0, min(255, int(v + n))) for v in (r, g, b))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else __file__.rsplit('/', 1)[0] + '/glimpse-sample.png'
    state = [12345]

    def rnd():
        state[0] = (state[0] * 1103515245 + 12345) & 0x7FFFFFFF
        return state[0] >> 16

    raw = bytearray()
    for y in range(H):
        raw.append(0)  # filter: none
        for x in range(W):
            raw.extend(pixel(x, y, rnd))

    def chunk(kind, data):
        c = struct.pack('>I', len(data)) + kind + data
        return c + struct.pack('>I', zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b'\x89PNG\r\n\x1a\n'
    png += chunk(b'IHDR', struct.pack('>IIBBBBB', W, H, 8, 2, 0, 0, 0))
    png += chunk(b'IDAT', zlib.compress(bytes(raw), 9))
    png += chunk(b'IEND', b'')
    with open(out, 'wb') as f:
        f.write(png)
    print(f'wrote {out} ({W}x{H} RGB, {len(png)} bytes)')


if __name__ == '__main__':
    main()
