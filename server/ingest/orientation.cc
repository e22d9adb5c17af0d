// The EXIF orientation tag of JPEG, PNG and WebP files, and the rotation or mirroring it asks for
// (server/ingest/decode.h applies it). The tag's eight values, from the EXIF standard (CIPA
// DC-008, tag 0x0112), as the pixel of the stored image that lands at the top left when shown:
//   1 top left (as stored)     2 top right (mirrored)        3 bottom right (turned 180)
//   4 bottom left (flipped)    5 transposed                  6 turned 90 degrees clockwise
//   7 transversed              8 turned 90 degrees anticlockwise
// 5 to 8 swap the width and the height.
#include <algorithm>
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
  constexpr int kTile = 32;
  for (int y0 = 0; y0 < height; y0 += kTile) {
    const int y1 = std::min(y0 + kTile, height);
    for (int x0 = 0; x0 < width; x0 += kTile) {
      const int x1 = std::min(x0 + kTile, width);
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

// Sixteen bytes in one vector, as four 4-byte pixels or eight 2-byte words (GCC's and Clang's
// vector extensions: an SSE2 register on x86-64, a NEON one on Arm).
using Quad = uint32_t __attribute__((vector_size(16)));
using Words = uint16_t __attribute__((vector_size(16)));

template <typename Vector>
Vector Load16(const uint8_t* p) {
  Vector v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename Vector>
void Store16(uint8_t* p, Vector v) {
  std::memcpy(p, &v, sizeof v);
}

// 3-byte pixels (8-bit RGB) of mirrored rows move as 4-byte words: one load and one store where
// 3 bytes take two of each. The fourth byte written is the next pixel's in the output row, written
// after it; the fourth byte read is the stored pixel's neighbour in memory. So the first and the
// last pixel of each output row move as 3 bytes: past the last lies the next row (or the end of
// `dst`), and the stored image's last pixel, whose fourth byte would lie past its end, is shown at
// a corner.
void CopyWord3(const uint8_t* from, uint8_t* to) {
  uint32_t word;
  std::memcpy(&word, from, 4);
  std::memcpy(to, &word, 4);
}

// Orientations 2 and 3: each output row is a stored row backwards (`src`: the last pixel of the
// first row shown; dy: one row down or up). 1- and 4-byte pixels are reversed 16 bytes at a time
// in a register, 3-byte ones move as words.
template <size_t N>
void MirrorRows(const uint8_t* src, ptrdiff_t dy, int width, int height, uint8_t* dst,
                size_t dst_stride) {
  for (int y = 0; y < height; ++y) {
    const uint8_t* in = src + ptrdiff_t(y) * dy;
    uint8_t* out = dst + size_t(y) * dst_stride;
    int x = 0;
    if constexpr (N == 1) {
      for (; x + 16 <= width; x += 16) {
        // Bytes reversed as SSE2 can: the 4-byte quarters, the words in each, the bytes in each.
        const Quad q = Load16<Quad>(in - (x + 15));
        const Quad quarters = __builtin_shufflevector(q, q, 3, 2, 1, 0);
        Words w;
        std::memcpy(&w, &quarters, sizeof w);
        w = __builtin_shufflevector(w, w, 1, 0, 3, 2, 5, 4, 7, 6);
        Store16(out + x, Words((w << 8) | (w >> 8)));
      }
    } else if constexpr (N == 4) {
      for (; x + 4 <= width; x += 4) {
        const Quad q = Load16<Quad>(in - (x + 3) * 4);
        Store16(out + size_t(x) * 4, __builtin_shufflevector(q, q, 3, 2, 1, 0));
      }
    } else if constexpr (N == 3) {
      if (width > 1) {
        std::memcpy(out, in, 3);
        for (x = 1; x < width - 1; ++x) CopyWord3(in - ptrdiff_t(x) * 3, out + size_t(x) * 3);
      }
    }
    for (; x < width; ++x) std::memcpy(out + size_t(x) * N, in - ptrdiff_t(x) * ptrdiff_t(N), N);
  }
}

// A block of 4 x 4 pixels of 4 bytes turned: four loads along four stored rows (`in`, dx apart),
// a transpose in registers, four stores along four output rows (`out`, row_step apart): output
// row k holds the k-th pixel of each load.
struct QuadBlock {
  static constexpr int kSize = 4;
  static constexpr size_t kPixel = 4;
  static constexpr int kTile = 128;
  static void Turn(const uint8_t* in, ptrdiff_t dx, uint8_t* out, ptrdiff_t row_step) {
    const Quad a = Load16<Quad>(in), b = Load16<Quad>(in + dx), c = Load16<Quad>(in + 2 * dx),
               d = Load16<Quad>(in + 3 * dx);
    const Quad ab_low = __builtin_shufflevector(a, b, 0, 4, 1, 5);
    const Quad ab_high = __builtin_shufflevector(a, b, 2, 6, 3, 7);
    const Quad cd_low = __builtin_shufflevector(c, d, 0, 4, 1, 5);
    const Quad cd_high = __builtin_shufflevector(c, d, 2, 6, 3, 7);
    Store16(out, __builtin_shufflevector(ab_low, cd_low, 0, 1, 4, 5));
    Store16(out + row_step, __builtin_shufflevector(ab_low, cd_low, 2, 3, 6, 7));
    Store16(out + 2 * row_step, __builtin_shufflevector(ab_high, cd_high, 0, 1, 4, 5));
    Store16(out + 3 * row_step, __builtin_shufflevector(ab_high, cd_high, 2, 3, 6, 7));
  }
};

// A block of 4 x 4 pixels of 3 bytes (8-bit RGB as CPU renderers take it) turned as QuadBlock
// turns its block, in 64- and 32-bit words: each stored row's 12 bytes loaded as one of each and
// split into four pixels, each output row's 12 bytes put together from four and stored as one of
// each. A 4-byte word at a time per pixel took 1.2-1.3x as long (1920x1080 and 3840x2160, AMD
// EPYC).
struct TriBlock {
  static constexpr int kSize = 4;
  static constexpr size_t kPixel = 3;
  static constexpr int kTile = 64;
  static void Turn(const uint8_t* in, ptrdiff_t dx, uint8_t* out, ptrdiff_t row_step) {
    uint32_t px[4][4];  // [load][pixel along it], each in the low 3 bytes
    for (int j = 0; j < 4; ++j) {
      uint64_t low;
      uint32_t high;
      std::memcpy(&low, in + j * dx, 8);  // little-endian: the first pixel in the lowest bytes
      std::memcpy(&high, in + j * dx + 8, 4);
      px[j][0] = uint32_t(low) & 0xFFFFFFu;
      px[j][1] = uint32_t(low >> 24) & 0xFFFFFFu;
      px[j][2] = uint32_t(low >> 48) | (high & 0xFFu) << 16;
      px[j][3] = high >> 8;
    }
    for (int k = 0; k < 4; ++k) {
      const uint64_t low = uint64_t(px[0][k]) | uint64_t(px[1][k]) << 24 | uint64_t(px[2][k]) << 48;
      const uint32_t high = px[2][k] >> 16 | px[3][k] << 8;
      std::memcpy(out + k * row_step, &low, 8);
      std::memcpy(out + k * row_step + 8, &high, 4);
    }
  }
};

// A block of 8 x 8 one-byte pixels turned as QuadBlock turns its block: eight 8-byte loads, the
// 8 x 8 byte transpose in 64-bit words (three rounds of swapping 1-, 2- and 4-byte halves of
// pairs of words under a mask), eight 8-byte stores.
struct ByteBlock {
  static constexpr int kSize = 8;
  static constexpr size_t kPixel = 1;
  static constexpr int kTile = 256;
  static void Turn(const uint8_t* in, ptrdiff_t dx, uint8_t* out, ptrdiff_t row_step) {
    uint64_t r[8];
    for (int i = 0; i < 8; ++i)
      std::memcpy(&r[i], in + i * dx, 8);  // little-endian: byte k is pixel k
    constexpr struct {
      int bits, step;
      uint64_t mask;
    } kRounds[3] = {
        {8, 1, 0x00FF00FF00FF00FFu}, {16, 2, 0x0000FFFF0000FFFFu}, {32, 4, 0x00000000FFFFFFFFu}};
    for (const auto& round : kRounds) {
      for (int i = 0; i < 8; ++i) {
        if (i & round.step) continue;
        uint64_t& a = r[i];
        uint64_t& b = r[i + round.step];
        const uint64_t t = ((a >> round.bits) ^ b) & round.mask;
        b ^= t;
        a ^= t << round.bits;
      }
    }
    for (int k = 0; k < 8; ++k) std::memcpy(out + k * row_step, &r[k], 8);
  }
};

// The turned orientations (5-8) of Block's pixels: the output's pixel (x, y) is the stored one at
// src + x * dx + y * dy, dx crossing the stored rows and dy = Block::kPixel or -Block::kPixel
// walking along one. Blocks of kSize x kSize pixels, where a pixel at a time makes kSize^2 loads
// and stores, each in another row. Square tiles of Block::kTile pixels (what measured fastest on
// an AMD EPYC for 1920x1080 and 3840x2160 images) keep the rows a tile reads in the cache; the
// pixels past the last whole block go one at a time (CopyPixels).
template <typename Block>
void TurnBlocks(const uint8_t* src, ptrdiff_t dx, ptrdiff_t dy, int width, int height, uint8_t* dst,
                size_t dst_stride) {
  constexpr int kTile = Block::kTile, k = Block::kSize;
  constexpr size_t px = Block::kPixel;
  // With dy < 0 the output rows y..y+k-1 are stored pixels c, c-1, ...: the block's loads start
  // k-1 pixels back, and its rows come out last first.
  const bool backwards = dy < 0;
  const ptrdiff_t row_step = backwards ? -ptrdiff_t(dst_stride) : ptrdiff_t(dst_stride);
  for (int y0 = 0; y0 < height; y0 += kTile) {
    const int y1 = std::min(y0 + kTile, height);
    for (int x0 = 0; x0 < width; x0 += kTile) {
      const int x1 = std::min(x0 + kTile, width);
      int y = y0;
      for (; y + k <= y1; y += k) {
        const int first = backwards ? y + k - 1 : y;  // the block's lowest address in a stored row
        uint8_t* out = dst + size_t(first) * dst_stride;
        int x = x0;
        for (; x + k <= x1; x += k) {
          Block::Turn(src + ptrdiff_t(x) * dx + ptrdiff_t(first) * dy, dx, out + size_t(x) * px,
                      row_step);
        }
        if (x < x1) {
          CopyPixels<px>(src + ptrdiff_t(x) * dx + ptrdiff_t(y) * dy, dx, dy, x1 - x, k,
                         dst + size_t(y) * dst_stride + size_t(x) * px, dst_stride, px);
        }
      }
      if (y < y1) {
        CopyPixels<px>(src + ptrdiff_t(x0) * dx + ptrdiff_t(y) * dy, dx, dy, x1 - x0, y1 - y,
                       dst + size_t(y) * dst_stride + size_t(x0) * px, dst_stride, px);
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
  if (dx == px) {  // rows as stored (orientations 1 and 4): a copy per row
    for (int y = 0; y < out_height; ++y) {
      std::memcpy(dst + size_t(y) * dst_stride, src + origin + ptrdiff_t(y) * dy,
                  size_t(out_width) * pixel_bytes);
    }
    return;
  }
  if (dx == -px) {  // rows backwards (orientations 2 and 3)
    const auto mirror = pixel_bytes == 1   ? &MirrorRows<1>
                        : pixel_bytes == 3 ? &MirrorRows<3>
                        : pixel_bytes == 4 ? &MirrorRows<4>
                                           : nullptr;
    if (mirror != nullptr) {
      mirror(src + origin, dy, out_width, out_height, dst, dst_stride);
      return;
    }
  } else if (pixel_bytes == 1) {
    TurnBlocks<ByteBlock>(src + origin, dx, dy, out_width, out_height, dst, dst_stride);
    return;
  } else if (pixel_bytes == 3) {
    TurnBlocks<TriBlock>(src + origin, dx, dy, out_width, out_height, dst, dst_stride);
    return;
  } else if (pixel_bytes == 4) {
    TurnBlocks<QuadBlock>(src + origin, dx, dy, out_width, out_height, dst, dst_stride);
    return;
  }
  // A pixel at a time for the other sizes: fixed-size copies for those of 16-bit images (grey,
  // RGB, RGBA) and 8-bit grey with alpha; a run-time length for any other.
  using Copy = void (*)(const uint8_t*, ptrdiff_t, ptrdiff_t, int, int, uint8_t*, size_t, size_t);
  static constexpr Copy kCopies[9] = {&CopyPixels<0>, &CopyPixels<0>, &CopyPixels<2>,
                                      &CopyPixels<0>, &CopyPixels<0>, &CopyPixels<0>,
                                      &CopyPixels<6>, &CopyPixels<0>, &CopyPixels<8>};
  const Copy copy = pixel_bytes < 9 ? kCopies[pixel_bytes] : &CopyPixels<0>;
  copy(src + origin, dx, dy, out_width, out_height, dst, dst_stride, pixel_bytes);
}

}  // namespace glimpse::server::ingest
