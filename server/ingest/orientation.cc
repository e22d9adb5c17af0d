// The EXIF orientation tag of JPEG, PNG and WebP files, and the rotation or mirroring it asks for
// (server/ingest/decode.h applies it). The tag's eight values, from the EXIF standard (CIPA
// DC-008, tag 0x0112), as the pixel of the stored image that lands at the top left when shown:
//   1 top left (as stored)     2 top right (mirrored)        3 bottom right (turned 180)
//   4 bottom left (flipped)    5 transposed                  6 turned 90 degrees clockwise
//   7 transversed              8 turned 90 degrees anticlockwise
// 5 to 8 swap the width and the height.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "server/ingest/decoders.h"

namespace glimpse::server::ingest {
namespace {

constexpr std::string_view kExifHeader("Exif\0\0", 6);

uint32_t Be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

uint32_t Le32(const uint8_t* p) {
  return uint32_t(p[3]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | uint32_t(p[0]);
}

// An APP1 segment that starts "Exif\0\0", among the segments before the first scan. Markers are
// found as libjpeg finds them: stray bytes before a marker and 0xFF fill bytes are skipped.
std::span<const uint8_t> JpegExif(std::span<const uint8_t> f) {
  size_t i = JpegStart(f);
  if (i == std::string_view::npos) return {};
  i += 2;  // SOI
  while (i < f.size()) {
    while (i < f.size() && f[i] != 0xFF) ++i;
    while (i < f.size() && f[i] == 0xFF) ++i;
    if (i >= f.size()) return {};
    const uint8_t marker = f[i++];
    if (marker == 0xDA || marker == 0xD9) return {};                     // SOS, EOI
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // TEM, RSTn: no length
    if (f.size() - i < 2) return {};
    const size_t length = size_t(f[i]) << 8 | f[i + 1];
    if (length < 2 || f.size() - i < length) return {};
    const std::span<const uint8_t> segment = f.subspan(i + 2, length - 2);
    if (marker == 0xE1 && StartsWith(segment, kExifHeader)) return segment.subspan(6);
    i += length;
  }
  return {};
}

// An eXIf chunk before the first IDAT (where libpng reads it, and OpenCV with it).
std::span<const uint8_t> PngExif(std::span<const uint8_t> f) {
  size_t i = 8;  // the signature
  while (i <= f.size() && f.size() - i >= 12) {
    const uint32_t length = Be32(&f[i]);
    const std::span<const uint8_t> type = f.subspan(i + 4, 4);
    if (length > f.size() - i - 12 || StartsWith(type, "IDAT")) return {};
    if (StartsWith(type, "eXIf")) return f.subspan(i + 8, length);
    i += 12 + size_t(length);
  }
  return {};
}

// A RIFF chunk "EXIF" (raw TIFF data, though some writers start it with "Exif\0\0" as JPEG does).
std::span<const uint8_t> WebpExif(std::span<const uint8_t> f) {
  size_t i = 12;  // "RIFF", its size, "WEBP"
  while (i <= f.size() && f.size() - i >= 8) {
    const uint32_t length = Le32(&f[i + 4]);
    if (length > f.size() - i - 8) return {};
    if (StartsWith(f.subspan(i, 4), "EXIF")) {
      const std::span<const uint8_t> exif = f.subspan(i + 8, length);
      return StartsWith(exif, kExifHeader) ? exif.subspan(6) : exif;
    }
    i += 8 + size_t(length) + (length & 1);  // chunks are padded to even sizes
  }
  return {};
}

// Copies every pixel of `N` bytes: the output's pixel (x, y) is the one at src + x * dx + y * dy.
// Tiles of 32 x 32 pixels keep a turned image's reads and writes both within the cache.
template <size_t N>
void CopyPixels(const uint8_t* src, ptrdiff_t dx, ptrdiff_t dy, int width, int height, uint8_t* dst,
                size_t dst_stride, size_t n) {
  const size_t bytes = N != 0 ? N : n;
  if (dx == ptrdiff_t(bytes)) {  // rows as stored (orientations 1 and 4): a copy per row
    for (int y = 0; y < height; ++y) {
      std::memcpy(dst + size_t(y) * dst_stride, src + ptrdiff_t(y) * dy, size_t(width) * bytes);
    }
    return;
  }
  constexpr int kTile = 32;
  for (int y0 = 0; y0 < height; y0 += kTile) {
    const int y1 = y0 + kTile < height ? y0 + kTile : height;
    for (int x0 = 0; x0 < width; x0 += kTile) {
      const int x1 = x0 + kTile < width ? x0 + kTile : width;
      for (int y = y0; y < y1; ++y) {
        uint8_t* out = dst + size_t(y) * dst_stride;
        // Offsets, not a moving pointer: a walk up the columns ends a step before the image.
        ptrdiff_t in = ptrdiff_t(x0) * dx + ptrdiff_t(y) * dy;
        for (int x = x0; x < x1; ++x, in += dx) {
          std::memcpy(out + size_t(x) * bytes, src + in, N != 0 ? N : n);
        }
      }
    }
  }
}

}  // namespace

std::span<const uint8_t> FindExif(std::span<const uint8_t> file, ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return JpegExif(file);
    case ImageFormat::kPng:
      return PngExif(file);
    case ImageFormat::kWebp:
      return WebpExif(file);
    default:
      return {};
  }
}

int ExifOrientation(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return 1;
  bool little;
  if (StartsWith(tiff, "II")) {
    little = true;
  } else if (StartsWith(tiff, "MM")) {
    little = false;
  } else {
    return 1;
  }
  const uint8_t* t = tiff.data();
  auto u16 = [&](size_t at) { return little ? t[at] | t[at + 1] << 8 : t[at] << 8 | t[at + 1]; };
  auto u32 = [&](size_t at) { return little ? Le32(t + at) : Be32(t + at); };
  if (u16(2) != 42) return 1;
  const size_t ifd = u32(4);  // the first IFD, which holds the orientation
  if (ifd > tiff.size() || tiff.size() - ifd < 2) return 1;
  const size_t entries = size_t(u16(ifd));
  for (size_t k = 0; k < entries; ++k) {
    const size_t e = ifd + 2 + 12 * k;
    if (e > tiff.size() || tiff.size() - e < 12) return 1;
    if (u16(e) != 0x0112) continue;
    // A SHORT, as the standard has it; a LONG, as some writers make it.
    const int type = u16(e + 2);
    if (u32(e + 4) != 1 || (type != 3 && type != 4)) return 1;
    const uint32_t v = type == 3 ? uint32_t(u16(e + 8)) : u32(e + 8);
    return v >= 1 && v <= 8 ? int(v) : 1;
  }
  return 1;
}

void Reorient(int orientation, const uint8_t* src, int width, int height, size_t pixel_bytes,
              size_t src_stride, uint8_t* dst, size_t dst_stride) {
  const auto px = ptrdiff_t(pixel_bytes), row = ptrdiff_t(src_stride);
  const ptrdiff_t right = ptrdiff_t(width - 1) * px, bottom = ptrdiff_t(height - 1) * row;
  // Per orientation: whether the output's first pixel is in the source's last column and in its
  // last row, and how far the source moves, in pixels across and rows down, per output pixel
  // along a row (dx) and down a column (dy).
  struct Walk {
    bool right, bottom;
    int dx_across, dx_down, dy_across, dy_down;
  };
  static constexpr Walk kWalks[9] = {
      {false, false, 1, 0, 0, 1},  // (unused)
      {false, false, 1, 0, 0, 1},  // 1
      {true, false, -1, 0, 0, 1},  // 2
      {true, true, -1, 0, 0, -1},  // 3
      {false, true, 1, 0, 0, -1},  // 4
      {false, false, 0, 1, 1, 0},  // 5
      {false, true, 0, -1, 1, 0},  // 6
      {true, true, 0, -1, -1, 0},  // 7
      {true, false, 0, 1, -1, 0},  // 8
  };
  const Walk& w = kWalks[orientation >= 1 && orientation <= 8 ? orientation : 1];
  const ptrdiff_t origin = (w.right ? right : 0) + (w.bottom ? bottom : 0);
  const ptrdiff_t dx = w.dx_across * px + w.dx_down * row, dy = w.dy_across * px + w.dy_down * row;
  const bool turned = orientation >= 5 && orientation <= 8;
  const int out_width = turned ? height : width, out_height = turned ? width : height;
  // Fixed-size copies for the pixel sizes of 1-4 channels of 8 and 16 bits; a run-time length
  // for any other.
  using Copy = void (*)(const uint8_t*, ptrdiff_t, ptrdiff_t, int, int, uint8_t*, size_t, size_t);
  static constexpr Copy kCopies[9] = {&CopyPixels<0>, &CopyPixels<1>, &CopyPixels<2>,
                                      &CopyPixels<3>, &CopyPixels<4>, &CopyPixels<0>,
                                      &CopyPixels<6>, &CopyPixels<0>, &CopyPixels<8>};
  const Copy copy = pixel_bytes < 9 ? kCopies[pixel_bytes] : &CopyPixels<0>;
  copy(src + origin, dx, dy, out_width, out_height, dst, dst_stride, pixel_bytes);
}

}  // namespace glimpse::server::ingest
