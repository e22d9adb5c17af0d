// PNG files of host images (server/ingest/image_codec.h): each row filtered by the PNG filter that
// leaves the smallest sum of absolute byte values (the heuristic of the PNG specification's
// section 12.8 and of libpng), the rows deflated whole by libdeflate into one zlib stream, which
// is written as IDAT chunks after IHDR. 8- and 16-bit samples (16-bit big-endian, as PNG stores
// them); 1 to 4 channels: grey, grey + alpha, RGB, RGBA.
#include <libdeflate.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/str.h"
#include "server/ingest/image_codec.h"

namespace glimpse::server {

namespace {

// libdeflate's fastest level: on box-filtered photos faster than OpenCV's PNG encoding (libpng at
// its default level) with smaller files; level 6 saves another 8% of the bytes at 3x the time
// (bench/png_encode.py, bench/results/png_encode.md).
constexpr int kDeflateLevel = 1;
// PNG allows chunks of up to 2^31 - 1 bytes; IDAT data is split into chunks of at most this.
constexpr size_t kMaxIdatChunk = size_t{1} << 30;

using Compressor = std::unique_ptr<libdeflate_compressor, decltype(&libdeflate_free_compressor)>;

// One compressor per thread: making one allocates its tables, which a call should not pay.
libdeflate_compressor* ThreadCompressor() {
  thread_local Compressor compressor(libdeflate_alloc_compressor(kDeflateLevel),
                                     &libdeflate_free_compressor);
  return compressor.get();
}

void PutU32(std::string& out, uint32_t v) {
  const char bytes[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out.append(bytes, 4);
}

// Appends a chunk of `type` holding `data`, its length before and its CRC after.
void PutChunk(std::string& out, std::string_view type, std::string_view data) {
  PutU32(out, uint32_t(data.size()));
  const size_t at = out.size();
  out.append(type);
  out.append(data);
  PutU32(out, uint32_t(libdeflate_crc32(0, out.data() + at, type.size() + data.size())));
}

uint8_t Paeth(uint8_t a, uint8_t b, uint8_t c) {
  const int p = int(a) + int(b) - int(c);
  const int pa = std::abs(p - int(a)), pb = std::abs(p - int(b)), pc = std::abs(p - int(c));
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Writes `row` (`n` bytes, `bpp` bytes per pixel; `prior` the row above, zeros for the first)
// filtered by each of PNG's five filters into candidates[f] (1 + n bytes: the filter type, then
// the bytes), and returns the filter whose bytes, read as signed, sum to the least in magnitude.
// Each candidate in a loop of its own, which compilers vectorize (one loop choosing per byte was
// 50% slower).
int FilterRow(const uint8_t* row, const uint8_t* prior, size_t n, size_t bpp,
              std::array<std::vector<uint8_t>, 5>& candidates) {
  for (int f = 0; f < 5; ++f) candidates[size_t(f)][0] = uint8_t(f);
  uint8_t* none = candidates[0].data() + 1;
  uint8_t* sub = candidates[1].data() + 1;
  uint8_t* up = candidates[2].data() + 1;
  uint8_t* avg = candidates[3].data() + 1;
  uint8_t* paeth = candidates[4].data() + 1;
  std::memcpy(none, row, n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t a = i >= bpp ? row[i - bpp] : 0, b = prior[i], c = i >= bpp ? prior[i - bpp] : 0;
    sub[i] = uint8_t(row[i] - a);
    up[i] = uint8_t(row[i] - b);
    avg[i] = uint8_t(row[i] - uint8_t((unsigned{a} + b) >> 1));
    paeth[i] = uint8_t(row[i] - Paeth(a, b, c));
  }
  int best = 0;
  uint64_t best_sum = UINT64_MAX;
  for (int f = 0; f < 5; ++f) {
    const uint8_t* bytes = candidates[size_t(f)].data() + 1;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) sum += uint64_t(std::abs(int(int8_t(bytes[i]))));
    if (sum < best_sum) {
      best = f;
      best_sum = sum;
    }
  }
  return best;
}

}  // namespace

uint64_t PngBytesBound(const gpu::ImageDesc& d) {
  // The filtered rows (a filter byte each), deflate's worst case (stored blocks: 5 bytes per
  // block of some thousands of bytes), the zlib wrapper and the chunks around them, with room to
  // spare: random 16-bit RGBA, 1024x1024, came out at 8,390,340 bytes against a bound of 8,915,008.
  const uint64_t filtered = uint64_t(d.bytes()) + uint64_t(d.height);
  return filtered + filtered / 16 + 1024;
}

absl::StatusOr<std::string> EncodePng(const gpu::HostImage& image) {
  const gpu::ImageDesc& d = image.desc;
  if (d.type == gpu::SampleType::kFloat32 || d.channels < 1 || d.channels > 4 || d.width < 1 ||
      d.height < 1) {
    return absl::InvalidArgumentError(StrCat("encoding PNG needs a uint8 or uint16 image of 1-4 ",
                                             "channels, got ", gpu::DescribeImage(d),
                                             "; ask for RAW pixels"));
  }
  if (image.data.size() != d.bytes()) {
    return absl::InternalError(
        StrCat("EncodePng: ", image.data.size(), " bytes for a ", gpu::DescribeImage(d), " image"));
  }
  libdeflate_compressor* compressor = ThreadCompressor();
  if (compressor == nullptr) return absl::ResourceExhaustedError("PNG encoding: out of memory");
  const size_t sample = size_t(gpu::BytesPerSample(d.type));
  const size_t bpp = size_t(d.channels) * sample, n = d.row_bytes();

  // Every row filtered, into one buffer: libdeflate compresses a whole buffer at once.
  std::vector<uint8_t> filtered((n + 1) * size_t(d.height));
  std::array<std::vector<uint8_t>, 5> candidates;
  for (std::vector<uint8_t>& c : candidates) c.resize(n + 1);
  std::vector<uint8_t> row(n), prior(n, 0);
  for (size_t y = 0; y < size_t(d.height); ++y) {
    const uint8_t* src = image.data.data() + y * n;
    if (sample == 2) {  // samples are little-endian in memory, big-endian in PNG
      for (size_t i = 0; i < n; i += 2) {
        row[i] = src[i + 1];
        row[i + 1] = src[i];
      }
    } else {
      std::memcpy(row.data(), src, n);
    }
    const int f = FilterRow(row.data(), prior.data(), n, bpp, candidates);
    std::memcpy(&filtered[y * (n + 1)], candidates[size_t(f)].data(), n + 1);
    row.swap(prior);
  }

  std::string zlib(libdeflate_zlib_compress_bound(compressor, filtered.size()), '\0');
  const size_t zlib_bytes = libdeflate_zlib_compress(compressor, filtered.data(), filtered.size(),
                                                     zlib.data(), zlib.size());
  if (zlib_bytes == 0) {
    return absl::InternalError(StrCat("PNG encoding of a ", gpu::DescribeImage(d),
                                      " image: the compressed data did not fit its bound"));
  }
  std::vector<uint8_t>().swap(filtered);  // at most the image and two bounds held at once

  static constexpr uint8_t kColourType[4] = {0, 4, 2, 6};  // grey, grey + alpha, RGB, RGBA
  std::string ihdr;
  PutU32(ihdr, uint32_t(d.width));
  PutU32(ihdr, uint32_t(d.height));
  ihdr += char(sample * 8);                   // bit depth
  ihdr += char(kColourType[d.channels - 1]);  // colour type
  ihdr.append(3, '\0');                       // deflate, adaptive filtering, no interlace
  std::string out("\x89PNG\r\n\x1a\n", 8);
  out.reserve(8 + 25 + zlib_bytes + (zlib_bytes / kMaxIdatChunk + 1) * 12 + 12);
  PutChunk(out, "IHDR", ihdr);
  for (size_t at = 0; at < zlib_bytes; at += kMaxIdatChunk) {
    PutChunk(out, "IDAT",
             std::string_view(zlib.data() + at, std::min(kMaxIdatChunk, zlib_bytes - at)));
  }
  PutChunk(out, "IEND", {});
  return out;
}

}  // namespace glimpse::server
