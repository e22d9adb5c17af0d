// The decoders of server/ingest against independent references, on fresh random images: JPEG
// against libjpeg-turbo's own decode (a TurboJPEG handle of the test's), PNG against the spec's
// pixels, stb_image (this file's own copy) and libspng on files written here (stored and zlib-
// compressed image data), WebP against libwebp's own decode; every result
// also through DecodeInto with a row stride, whose padding must stay untouched. Then bad files.
// No GPU needed.
#include "server/ingest/decode.h"

// clang-format off: jpeglib.h needs <cstdio> first.
#include <jpeglib.h>

#include <cstdio>
// clang-format on
#include <gtest/gtest.h>
#include <spng.h>
#include <turbojpeg.h>
#include <webp/decode.h>
#include <webp/encode.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "server/ingest/decoders.h"
#include "server/ingest/image_codec.h"
#include "tests/gpu_test_env.h"
#include "tests/orientation_reference.h"

#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace glimpse::server::ingest {
namespace {

using File = std::vector<uint8_t>;
using gpu::ImageDesc;
using gpu::SampleType;

constexpr uint64_t kMaxPixels = uint64_t{1} << 20;

std::mt19937_64 SeededRng() {
  const uint64_t seed = ::glimpse::testing::TestSeed();
  std::printf("seed %llu (GLIMPSE_SEED to replay)\n", static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Decodes `file` as `channels` (0: its own) twice: DecodeEncoded, and DecodeInto with rows a few
// bytes apart beyond their length, checking that the bytes between them are left as they were.
// Expects both to give `desc` and `pixels`.
void ExpectDecodes(const File& file, int channels, const ImageDesc& desc,
                   const std::vector<uint8_t>& pixels) {
  SCOPED_TRACE(::testing::Message() << "as " << channels << " channels");
  ASSERT_EQ(pixels.size(), desc.bytes());
  ImageFormat format = ImageFormat::kTga;
  absl::StatusOr<gpu::HostImage> decoded =
      DecodeEncoded(file, channels, kMaxPixels, "image", &format);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->desc, desc);
  EXPECT_TRUE(decoded->data == pixels) << "pixels differ from the reference";

  absl::StatusOr<Probed> probed = Probe(file, "image");
  ASSERT_TRUE(probed.ok()) << probed.status().message();
  EXPECT_EQ(probed->format, format);
  const size_t row = desc.row_bytes(), stride = row + 7;
  std::vector<uint8_t> out(stride * size_t(desc.height - 1) + row, 0xA5);
  absl::Status s = DecodeInto(file, *probed, desc.channels, out, stride, "image");
  ASSERT_TRUE(s.ok()) << s.message();
  for (int y = 0; y < desc.height; ++y) {
    ASSERT_EQ(std::memcmp(&out[size_t(y) * stride], &pixels[size_t(y) * row], row), 0)
        << "strided row " << y << " differs";
    if (y + 1 < desc.height) {
      for (size_t i = row; i < stride; ++i) {
        ASSERT_EQ(out[size_t(y) * stride + i], 0xA5) << "padding after row " << y << " written";
      }
    }
  }
}

// Adds an opaque alpha (255) after every `channels` samples.
std::vector<uint8_t> WithOpaqueAlpha(const std::vector<uint8_t>& px, int channels) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < px.size(); i += size_t(channels)) {
    out.insert(out.end(), px.begin() + long(i), px.begin() + long(i) + channels);
    out.push_back(255);
  }
  return out;
}

// ---- JPEG -------------------------------------------------------------------------------------

// Smooth gradients plus noise: what a photo is to JPEG, with edges at every size.
std::vector<uint8_t> PhotoLike(int w, int h, int channels, std::mt19937_64& rng) {
  std::vector<uint8_t> px(size_t(w) * size_t(h) * size_t(channels));
  std::uniform_real_distribution<double> phase(0, 6.28);
  std::array<double, 4> p{phase(rng), phase(rng), phase(rng), phase(rng)};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const double v = 128 + 90 * std::sin(x * 0.07 + y * 0.05 * (c + 1) + p[size_t(c)]) +
                         double(rng() % 41) - 20;
        px[(size_t(y) * size_t(w) + size_t(x)) * size_t(channels) + size_t(c)] =
            uint8_t(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return px;
}

File TjCompress(const std::vector<uint8_t>& px, int w, int h, int pixel_format, int subsampling,
                int quality, int flags) {
  tjhandle tj = tjInitCompress();
  EXPECT_NE(tj, nullptr);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(tj, px.data(), w, 0, h, pixel_format, &buf, &size, subsampling, quality, flags);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(tj);
  File file(buf, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  return file;
}

// libjpeg-turbo's own decode, default flags.
std::vector<uint8_t> TjDecompress(const File& file, int w, int h, int pixel_format) {
  tjhandle tj = tjInitDecompress();
  EXPECT_NE(tj, nullptr);
  std::vector<uint8_t> px(size_t(w) * size_t(h) * size_t(tjPixelSize[pixel_format]));
  EXPECT_EQ(tjDecompress2(tj, file.data(), file.size(), px.data(), w, 0, h, pixel_format, 0), 0)
      << tjGetErrorStr2(tj);
  tjDestroy(tj);
  return px;
}

// Every channel count against libjpeg-turbo's RGB and GRAY decodes.
void ExpectJpegDecodes(const File& file, int w, int h, bool grey_file) {
  const std::vector<uint8_t> rgb = TjDecompress(file, w, h, TJPF_RGB);
  const std::vector<uint8_t> grey = TjDecompress(file, w, h, TJPF_GRAY);
  const ImageDesc d{w, h, 1, SampleType::kUint8};
  ExpectDecodes(file, 0, {w, h, grey_file ? 1 : 3, SampleType::kUint8}, grey_file ? grey : rgb);
  ExpectDecodes(file, 1, d, grey);
  ExpectDecodes(file, 2, {w, h, 2, SampleType::kUint8}, WithOpaqueAlpha(grey, 1));
  ExpectDecodes(file, 3, {w, h, 3, SampleType::kUint8}, rgb);
  ExpectDecodes(file, 4, {w, h, 4, SampleType::kUint8}, WithOpaqueAlpha(rgb, 3));
}

constexpr std::array<std::array<int, 2>, 7> kSizes = {
    {{1, 1}, {1, 17}, {17, 1}, {31, 33}, {61, 7}, {8, 8}, {127, 131}}};

// A JPEG without its quantization tables (DQT segments cut out) is refused whatever the thread
// decoded before: a decompressor kept across decodes, as libjpeg keeps tables for abbreviated
// streams, would decode it with the tables of the file before, another caller's.
TEST(DecodeTest, JpegWithoutItsTablesIsRefusedWhateverCameBefore) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const std::vector<uint8_t> px = PhotoLike(40, 24, 3, rng);
  const File full = TjCompress(px, 40, 24, TJPF_RGB, TJSAMP_420, 75, 0);
  // Walk the marker segments from SOI to SOS, leaving out each DQT (0xFFDB).
  File cut(full.begin(), full.begin() + 2);
  size_t at = 2;
  while (at + 4 <= full.size() && !(full[at] == 0xFF && full[at + 1] == 0xDA)) {
    ASSERT_EQ(full[at], 0xFF) << "not a marker at " << at;
    const size_t length = size_t(full[at + 2]) << 8 | full[at + 3];
    if (full[at + 1] != 0xDB)
      cut.insert(cut.end(), full.begin() + at, full.begin() + at + 2 + length);
    at += 2 + length;
  }
  cut.insert(cut.end(), full.begin() + at, full.end());
  ASSERT_LT(cut.size(), full.size());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "on a fresh thread" : "after the full file on the same thread");
    std::thread([&] {
      if (round == 1) {
        ASSERT_TRUE(DecodeEncoded(full, 0, kMaxPixels, "image").ok());
      }
      absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(cut, 0, kMaxPixels, "image");
      ASSERT_FALSE(decoded.ok()) << "decoded without its quantization tables";
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(decoded.status().message().find("image is a truncated or corrupt JPEG file"),
                std::string::npos)
          << decoded.status().message();
    }).join();
  }
}

TEST(DecodeTest, JpegEqualsLibjpegTurbosOwnDecode) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  for (auto [w, h] : kSizes) {
    const std::vector<uint8_t> px = PhotoLike(w, h, 3, rng);
    for (int subsampling : {TJSAMP_444, TJSAMP_420, TJSAMP_422, TJSAMP_GRAY}) {
      for (int quality : {50, 90, 100}) {
        for (int flags : {0, TJFLAG_PROGRESSIVE}) {
          SCOPED_TRACE(::testing::Message() << w << "x" << h << " subsampling " << subsampling
                                            << " quality " << quality << " flags " << flags);
          const File file = TjCompress(px, w, h, TJPF_RGB, subsampling, quality, flags);
          ASSERT_NO_FATAL_FAILURE(ExpectJpegDecodes(file, w, h, subsampling == TJSAMP_GRAY));
        }
      }
    }
  }
}

// Restart markers (DRI) every MCU row, written with libjpeg's own API.
File JpegWithRestarts(const std::vector<uint8_t>& px, int w, int h) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = JDIMENSION(w);
  cinfo.image_height = JDIMENSION(h);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 85, TRUE);
  cinfo.restart_in_rows = 1;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&px[size_t(cinfo.next_scanline) * size_t(w) * 3]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  File file(buf, buf + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buf);
  return file;
}

TEST(DecodeTest, JpegWithRestartMarkersCmykAndFillBytes) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const int w = 53, h = 41;
  const std::vector<uint8_t> px = PhotoLike(w, h, 3, rng);
  const File restarts = JpegWithRestarts(px, w, h);
  const uint8_t dri[2] = {0xFF, 0xDD};
  ASSERT_NE(std::search(restarts.begin(), restarts.end(), dri, dri + 2), restarts.end());
  ExpectJpegDecodes(restarts, w, h, false);

  // 0xFF fill bytes before SOI, as markers may have: the same pixels.
  File filled = {0xFF, 0xFF};
  filled.insert(filled.end(), restarts.begin(), restarts.end());
  ExpectDecodes(filled, 3, {w, h, 3, SampleType::kUint8}, TjDecompress(restarts, w, h, TJPF_RGB));

  // Stray bytes between two segments (before EOI): the pixels are intact, and decode as
  // libjpeg-turbo decodes them, with its warning; a file cut short is still refused.
  File stray(restarts.begin(), restarts.end() - 2);
  for (uint8_t b : {0x12, 0x34, 0x56, 0xFF, 0xD9}) stray.push_back(b);
  ExpectDecodes(stray, 3, {w, h, 3, SampleType::kUint8}, TjDecompress(restarts, w, h, TJPF_RGB));
  const File cut(restarts.begin(), restarts.begin() + ptrdiff_t(restarts.size() * 2 / 3));
  absl::StatusOr<gpu::HostImage> refused = DecodeEncoded(cut, 3, kMaxPixels, "image");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("truncated or corrupt JPEG"), std::string::npos)
      << refused.status();

  // CMYK (TurboJPEG writes YCCK): RGB = inverted CMY times K / 255, rounded, as stb_image made it.
  const std::vector<uint8_t> cmyk_px = PhotoLike(w, h, 4, rng);
  const File cmyk = TjCompress(cmyk_px, w, h, TJPF_CMYK, TJSAMP_444, 95, 0);
  const std::vector<uint8_t> decoded_cmyk = TjDecompress(cmyk, w, h, TJPF_CMYK);
  std::vector<uint8_t> rgb;
  for (size_t i = 0; i < decoded_cmyk.size(); i += 4) {
    for (int c = 0; c < 3; ++c) {
      rgb.push_back(uint8_t((decoded_cmyk[i + size_t(c)] * decoded_cmyk[i + 3] + 127) / 255));
    }
  }
  ExpectDecodes(cmyk, 0, {w, h, 3, SampleType::kUint8}, rgb);
  ExpectDecodes(cmyk, 4, {w, h, 4, SampleType::kUint8}, WithOpaqueAlpha(rgb, 3));
}

// ---- PNG --------------------------------------------------------------------------------------

uint32_t Crc32(const uint8_t* p, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

void Put32(File& f, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) f.push_back(uint8_t(v >> s));
}

void Chunk(File& f, const char* type, const File& data) {
  Put32(f, uint32_t(data.size()));
  const size_t start = f.size();
  f.insert(f.end(), type, type + 4);
  f.insert(f.end(), data.begin(), data.end());
  Put32(f, Crc32(&f[start], f.size() - start));
}

// A zlib stream of stored (uncompressed) deflate blocks: no compressor needed.
File Zlib(const File& data) {
  File z = {0x78, 0x01};
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(65535, data.size() - at);
    z.push_back(at + n == data.size() ? 1 : 0);
    z.push_back(uint8_t(n));
    z.push_back(uint8_t(n >> 8));
    z.push_back(uint8_t(~n));
    z.push_back(uint8_t(~n >> 8));
    z.insert(z.end(), data.begin() + long(at), data.begin() + long(at + n));
    at += n;
  } while (at < data.size());
  uint32_t a = 1, b = 0;
  for (uint8_t v : data) {
    a = (a + v) % 65521;
    b = (b + a) % 65521;
  }
  Put32(z, b << 16 | a);
  return z;
}

struct PngImage {
  int width = 0, height = 0, color_type = 0, depth = 8;
  bool interlaced = false;
  std::vector<uint16_t> samples;  // per pixel, the file's channels (a palette index for type 3)
  File palette, trns;
};

int PngChannels(int color_type) {
  return color_type == 0 ? 1 : color_type == 2 ? 3 : color_type == 3 ? 1 : color_type == 4 ? 2 : 4;
}

// The scanlines of the pixels (x0 + i dx, y0 + j dy), each filtered with a random filter type.
void Scanlines(const PngImage& img, int x0, int y0, int dx, int dy, std::mt19937_64& rng,
               File& out) {
  const int n = PngChannels(img.color_type);
  const int bits = n * img.depth;
  const size_t bpp = size_t(std::max(1, bits / 8));
  File prior;
  for (int y = y0; y < img.height; y += dy) {
    File raw;
    int acc = 0, used = 0;
    for (int x = x0; x < img.width; x += dx) {
      for (int c = 0; c < n; ++c) {
        const uint16_t v =
            img.samples[(size_t(y) * size_t(img.width) + size_t(x)) * size_t(n) + size_t(c)];
        if (img.depth == 16) {
          raw.push_back(uint8_t(v >> 8));
          raw.push_back(uint8_t(v));
        } else if (img.depth == 8) {
          raw.push_back(uint8_t(v));
        } else {
          acc = acc << img.depth | v;
          used += img.depth;
          if (used == 8) {
            raw.push_back(uint8_t(acc));
            acc = used = 0;
          }
        }
      }
    }
    if (raw.empty() && used == 0) return;  // an empty pass has no scanlines
    if (used > 0) raw.push_back(uint8_t(acc << (8 - used)));
    if (prior.empty()) prior.assign(raw.size(), 0);
    const int filter = int(rng() % 5);
    out.push_back(uint8_t(filter));
    for (size_t i = 0; i < raw.size(); ++i) {
      const int a = i >= bpp ? raw[i - bpp] : 0, b = prior[i], c = i >= bpp ? prior[i - bpp] : 0;
      int pred = 0;
      if (filter == 1) pred = a;
      if (filter == 2) pred = b;
      if (filter == 3) pred = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      out.push_back(uint8_t(raw[i] - pred));
    }
    prior = raw;
  }
}

// The image's scanlines (each pass's, for Adam7), filtered with random filter types.
File FilteredScanlines(const PngImage& img, std::mt19937_64& rng) {
  File data;
  if (img.interlaced) {
    constexpr int kPass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                 {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    for (const auto& p : kPass) Scanlines(img, p[0], p[1], p[2], p[3], rng, data);
  } else {
    Scanlines(img, 0, 0, 1, 1, rng, data);
  }
  return data;
}

// A PNG file of `img`'s header, palette and tRNS, then the zlib stream `z` in IDAT chunks of
// `idat_sizes` bytes (summing to z's size), then IEND.
File AssemblePng(const PngImage& img, const File& z, const std::vector<size_t>& idat_sizes) {
  File f = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  File ihdr;
  Put32(ihdr, uint32_t(img.width));
  Put32(ihdr, uint32_t(img.height));
  ihdr.insert(ihdr.end(),
              {uint8_t(img.depth), uint8_t(img.color_type), 0, 0, uint8_t(img.interlaced ? 1 : 0)});
  Chunk(f, "IHDR", ihdr);
  if (!img.palette.empty()) Chunk(f, "PLTE", img.palette);
  if (!img.trns.empty()) Chunk(f, "tRNS", img.trns);
  size_t at = 0;
  for (size_t n : idat_sizes) {
    Chunk(f, "IDAT", File(z.begin() + long(at), z.begin() + long(at + n)));
    at += n;
  }
  Chunk(f, "IEND", {});
  return f;
}

File WritePng(const PngImage& img, std::mt19937_64& rng) {
  // The image data split over two IDAT chunks, as encoders do.
  const File z = Zlib(FilteredScanlines(img, rng));
  return AssemblePng(img, z, {z.size() / 2, z.size() - z.size() / 2});
}

PngImage RandomPng(int w, int h, int color_type, int depth, bool trns, bool interlaced,
                   std::mt19937_64& rng) {
  PngImage img{w, h, color_type, depth, interlaced, {}, {}, {}};
  const int n = PngChannels(color_type);
  const uint32_t max = color_type == 3 ? std::min((1u << depth) - 1, 255u) : (1u << depth) - 1;
  img.samples.resize(size_t(w) * size_t(h) * size_t(n));
  for (uint16_t& s : img.samples) s = uint16_t(rng() % (max + 1));
  if (color_type == 3) {
    img.palette.resize(size_t(max + 1) * 3);
    for (uint8_t& b : img.palette) b = uint8_t(rng());
    if (trns) {
      img.trns.resize(size_t(rng() % (max + 1)) + 1);
      for (uint8_t& b : img.trns) b = uint8_t(rng());
    }
  } else if (trns) {
    // The transparent colour is that of a pixel of the image, so that some pixels are.
    const size_t pixel = size_t(rng() % (size_t(w) * size_t(h)));
    for (int c = 0; c < n; ++c) {
      const uint16_t v = img.samples[pixel * size_t(n) + size_t(c)];
      img.trns.push_back(uint8_t(v >> 8));
      img.trns.push_back(uint8_t(v));
    }
  }
  return img;
}

// What a PNG decodes to as `channels` (0: its own, `own`), from the PNG spec: low-depth grey scaled
// to 8 bits, palette entries looked up, tRNS made alpha; then the server's channel rules.
std::vector<uint8_t> ExpectedPng(const PngImage& img, int channels, int own) {
  const int to = channels == 0 ? own : channels;
  const int n = PngChannels(img.color_type);
  const bool sixteen = img.depth == 16;
  const uint32_t max = sixteen ? 65535 : 255;
  std::vector<uint8_t> out;
  for (size_t p = 0; p < size_t(img.width) * size_t(img.height); ++p) {
    const uint16_t* s = &img.samples[p * size_t(n)];
    uint32_t r = 0, g = 0, b = 0, a = max;
    bool grey = false;
    auto scale = [&](uint32_t v) {
      return sixteen || img.depth == 8 ? v : v * 255 / ((1u << img.depth) - 1);
    };
    auto trns16 = [&](int i) {
      return uint32_t(img.trns[size_t(2 * i)]) << 8 | img.trns[size_t(2 * i + 1)];
    };
    switch (img.color_type) {
      case 0:
      case 4:
        grey = true;
        r = g = b = scale(s[0]);
        if (img.color_type == 4) a = s[1];
        if (!img.trns.empty() && s[0] == trns16(0)) a = 0;
        break;
      case 2:
      case 6:
        r = s[0], g = s[1], b = s[2];
        if (img.color_type == 6) a = s[3];
        if (!img.trns.empty() && s[0] == trns16(0) && s[1] == trns16(1) && s[2] == trns16(2)) a = 0;
        break;
      case 3:
        r = img.palette[s[0] * 3u], g = img.palette[s[0] * 3u + 1], b = img.palette[s[0] * 3u + 2];
        if (s[0] < img.trns.size()) a = img.trns[s[0]];
        break;
    }
    const uint32_t y = grey ? g : (r * 77 + g * 150 + b * 29) >> 8;
    const std::array<std::vector<uint32_t>, 4> by_channels = {
        std::vector<uint32_t>{y}, {y, a}, {r, g, b}, {r, g, b, a}};
    for (uint32_t v : by_channels[size_t(to - 1)]) {
      out.push_back(uint8_t(v));
      if (sixteen) out.push_back(uint8_t(v >> 8));  // host order: little-endian
    }
  }
  return out;
}

// Every colour type at every depth it allows, with and without tRNS where it may have one.
struct PngKind {
  int color_type, depth;
  bool trns;
};

std::vector<PngKind> PngKinds() {
  std::vector<PngKind> kinds;
  for (int depth : {1, 2, 4, 8, 16}) {
    kinds.push_back({0, depth, false});
    kinds.push_back({0, depth, true});
  }
  for (int depth : {1, 2, 4, 8}) {
    kinds.push_back({3, depth, false});
    kinds.push_back({3, depth, true});
  }
  for (int depth : {8, 16}) {
    kinds.push_back({2, depth, false});
    kinds.push_back({2, depth, true});
    kinds.push_back({4, depth, false});
    kinds.push_back({6, depth, false});
  }
  return kinds;
}

// Against the PNG spec's pixels (ExpectedPng) and stb_image's decode, which the server used before:
// every kind, depth, tRNS, Adam7, random scanline filters.
TEST(DecodeTest, PngEqualsTheSpecAndStbImageForEveryKind) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const std::vector<PngKind> kinds = PngKinds();
  for (const PngKind& k : kinds) {
    for (bool interlaced : {false, true}) {
      for (auto [w, h] : kSizes) {
        SCOPED_TRACE(::testing::Message() << "colour type " << k.color_type << ", " << k.depth
                                          << "-bit" << (k.trns ? ", tRNS" : "")
                                          << (interlaced ? ", Adam7 " : " ") << w << "x" << h);
        const PngImage img = RandomPng(w, h, k.color_type, k.depth, k.trns, interlaced, rng);
        const File file = WritePng(img, rng);
        const auto* data = reinterpret_cast<const stbi_uc*>(file.data());
        const int len = int(file.size());
        int sw = 0, sh = 0, comp = 0;
        ASSERT_TRUE(stbi_info_from_memory(data, len, &sw, &sh, &comp)) << stbi_failure_reason();
        const SampleType type = k.depth == 16 ? SampleType::kUint16 : SampleType::kUint8;
        absl::StatusOr<gpu::ImageDesc> probed = ProbeEncoded(file, "image");
        ASSERT_TRUE(probed.ok()) << probed.status().message();
        EXPECT_EQ(*probed, (ImageDesc{w, h, comp, type}));
        for (int channels = 0; channels <= 4; ++channels) {
          const ImageDesc d{w, h, channels == 0 ? probed->channels : channels, type};
          const std::vector<uint8_t> expected = ExpectedPng(img, channels, probed->channels);
          ASSERT_NO_FATAL_FAILURE(ExpectDecodes(file, channels, d, expected));
          // As the server called it: the channels stbi_info reported, not 0 (which would add the
          // alpha of a tRNS chunk to grey and RGB files).
          void* ref = k.depth == 16 ? static_cast<void*>(stbi_load_16_from_memory(
                                          data, len, &sw, &sh, &comp, d.channels))
                                    : static_cast<void*>(stbi_load_from_memory(data, len, &sw, &sh,
                                                                               &comp, d.channels));
          ASSERT_NE(ref, nullptr) << stbi_failure_reason();
          const std::vector<uint8_t> stb(static_cast<uint8_t*>(ref),
                                         static_cast<uint8_t*>(ref) + d.bytes());
          stbi_image_free(ref);
          EXPECT_TRUE(stb == expected) << "stb_image differs, as " << channels << " channels";
        }
      }
    }
  }
}

// zlib's compressor (an encoder independent of the decoder's libdeflate) at `level` with
// `strategy` and a window of 2^window_bits bytes.
File Deflate(const File& data, int level, int strategy, int window_bits) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, window_bits, 8, strategy), Z_OK);
  // deflateBound is not always enough at the smallest windows: the output grows until done.
  File out(deflateBound(&zs, uLong(data.size())));
  zs.next_in = const_cast<Bytef*>(data.data());  // zlib does not write it
  zs.avail_in = uInt(data.size());
  int ret = Z_OK;
  while (ret == Z_OK) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2);
    zs.next_out = out.data() + zs.total_out;
    zs.avail_out = uInt(out.size() - zs.total_out);
    ret = deflate(&zs, Z_FINISH);
  }
  EXPECT_EQ(ret, Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Sizes of IDAT chunks holding `n` bytes as encoders never quite write them: empty chunks (first,
// last, between), 1-byte chunks, and chunks of up to 3000 bytes.
std::vector<size_t> RandomIdatSizes(size_t n, std::mt19937_64& rng) {
  std::vector<size_t> sizes;
  for (size_t left = n; left > 0;) {
    const uint64_t pick = rng() % 4;
    const size_t take = pick == 0 ? 0 : pick == 1 ? 1 : std::min<size_t>(left, 1 + rng() % 3000);
    sizes.push_back(take);
    left -= take;
  }
  if (rng() % 2 == 0) sizes.push_back(0);
  return sizes;
}

// libspng's own decode of `file` to RGBA (8- or 16-bit, host order) with its tRNS applied: what
// the server's PNG decoder gave before it inflated and unfiltered by itself. Empty if refused.
std::vector<uint8_t> SpngRgba(const File& file, bool sixteen) {
  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(0), &spng_ctx_free);
  const int format = sixteen ? SPNG_FMT_RGBA16 : SPNG_FMT_RGBA8;
  size_t size = 0;
  if (spng_set_png_buffer(ctx.get(), file.data(), file.size()) != 0 ||
      spng_decoded_image_size(ctx.get(), format, &size) != 0) {
    return {};
  }
  std::vector<uint8_t> out(size);
  if (spng_decode_image(ctx.get(), out.data(), size, format, SPNG_DECODE_TRNS) != 0) return {};
  return out;
}

// EncodePng's files, 8- and 16-bit, 1-4 channels, of awkward sizes, smooth rows and noisy ones (so
// that each filter wins somewhere), read back by libspng (as RGBA, by PNG's rules for grey and
// missing alpha) and by the server's own decoder: the same pixels, never over PngBytesBound.
TEST(DecodeTest, EncodedPngsReadBackExactlyByLibspngAndTheServer) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const std::pair<int, int> sizes[] = {{1, 1}, {3, 2}, {37, 21}, {301, 2}, {2, 300}, {64, 64}};
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16}) {
    const bool sixteen = type == SampleType::kUint16;
    const uint32_t max = sixteen ? 65535 : 255;
    for (int channels = 1; channels <= 4; ++channels) {
      for (const auto& [w, h] : sizes) {
        SCOPED_TRACE(::testing::Message()
                     << w << "x" << h << "x" << channels << (sixteen ? " 16" : " 8"));
        gpu::HostImage img = gpu::HostImage::Zeros({w, h, channels, type});
        for (int y = 0; y < h; ++y) {
          const bool noisy = rng() % 3 == 0;
          for (int x = 0; x < w; ++x) {
            for (int c = 0; c < channels; ++c) {
              const uint32_t smooth = uint32_t((x * 7 + y * 5 + c * 40) * max / 700) % (max + 1);
              const uint32_t v = noisy ? uint32_t(rng()) % (max + 1) : smooth;
              if (sixteen) {
                img.set<uint16_t>(x, y, c, uint16_t(v));
              } else {
                img.set<uint8_t>(x, y, c, uint8_t(v));
              }
            }
          }
        }
        absl::StatusOr<std::string> png = EncodePng(img);
        ASSERT_TRUE(png.ok()) << png.status();
        EXPECT_LE(png->size(), PngBytesBound(img.desc));
        const File file(png->begin(), png->end());
        absl::StatusOr<gpu::HostImage> ours = DecodeEncoded(file, 0, kMaxPixels, "png");
        ASSERT_TRUE(ours.ok()) << ours.status();
        EXPECT_EQ(ours->desc, img.desc);
        EXPECT_TRUE(ours->data == img.data);
        const std::vector<uint8_t> rgba = SpngRgba(file, sixteen);
        ASSERT_EQ(rgba.size(), size_t(w) * size_t(h) * 4 * (sixteen ? 2 : 1));
        for (int y = 0; y < h; ++y) {
          for (int x = 0; x < w; ++x) {
            const size_t p = size_t(y) * size_t(w) + size_t(x);
            for (int c = 0; c < 4; ++c) {
              const int from = channels <= 2 ? (c < 3           ? 0
                                                : channels == 2 ? 1
                                                                : -1)
                                             : (c < 3           ? c
                                                : channels == 4 ? 3
                                                                : -1);
              const uint32_t want = from < 0 ? max : uint32_t(img.value(x, y, from));
              uint32_t got = 0;
              if (sixteen) {
                uint16_t v;
                std::memcpy(&v, &rgba[(p * 4 + size_t(c)) * 2], 2);
                got = v;
              } else {
                got = rgba[p * 4 + size_t(c)];
              }
              ASSERT_EQ(got, want) << "pixel " << x << "," << y << " channel " << c;
            }
          }
        }
      }
    }
  }
  absl::StatusOr<std::string> refused =
      EncodePng(gpu::HostImage::Zeros({4, 4, 1, SampleType::kFloat32}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      refused.status().message(),
      "encoding PNG needs a uint8 or uint16 image of 1-4 channels, got 4x4 1-channel float32; "
      "ask for RAW pixels");
}

// Real compressed image data (zlib at every level and strategy) in IDAT chunks of random sizes:
// the spec's pixels, and exactly libspng's.
TEST(DecodeTest, CompressedPngsInManyIdatsEqualTheSpecAndLibspng) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  constexpr int kStrategies[] = {Z_DEFAULT_STRATEGY, Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE, Z_FIXED};
  for (const PngKind& k : PngKinds()) {
    for (bool interlaced : {false, true}) {
      for (auto [w, h] : kSizes) {
        const int level = int(rng() % 10), strategy = kStrategies[rng() % 5];
        const int window = 9 + int(rng() % 7);
        SCOPED_TRACE(::testing::Message()
                     << "colour type " << k.color_type << ", " << k.depth << "-bit"
                     << (k.trns ? ", tRNS" : "") << (interlaced ? ", Adam7 " : " ") << w << "x" << h
                     << ", zlib level " << level << " strategy " << strategy << " window 2^"
                     << window);
        const PngImage img = RandomPng(w, h, k.color_type, k.depth, k.trns, interlaced, rng);
        const File z = Deflate(FilteredScanlines(img, rng), level, strategy, window);
        const File file = AssemblePng(img, z, RandomIdatSizes(z.size(), rng));
        absl::StatusOr<gpu::ImageDesc> probed = ProbeEncoded(file, "image");
        ASSERT_TRUE(probed.ok()) << probed.status().message();
        const SampleType type = k.depth == 16 ? SampleType::kUint16 : SampleType::kUint8;
        for (int channels = 0; channels <= 4; ++channels) {
          const ImageDesc d{w, h, channels == 0 ? probed->channels : channels, type};
          ASSERT_NO_FATAL_FAILURE(
              ExpectDecodes(file, channels, d, ExpectedPng(img, channels, probed->channels)));
        }
        const std::vector<uint8_t> spng = SpngRgba(file, k.depth == 16);
        ASSERT_FALSE(spng.empty()) << "libspng refused the file";
        absl::StatusOr<gpu::HostImage> rgba = DecodeEncoded(file, 4, kMaxPixels, "image");
        ASSERT_TRUE(rgba.ok()) << rgba.status().message();
        EXPECT_TRUE(rgba->data == spng) << "pixels differ from libspng's";
      }
    }
  }
}

// ---- WebP -------------------------------------------------------------------------------------

File WebpEncode(const std::vector<uint8_t>& px, int w, int h, int channels, bool lossless) {
  uint8_t* out = nullptr;
  size_t size = 0;
  if (lossless) {
    size = channels == 4 ? WebPEncodeLosslessRGBA(px.data(), w, h, w * 4, &out)
                         : WebPEncodeLosslessRGB(px.data(), w, h, w * 3, &out);
  } else {
    size = channels == 4 ? WebPEncodeRGBA(px.data(), w, h, w * 4, 80, &out)
                         : WebPEncodeRGB(px.data(), w, h, w * 3, 80, &out);
  }
  EXPECT_GT(size, 0u);
  File file(out, out + size);
  WebPFree(out);
  return file;
}

std::vector<uint8_t> WebpDecode(const File& file, int channels) {
  int w = 0, h = 0;
  uint8_t* px = channels == 4 ? WebPDecodeRGBA(file.data(), file.size(), &w, &h)
                              : WebPDecodeRGB(file.data(), file.size(), &w, &h);
  EXPECT_NE(px, nullptr);
  std::vector<uint8_t> out(px, px + size_t(w) * size_t(h) * size_t(channels));
  WebPFree(px);
  return out;
}

// Luma as the server makes grey of colour everywhere but in JPEG: (77 R + 150 G + 29 B) >> 8.
std::vector<uint8_t> Grey(const std::vector<uint8_t>& px, int channels, bool keep_alpha) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < px.size(); i += size_t(channels)) {
    out.push_back(uint8_t((px[i] * 77 + px[i + 1] * 150 + px[i + 2] * 29) >> 8));
    if (keep_alpha) out.push_back(channels == 4 ? px[i + 3] : 255);
  }
  return out;
}

TEST(DecodeTest, WebpLosslessIsExactAndLossyEqualsLibwebp) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  for (auto [w, h] : kSizes) {
    for (int channels : {3, 4}) {
      std::vector<uint8_t> px = PhotoLike(w, h, channels, rng);
      for (bool lossless : {true, false}) {
        SCOPED_TRACE(::testing::Message() << w << "x" << h << " " << channels << " channels "
                                          << (lossless ? "lossless" : "lossy"));
        const File file = WebpEncode(px, w, h, channels, lossless);
        const std::vector<uint8_t> rgb = WebpDecode(file, 3), rgba = WebpDecode(file, 4);
        if (lossless) {
          EXPECT_TRUE((channels == 4 ? rgba : rgb) == px) << "lossless WebP is not exact";
        }
        ASSERT_NO_FATAL_FAILURE(ExpectDecodes(file, 0, {w, h, channels, SampleType::kUint8},
                                              channels == 4 ? rgba : rgb));
        ExpectDecodes(file, 1, {w, h, 1, SampleType::kUint8}, Grey(rgb, 3, false));
        ExpectDecodes(file, 2, {w, h, 2, SampleType::kUint8}, Grey(rgba, 4, true));
        ExpectDecodes(file, 3, {w, h, 3, SampleType::kUint8}, rgb);
        ExpectDecodes(file, 4, {w, h, 4, SampleType::kUint8}, rgba);
      }
    }
  }
}

// ---- bad files --------------------------------------------------------------------------------

void ExpectRefused(const File& file, const std::string& needle,
                   absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::StatusOr<gpu::HostImage> decoded = DecodeEncoded(file, 0, kMaxPixels, "image.encoded");
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), code) << decoded.status().message();
  EXPECT_NE(decoded.status().message().find("image.encoded"), std::string::npos)
      << decoded.status().message();
  EXPECT_NE(decoded.status().message().find(needle), std::string::npos)
      << decoded.status().message();
}

std::vector<size_t> CutPoints(size_t size) {
  return {4, 11, 20, 33, size / 4, size / 2, size * 3 / 4, size - 2, size - 1};
}

TEST(DecodeTest, TruncatedAndCorruptFilesAreRefusedNamingTheirFormat) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const int w = 45, h = 37;
  const std::vector<uint8_t> px = PhotoLike(w, h, 3, rng);
  for (int flags : {0, TJFLAG_PROGRESSIVE}) {
    const File jpeg = TjCompress(px, w, h, TJPF_RGB, TJSAMP_420, 90, flags);
    for (size_t cut : CutPoints(jpeg.size())) {
      SCOPED_TRACE(::testing::Message() << "JPEG flags " << flags << " cut at " << cut);
      ExpectRefused(File(jpeg.begin(), jpeg.begin() + long(cut)),
                    "image.encoded is a truncated or corrupt JPEG file: ");
    }
  }

  PngImage img = RandomPng(w, h, 2, 8, false, false, rng);
  const File png = WritePng(img, rng);
  for (size_t cut : CutPoints(png.size())) {
    SCOPED_TRACE(::testing::Message() << "PNG cut at " << cut);
    ExpectRefused(File(png.begin(), png.begin() + long(cut)),
                  "image.encoded is a truncated or corrupt PNG file: ");
  }
  // A CRC that does not match its chunk's data, in the image data and in the header.
  File bad_crc = png;
  bad_crc[png.size() - 13] ^= 0x01;  // the last IDAT's CRC
  ExpectRefused(bad_crc, "image.encoded is a truncated or corrupt PNG file: ");
  bad_crc = png;
  bad_crc[29] ^= 0x80;  // IHDR's CRC
  ExpectRefused(bad_crc, "image.encoded is a truncated or corrupt PNG file: ");

  for (bool lossless : {true, false}) {
    const File webp = WebpEncode(px, w, h, 3, lossless);
    for (size_t cut : CutPoints(webp.size())) {
      SCOPED_TRACE(::testing::Message() << "WebP lossless " << lossless << " cut at " << cut);
      ExpectRefused(File(webp.begin(), webp.begin() + long(cut)),
                    "image.encoded is a truncated or corrupt WebP file: ");
    }
  }

  ExpectRefused({}, "image.encoded is empty");
  const std::string formats =
      "is not an image file that can be read (formats: JPEG, PNG, WebP, BMP, GIF, TGA, PSD, HDR, "
      "PNM)";
  std::string text = "hello, this is text";
  ExpectRefused(File(text.begin(), text.end()), formats);
  File garbage(1000);
  for (uint8_t& b : garbage) b = uint8_t(rng());
  std::memcpy(garbage.data(), "garbage:", 8);  // no signature, and no TGA header either
  ExpectRefused(garbage, formats);
}

// Where the chunk `type` starts in `f` for the `nth` time (0: the first); npos if it does not.
size_t ChunkAt(const File& f, const char* type, int nth) {
  for (size_t at = 8; at + 12 <= f.size();) {
    const size_t length =
        size_t(f[at]) << 24 | size_t(f[at + 1]) << 16 | size_t(f[at + 2]) << 8 | size_t(f[at + 3]);
    if (std::memcmp(&f[at + 4], type, 4) == 0 && nth-- == 0) return at;
    at += 12 + length;
  }
  return std::string::npos;
}

File WithChunk(const File& f, size_t at, const char* type, const File& data) {
  File chunk;
  Chunk(chunk, type, data);
  File out = f;
  out.insert(out.begin() + long(at), chunk.begin(), chunk.end());
  return out;
}

// Each way the chunks or the image data can be wrong is refused saying which, naming the field.
TEST(DecodeTest, BadPngChunksAndImageDataAreRefusedSayingWhatIsWrong) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const std::string corrupt = "image.encoded is a truncated or corrupt PNG file: ";
  const PngImage img = RandomPng(23, 17, 2, 8, false, false, rng);
  const File data = FilteredScanlines(img, rng);  // 17 scanlines of 1 + 69 bytes
  const size_t needs = 17 * 70;
  ASSERT_EQ(data.size(), needs);
  const File z = Deflate(data, 6, Z_DEFAULT_STRATEGY, 15);
  const File png = AssemblePng(img, z, {z.size() / 3, z.size() / 3, z.size() - 2 * (z.size() / 3)});
  ASSERT_TRUE(DecodeEncoded(png, 0, kMaxPixels, "image").ok());

  File bad = png;
  const size_t idat = ChunkAt(png, "IDAT", 1);
  bad[idat + 8 + z.size() / 3] ^= 0x10;  // the second IDAT's CRC
  ExpectRefused(bad,
                corrupt + "the CRC of its IDAT chunk at byte " + std::to_string(idat) + " is ");
  File zbad = z;
  zbad.back() ^= 0x01;
  ExpectRefused(AssemblePng(img, zbad, {zbad.size()}),
                corrupt + "its image data's Adler-32 checksum is ");
  // Cut inside the deflate data: stored blocks (exactly), compressed ones (some refusal of the
  // data).
  const File stored = Zlib(data);
  ExpectRefused(AssemblePng(img, File(stored.begin(), stored.begin() + 100), {100}),
                corrupt + "its image data's deflate stream is corrupt or cut short");
  ExpectRefused(AssemblePng(img, File(z.begin(), z.begin() + long(z.size() / 2)), {z.size() / 2}),
                corrupt + "its image data");
  ExpectRefused(AssemblePng(img, File(z.begin(), z.end() - 2), {z.size() - 2}),
                corrupt + "its image data ends before the zlib stream's Adler-32 checksum");
  zbad = z;
  zbad[0] = 0x79;  // not deflate
  ExpectRefused(AssemblePng(img, zbad, {z.size()}),
                corrupt + "its image data does not start with a zlib header");
  File more = data;
  more.insert(more.end(), {0, 1, 2, 3, 4});
  ExpectRefused(AssemblePng(img, Zlib(more), {Zlib(more).size()}),
                corrupt + "its image data inflates to more than 1190 bytes, the header needs 1190");
  const File fewer = Zlib(File(data.begin(), data.end() - 10));
  ExpectRefused(AssemblePng(img, fewer, {fewer.size()}),
                corrupt + "its image data inflates to 1180 bytes, the header needs 1190");
  File filter5 = data;
  filter5[3 * 70] = 5;
  ExpectRefused(AssemblePng(img, Zlib(filter5), {Zlib(filter5).size()}),
                corrupt + "scanline 3 has filter type 5; PNG's are 0 to 4");
  PngImage adam7 = img;
  adam7.interlaced = true;
  File filter9 = FilteredScanlines(adam7, rng);
  filter9[0] = 9;  // pass 1's first scanline
  ExpectRefused(AssemblePng(adam7, Zlib(filter9), {Zlib(filter9).size()}),
                corrupt + "scanline 0 of pass 1 has filter type 9; PNG's are 0 to 4");

  ExpectRefused(
      File(png.begin(), png.end() - 12),
      corrupt + "the file ends at byte " + std::to_string(png.size() - 12) + " with no IEND chunk");
  ExpectRefused(File(png.begin(), png.end() - 5),
                corrupt + "the file ends at byte " + std::to_string(png.size() - 5) +
                    ", inside the chunk at byte " + std::to_string(png.size() - 12));
  ExpectRefused(AssemblePng(img, z, {}), corrupt + "it has no IDAT chunk (no image data)");
  ExpectRefused(File(png.begin(), png.begin() + 8),
                corrupt + "the file ends at byte 8, before the end of its IHDR chunk (byte 33)");
  ExpectRefused(WithChunk(png, png.size() - 12, "ZZZZ", {1, 2}),
                corrupt + "its chunk ZZZZ at byte " + std::to_string(png.size() - 12) +
                    " is critical and not one PNG defines");
  ExpectRefused(WithChunk(png, ChunkAt(png, "IDAT", 2), "zzZz", {}),
                corrupt + "an IDAT chunk at byte " + std::to_string(ChunkAt(png, "IDAT", 2) + 12) +
                    " after other chunks followed IDAT");
  // An unknown ancillary chunk is skipped.
  absl::StatusOr<gpu::HostImage> skipped =
      DecodeEncoded(WithChunk(png, ChunkAt(png, "IDAT", 0), "zzZz", {7}), 0, kMaxPixels, "image");
  ASSERT_TRUE(skipped.ok()) << skipped.status().message();
  EXPECT_TRUE(skipped->data == ExpectedPng(img, 0, 3));

  PngImage indexed = RandomPng(19, 5, 3, 8, false, false, rng);
  PngImage no_palette = indexed;
  no_palette.palette.clear();
  // Refused by the header probe (libspng's message) before the decoder's own check is reached.
  ExpectRefused(WritePng(no_palette, rng), corrupt + "missing PLTE for indexed image");
  // Indices past a 5-entry palette: libspng decodes them as opaque black, and so does the server.
  indexed.palette.resize(15);
  const File past = WritePng(indexed, rng);
  absl::StatusOr<gpu::HostImage> black = DecodeEncoded(past, 4, kMaxPixels, "image");
  ASSERT_TRUE(black.ok()) << black.status().message();
  EXPECT_TRUE(black->data == SpngRgba(past, false)) << "pixels differ from libspng's";
  for (size_t p = 0; p < indexed.samples.size(); ++p) {
    const size_t i = indexed.samples[p];
    const std::array<uint8_t, 4> want =
        i < 5 ? std::array<uint8_t, 4>{indexed.palette[3 * i], indexed.palette[3 * i + 1],
                                       indexed.palette[3 * i + 2], 255}
              : std::array<uint8_t, 4>{0, 0, 0, 255};
    ASSERT_EQ(std::memcmp(&black->data[4 * p], want.data(), 4), 0)
        << "pixel " << p << " index " << i;
  }
}

// For a device that takes 3-channel images as rows widened to four channels (a GPU), a 3-channel
// image is decoded straight into them: the first three lanes of each are the pixels DecodeEncoded
// gives, the fourth opaque, and no 3-channel copy is kept. Other channel counts, and devices
// without plain uploads, get the image's own rows as DecodeEncoded does.
TEST(DecodeTest, ThreeChannelImagesDecodeStraightIntoWidenedRowsForAGpu) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  gpu::DeviceLimits gpu_device, cpu_device;
  gpu_device.plain_uploads = true;
  const int w = 37, h = 21;
  const std::vector<uint8_t> px = PhotoLike(w, h, 3, rng);
  const PngImage png16 = RandomPng(w, h, 2, 16, false, true, rng);
  const std::pair<const char*, File> files[] = {
      {"JPEG", TjCompress(px, w, h, TJPF_RGB, TJSAMP_420, 90, 0)},
      {"PNG", WritePng(RandomPng(w, h, 2, 8, false, false, rng), rng)},
      {"16-bit Adam7 PNG", WritePng(png16, rng)},
      {"grey PNG", WritePng(RandomPng(w, h, 0, 8, false, false, rng), rng)},
      {"WebP", WebpEncode(px, w, h, 3, true)},
  };
  for (const auto& [name, file] : files) {
    for (int channels = 0; channels <= 4; ++channels) {
      SCOPED_TRACE(::testing::Message() << name << " as " << channels << " channels");
      absl::StatusOr<gpu::HostImage> own = DecodeEncoded(file, channels, kMaxPixels, "image");
      ASSERT_TRUE(own.ok()) << own.status();
      const ImageDesc& d = own->desc;
      absl::StatusOr<DecodedImage> cpu =
          DecodeEncodedFor(cpu_device, file, channels, kMaxPixels, "image");
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      EXPECT_EQ(cpu->host.desc, d);
      EXPECT_TRUE(cpu->host.data == own->data);
      EXPECT_TRUE(cpu->widened.empty());
      absl::StatusOr<DecodedImage> gpu =
          DecodeEncodedFor(gpu_device, file, channels, kMaxPixels, "image");
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_EQ(gpu->host.desc, d);
      if (d.channels != 3) {
        EXPECT_TRUE(gpu->host.data == own->data);
        EXPECT_TRUE(gpu->widened.empty());
        continue;
      }
      EXPECT_TRUE(gpu->host.data.empty());
      ASSERT_EQ(gpu->widened.size(), gpu::WidenedBytes(d));
      EXPECT_TRUE(gpu::NarrowFromUpload(d, gpu->widened) == own->data);
      const size_t sample = size_t(gpu::BytesPerSample(d.type));
      for (size_t i = 3 * sample; i < gpu->widened.size(); i += 4 * sample) {
        for (size_t b = 0; b < sample; ++b) ASSERT_EQ(gpu->widened[i + b], 0xFF) << "byte " << i;
      }
    }
  }
}

// ---- EXIF orientation -------------------------------------------------------------------------

// A TIFF block whose first IFD holds the orientation tag (0x0112) as `count` values of `type`
// (3: SHORT, 4: LONG), little- or big-endian, after another tag.
File ExifBlock(uint32_t orientation, bool little, uint16_t type = 3, uint32_t count = 1) {
  File t;
  auto u16 = [&](uint32_t v) {
    t.push_back(uint8_t(little ? v : v >> 8));
    t.push_back(uint8_t(little ? v >> 8 : v));
  };
  auto u32 = [&](uint32_t v) {
    u16(little ? v & 0xFFFF : v >> 16);
    u16(little ? v >> 16 : v & 0xFFFF);
  };
  const uint8_t order = little ? 'I' : 'M';
  t = {order, order};
  u16(42);
  u32(8);       // the first IFD, straight after the header
  u16(2);       // its entries:
  u16(0x010F);  // Make, 4 ASCII bytes: "Cam"
  u16(2);
  u32(4);
  t.insert(t.end(), {'C', 'a', 'm', 0});
  u16(0x0112);  // Orientation
  u16(type);
  u32(count);
  if (type == 3) {
    u16(orientation);
    u16(0);
  } else {
    u32(orientation);
  }
  u32(0);  // no next IFD
  return t;
}

// `jpeg` with an APP1 segment of `payload` (which starts "Exif\0\0" for an EXIF one) after SOI.
File JpegWith(const File& jpeg, const File& payload) {
  File app1 = {0xFF, 0xE1, uint8_t((payload.size() + 2) >> 8), uint8_t(payload.size() + 2)};
  app1.insert(app1.end(), payload.begin(), payload.end());
  File out = jpeg;
  out.insert(out.begin() + 2, app1.begin(), app1.end());
  return out;
}

File ExifPayload(const File& tiff) {
  File p = {'E', 'x', 'i', 'f', 0, 0};
  p.insert(p.end(), tiff.begin(), tiff.end());
  return p;
}

// A WebP file in the extended format (VP8X, its EXIF and alpha flags set) of a simple one's image
// chunk, then an EXIF chunk of `exif`.
File WebpWithExif(const File& simple, int w, int h, const File& exif) {
  File body = {'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0, 0x18, 0, 0, 0};
  for (uint32_t v : {uint32_t(w - 1), uint32_t(h - 1)}) {
    body.insert(body.end(), {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16)});
  }
  body.insert(body.end(), simple.begin() + 12, simple.end());
  body.insert(body.end(), {'E', 'X', 'I', 'F'});
  for (int i = 0; i < 4; ++i) body.push_back(uint8_t(exif.size() >> (8 * i)));
  body.insert(body.end(), exif.begin(), exif.end());
  if (exif.size() % 2 == 1) body.push_back(0);
  File out = {'R', 'I', 'F', 'F'};
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(body.size() >> (8 * i)));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

// A file of each format that carries EXIF, turned each of the eight ways, in either byte order:
// the image is the file's as stored, turned by the tests' own reference, for every channel count,
// strided, and for a GPU's widened rows; as stored on request; and unchanged by the block itself.
TEST(DecodeTest, ExifOrientationTurnsJpegPngAndWebpAsViewersShowThem) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  gpu::DeviceLimits gpu_device;
  gpu_device.plain_uploads = true;
  const int w = 23, h = 14;
  const std::vector<uint8_t> px = PhotoLike(w, h, 3, rng), px4 = PhotoLike(w, h, 4, rng);
  const File png = WritePng(RandomPng(w, h, 2, 8, false, false, rng), rng);
  const File png16 = WritePng(RandomPng(w, h, 6, 16, false, true, rng), rng);
  const File webp = WebpEncode(px4, w, h, 4, true);
  const size_t idat = ChunkAt(png, "IDAT", 0), idat16 = ChunkAt(png16, "IDAT", 0);
  for (int o = 1; o <= 8; ++o) {
    for (bool little : {true, false}) {
      const File tiff = ExifBlock(uint32_t(o), little);
      const std::pair<std::string, File> files[] = {
          {"JPEG", JpegWith(TjCompress(px, w, h, TJPF_RGB, TJSAMP_420, 90, 0), ExifPayload(tiff))},
          {"PNG", WithChunk(png, idat, "eXIf", tiff)},
          {"16-bit RGBA Adam7 PNG", WithChunk(png16, idat16, "eXIf", tiff)},
          {"WebP", WebpWithExif(webp, w, h, tiff)},
          {"WebP, Exif header", WebpWithExif(webp, w, h, ExifPayload(tiff))},
      };
      for (const auto& [name, file] : files) {
        SCOPED_TRACE(::testing::Message()
                     << name << ", orientation " << o << (little ? " (II)" : " (MM)"));
        absl::StatusOr<Probed> probed = Probe(file, "image");
        ASSERT_TRUE(probed.ok()) << probed.status();
        EXPECT_EQ(probed->orientation, o);
        absl::StatusOr<Probed> as_stored = Probe(file, "image", Orientation::kAsStored);
        ASSERT_TRUE(as_stored.ok()) << as_stored.status();
        EXPECT_EQ(as_stored->orientation, 1);
        EXPECT_EQ(as_stored->desc.width, w);
        for (int channels = 0; channels <= 4; ++channels) {
          SCOPED_TRACE(::testing::Message() << "as " << channels << " channels");
          absl::StatusOr<gpu::HostImage> stored =
              DecodeEncoded(file, channels, kMaxPixels, "image", nullptr, Orientation::kAsStored);
          ASSERT_TRUE(stored.ok()) << stored.status();
          ASSERT_EQ(stored->desc.width, w);
          ImageDesc shown;
          const std::vector<uint8_t> turned =
              ::glimpse::testing::TurnedAsExifSays(stored->data, stored->desc, o, &shown);
          ASSERT_NO_FATAL_FAILURE(ExpectDecodes(file, channels, shown, turned));
          absl::StatusOr<DecodedImage> gpu =
              DecodeEncodedFor(gpu_device, file, channels, kMaxPixels, "image");
          ASSERT_TRUE(gpu.ok()) << gpu.status();
          EXPECT_EQ(gpu->host.desc, shown);
          if (shown.channels == 3) {
            EXPECT_TRUE(gpu::NarrowFromUpload(shown, gpu->widened) == turned);
          } else {
            EXPECT_TRUE(gpu->host.data == turned);
          }
        }
      }
    }
  }
  // The block changes no pixel: a JPEG with it, decoded as stored, is the JPEG without it.
  const File plain = TjCompress(px, w, h, TJPF_RGB, TJSAMP_444, 85, 0);
  absl::StatusOr<gpu::HostImage> with =
      DecodeEncoded(JpegWith(plain, ExifPayload(ExifBlock(6, true))), 0, kMaxPixels, "image",
                    nullptr, Orientation::kAsStored);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_TRUE(with->data == TjDecompress(plain, w, h, TJPF_RGB));
}

// Reorient against the tests' reference for every orientation and pixel size (1-4 channels of 8
// and 16 bits, and float RGBA), at sizes across its tiles (32, 64 and 128 pixels) and its 4 x 4
// blocks, with rows a few bytes apart beyond their length. Source and output are allocated to
// the byte (the last row without its padding), so a read or write past either is a sanitizer
// error; the bytes between the output's rows are checked untouched.
TEST(DecodeTest, ReorientEqualsTheReferenceAtEveryPixelSizeAndAcrossTiles) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const std::pair<int, int> sizes[] = {{1, 1},   {1, 9},   {7, 1},     {4, 4},   {5, 3},
                                       {33, 65}, {130, 7}, {129, 131}, {67, 258}};
  for (const auto& [w, h] : sizes) {
    for (const size_t pixel :
         {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{6}, size_t{8}, size_t{16}}) {
      for (const size_t pad : {size_t{0}, size_t{5}}) {
        std::uniform_int_distribution<size_t> extra(0, 9);
        const size_t row = size_t(w) * pixel, src_stride = row + pad * extra(rng);
        File src(src_stride * size_t(h - 1) + row);
        ::glimpse::testing::FillRandomBytes(src.data(), src.size(), rng);
        File packed(row * size_t(h));
        for (int y = 0; y < h; ++y) {
          std::memcpy(&packed[size_t(y) * row], &src[size_t(y) * src_stride], row);
        }
        for (int o = 1; o <= 8; ++o) {
          SCOPED_TRACE(::testing::Message()
                       << w << "x" << h << ", " << pixel << "-byte pixels, orientation " << o
                       << ", source rows " << src_stride << " apart");
          ImageDesc shown;
          // The reference sees each pixel as `pixel` one-byte channels.
          const std::vector<uint8_t> want = ::glimpse::testing::TurnedAsExifSays(
              packed, ImageDesc{w, h, int(pixel), SampleType::kUint8}, o, &shown);
          const size_t out_row = size_t(shown.width) * pixel,
                       dst_stride = out_row + pad * extra(rng);
          File dst(dst_stride * size_t(shown.height - 1) + out_row);
          ::glimpse::testing::FillRandomBytes(dst.data(), dst.size(), rng);
          const File before = dst;
          Reorient(o, src.data(), w, h, pixel, src_stride, dst.data(), dst_stride);
          bool rows_equal = true, gaps_kept = true;
          for (int y = 0; y < shown.height; ++y) {
            const uint8_t* got = &dst[size_t(y) * dst_stride];
            rows_equal = rows_equal && std::memcmp(got, &want[size_t(y) * out_row], out_row) == 0;
            if (y + 1 < shown.height) {
              gaps_kept =
                  gaps_kept && std::memcmp(got + out_row, &before[size_t(y) * dst_stride + out_row],
                                           dst_stride - out_row) == 0;
            }
          }
          EXPECT_TRUE(rows_equal);
          EXPECT_TRUE(gaps_kept);
        }
      }
    }
  }
}

// EXIF that cannot be read, or gives no orientation in 1-8, or is not where decoders look for it,
// leaves the image as stored, as viewers and OpenCV leave it; the file is no less decoded.
TEST(DecodeTest, ExifWithoutAUsableOrientationLeavesTheImageAsStored) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const int w = 9, h = 5;
  const std::vector<uint8_t> px = PhotoLike(w, h, 3, rng);
  const File jpeg = TjCompress(px, w, h, TJPF_RGB, TJSAMP_444, 90, 0);
  File cut = ExifBlock(6, true);
  cut.resize(20);  // the IFD's entries cut short
  File far = ExifBlock(6, false);
  far[7] = 200;  // the first IFD past the block's end
  File endless = ExifBlock(6, true);
  endless[8] = endless[9] = 0xFF;  // 65535 entries, of which only the first is there
  endless.resize(22);
  File odd = ExifBlock(6, true);
  odd[0] = odd[1] = 'X';  // no byte order
  File magic = ExifBlock(6, true);
  magic[2] = 43;
  File xmp = {'h', 't', 't', 'p', ':', '/', '/', 'n', 's', '.', 'a', 'd', 'o', 'b', 'e', 0};
  const File bad = ExifBlock(6, true);
  xmp.insert(xmp.end(), bad.begin(), bad.end());
  const std::pair<std::string, File> files[] = {
      {"orientation 0", JpegWith(jpeg, ExifPayload(ExifBlock(0, true)))},
      {"orientation 9", JpegWith(jpeg, ExifPayload(ExifBlock(9, false)))},
      {"orientation 65542 as a LONG", JpegWith(jpeg, ExifPayload(ExifBlock(65542, true, 4)))},
      {"a RATIONAL", JpegWith(jpeg, ExifPayload(ExifBlock(6, true, 5)))},
      {"two values", JpegWith(jpeg, ExifPayload(ExifBlock(6, true, 3, 2)))},
      {"entries cut short", JpegWith(jpeg, ExifPayload(cut))},
      {"IFD past the end", JpegWith(jpeg, ExifPayload(far))},
      {"more entries than bytes", JpegWith(jpeg, ExifPayload(endless))},
      {"no byte order", JpegWith(jpeg, ExifPayload(odd))},
      {"not TIFF", JpegWith(jpeg, ExifPayload(magic))},
      {"empty EXIF", JpegWith(jpeg, ExifPayload({}))},
      {"an APP1 that is not EXIF", JpegWith(jpeg, xmp)},
  };
  for (const auto& [name, file] : files) {
    SCOPED_TRACE(name);
    absl::StatusOr<Probed> probed = Probe(file, "image");
    ASSERT_TRUE(probed.ok()) << probed.status();
    EXPECT_EQ(probed->orientation, 1);
    ASSERT_NO_FATAL_FAILURE(
        ExpectDecodes(file, 0, {w, h, 3, SampleType::kUint8}, TjDecompress(jpeg, w, h, TJPF_RGB)));
  }
  // An eXIf chunk after the image data is not read (libpng, and OpenCV with it, stop at IDAT).
  const PngImage img = RandomPng(w, h, 0, 8, false, false, rng);
  const File png = WritePng(img, rng);
  const File late = WithChunk(png, ChunkAt(png, "IEND", 0), "eXIf", ExifBlock(6, true));
  absl::StatusOr<gpu::HostImage> plain = DecodeEncoded(png, 0, kMaxPixels, "image");
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_NO_FATAL_FAILURE(ExpectDecodes(late, 0, plain->desc, plain->data));
}

// 16-bit PNM samples are big-endian: converted to other channel counts by stb_image's rules on
// their values, where stb_image alone would convert the bytes as they lie. For a GPU, a 16-bit PPM
// decodes into four-channel rows as other RGB files do (a GPU server refused every 16-bit PPM
// while the conversion was refused: it asks for four channels).
TEST(DecodeTest, SixteenBitPnmConvertsChannelsOnItsValues) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const int w = 23, h = 9;
  gpu::DeviceLimits gpu_device;
  gpu_device.plain_uploads = true;
  for (int from : {1, 3}) {
    std::vector<uint16_t> samples(size_t(w) * h * size_t(from));
    for (uint16_t& v : samples) v = uint16_t(rng());
    const std::string head = std::string(from == 1 ? "P5\n" : "P6\n") + std::to_string(w) + " " +
                             std::to_string(h) + "\n65535\n";
    File file(head.begin(), head.end());
    for (uint16_t v : samples) {
      file.push_back(uint8_t(v >> 8));
      file.push_back(uint8_t(v));
    }
    for (int channels = 0; channels <= 4; ++channels) {
      SCOPED_TRACE(::testing::Message() << from << "-channel PNM as " << channels << " channels");
      const int to = channels == 0 ? from : channels;
      std::vector<uint16_t> want;
      for (size_t p = 0; p < size_t(w) * h; ++p) {
        const uint16_t* s = &samples[p * size_t(from)];
        const uint16_t r = s[0], g = s[from == 1 ? 0 : 1], b = s[from == 1 ? 0 : 2];
        const uint16_t y = from == 1 ? r : uint16_t((77u * r + 150u * g + 29u * b) >> 8);
        const std::vector<uint16_t> pixel[4] = {{y}, {y, 65535}, {r, g, b}, {r, g, b, 65535}};
        want.insert(want.end(), pixel[to - 1].begin(), pixel[to - 1].end());
      }
      absl::StatusOr<gpu::HostImage> got = DecodeEncoded(file, channels, kMaxPixels, "image");
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->desc, (ImageDesc{w, h, to, SampleType::kUint16}));
      ASSERT_EQ(got->data.size(), want.size() * 2);
      std::vector<uint16_t> values(want.size());
      std::memcpy(values.data(), got->data.data(), got->data.size());  // samples little-endian
      EXPECT_EQ(values, want);
      absl::StatusOr<DecodedImage> for_gpu =
          DecodeEncodedFor(gpu_device, file, channels, kMaxPixels, "image");
      ASSERT_TRUE(for_gpu.ok()) << for_gpu.status();
      EXPECT_TRUE((to == 3 ? gpu::NarrowFromUpload(got->desc, for_gpu->widened)
                           : for_gpu->host.data) == got->data);
    }
  }
}

TEST(DecodeTest, HeadersOverThePixelLimitAreRefusedBeforeDecoding) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  const std::vector<uint8_t> px = PhotoLike(16, 16, 3, rng);
  // JPEG: SOF0 says 60000 x 50000.
  File jpeg = TjCompress(px, 16, 16, TJPF_RGB, TJSAMP_444, 90, 0);
  const uint8_t sof[2] = {0xFF, 0xC0};
  auto at = std::search(jpeg.begin(), jpeg.end(), sof, sof + 2);
  ASSERT_NE(at, jpeg.end());
  const size_t s = size_t(at - jpeg.begin());
  jpeg[s + 5] = 50000 >> 8;
  jpeg[s + 6] = 50000 & 0xFF;
  jpeg[s + 7] = 60000 >> 8;
  jpeg[s + 8] = 60000 & 0xFF;
  ExpectRefused(jpeg, "60000x50000 = 3000000000 pixels", absl::StatusCode::kResourceExhausted);
  ExpectRefused(jpeg, "--max-image-pixels", absl::StatusCode::kResourceExhausted);
  // PNG: IHDR says 100000 x 100000, its CRC left as it was (the size is refused first).
  File png = WritePng(RandomPng(4, 4, 0, 8, false, false, rng), rng);
  for (int i : {16, 20}) {
    png[size_t(i)] = 0;
    png[size_t(i) + 1] = 0x01;
    png[size_t(i) + 2] = 0x86;
    png[size_t(i) + 3] = 0xA0;
  }
  ExpectRefused(png, "100000x100000", absl::StatusCode::kResourceExhausted);
  // WebP (lossless): the VP8L header says 16384 x 16384.
  File webp = WebpEncode(px, 16, 16, 3, true);
  ASSERT_EQ(std::memcmp(&webp[12], "VP8L", 4), 0);
  const uint32_t bits = 16383u | 16383u << 14;
  for (int i = 0; i < 4; ++i) webp[21 + size_t(i)] = uint8_t(bits >> (8 * i));
  ExpectRefused(webp, "16384x16384", absl::StatusCode::kResourceExhausted);
}

// Radiance HDR: w x h pixels of random RGBE bytes, as flat pixels (width < 8) or run-length
// scanlines of literal runs.
File Hdr(int w, int h, std::mt19937_64& rng) {
  const std::string head = "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y " + std::to_string(h) +
                           " +X " + std::to_string(w) + "\n";
  File f(head.begin(), head.end());
  for (int y = 0; y < h; ++y) {
    std::vector<std::array<uint8_t, 4>> row(static_cast<size_t>(w));
    for (auto& px : row) {
      for (uint8_t& b : px) b = uint8_t(rng() % 200 + 1);
    }
    if (w < 8) {
      for (const auto& px : row) f.insert(f.end(), px.begin(), px.end());
      continue;
    }
    f.insert(f.end(), {2, 2, uint8_t(w >> 8), uint8_t(w)});
    for (size_t k = 0; k < 4; ++k) {
      for (size_t x = 0; x < size_t(w);) {
        const size_t n = std::min<size_t>(128, size_t(w) - x);
        f.push_back(uint8_t(n));
        for (size_t i = 0; i < n; ++i) f.push_back(row[x + i][k]);
        x += n;
      }
    }
  }
  return f;
}

TEST(DecodeTest, HdrEqualsStbImageAndCutOrLoopingFilesAreRefused) {
  std::mt19937_64 rng = SeededRng();
  GLIMPSE_SEED_TRACE();
  for (auto [w, h] : {std::array<int, 2>{5, 3}, {9, 4}, {200, 3}}) {
    SCOPED_TRACE(::testing::Message() << w << "x" << h);
    const File file = Hdr(w, h, rng);
    int sw = 0, sh = 0, comp = 0;
    float* ref = stbi_loadf_from_memory(file.data(), int(file.size()), &sw, &sh, &comp, 3);
    ASSERT_NE(ref, nullptr) << stbi_failure_reason();
    const ImageDesc d{w, h, 3, SampleType::kFloat32};
    const std::vector<uint8_t> expected(reinterpret_cast<uint8_t*>(ref),
                                        reinterpret_cast<uint8_t*>(ref) + d.bytes());
    stbi_image_free(ref);
    ExpectDecodes(file, 0, d, expected);
    // stb_image would read the missing pixels from an uninitialized array, or loop forever on
    // the zeros it reads past the end of run-length data.
    for (size_t cut : {file.size() - 1, file.size() - 5, file.size() / 2}) {
      ExpectRefused(File(file.begin(), file.begin() + long(cut)),
                    "image.encoded is a truncated HDR file");
    }
  }
  // A run of length 0 (where a count byte belongs), inside the data: stb_image would loop forever.
  File zero = Hdr(9, 2, rng);
  const size_t first_count = zero.size() - 2 * (4 + 4 * 10) + 4;
  ASSERT_EQ(zero[first_count], 9);
  zero[first_count] = 0;
  ExpectRefused(zero, "image.encoded is a corrupt HDR file: a scanline holds a run of length 0");
}

// stb_image does not notice a TGA file cut short: the missing pixels are zero, never what its
// allocation held before (the fuzz target decodes every file twice and compares; under ASan,
// which fills fresh allocations, this fails without the zeroed buffers).
TEST(DecodeTest, TgaCutShortDecodesWithTheMissingPixelsZero) {
  // Uncompressed grey, 4x2, top-left origin; the second row is missing.
  const File tga = {0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 2, 0, 8, 0x20, 11, 22, 33, 44};
  ExpectDecodes(tga, 0, {4, 2, 1, SampleType::kUint8}, {11, 22, 33, 44, 0, 0, 0, 0});
}

// An 8-bit palette BMP whose palette has 2 entries while its pixels index up to 255: pixels past
// the palette decode as black, the same every time (stb_image alone would read them from
// uninitialized stack memory), and pixels within it as their entries.
TEST(DecodeTest, BmpPixelsPastAShortPaletteAreBlack) {
  const int w = 5, h = 3;
  const uint32_t palette_bytes = 2 * 4, row = 8;  // 5 index bytes padded to 4-byte rows
  const uint32_t offset = 14 + 40 + palette_bytes;
  File f(offset + row * h, 0);
  auto le = [&](size_t at, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) f[at + size_t(i)] = uint8_t(v >> (8 * i));
  };
  f[0] = 'B';
  f[1] = 'M';
  le(2, uint32_t(f.size()), 4);
  le(10, offset, 4);
  le(14, 40, 4);  // BITMAPINFOHEADER
  le(18, w, 4);
  le(22, h, 4);  // positive: rows bottom-up
  le(26, 1, 2);
  le(28, 8, 2);  // bits per pixel
  le(46, 2, 4);  // colours used
  // Entry 0: (R, G, B) = (10, 20, 30); entry 1: (200, 100, 50); stored B, G, R, 0.
  const uint8_t pal[8] = {30, 20, 10, 0, 50, 100, 200, 0};
  std::copy(pal, pal + 8, f.begin() + 54);
  const uint8_t index[3][5] = {{0, 1, 2, 255, 1}, {128, 0, 0, 1, 7}, {1, 1, 3, 0, 254}};
  for (int y = 0; y < h; ++y) {  // file row 0 is the image's bottom row
    for (int x = 0; x < w; ++x) f[offset + row * uint32_t(y) + uint32_t(x)] = index[h - 1 - y][x];
  }
  std::vector<uint8_t> want;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const int i = index[y][x];
      for (int c = 0; c < 3; ++c) want.push_back(i < 2 ? pal[i * 4 + 2 - c] : 0);
    }
  }
  ExpectDecodes(f, 3, {w, h, 3, SampleType::kUint8}, want);

  // A pixel data offset inside the headers leaves a palette of fewer than 0 entries, which
  // stb_image reads as none and colours every pixel from its uninitialized stack: refused.
  // (An offset past 2^31, negative to stb_image, is refused by its header check already.)
  for (uint32_t bad : {0u, 14u + 40u - 4u, 0x80000000u}) {
    SCOPED_TRACE(bad);
    le(10, bad, 4);
    absl::StatusOr<gpu::HostImage> refused = DecodeEncoded(f, 0, kMaxPixels, "image");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    if (bad >= 0x80000000u) continue;
    EXPECT_EQ(refused.status().message(),
              "image is a truncated or corrupt BMP file: its pixel data offset (" +
                  std::to_string(bad) +
                  ") lies inside its 54 bytes of headers, where its palette should follow them");
  }
}

TEST(DecodeTest, AnimatedWebpIsRefused) {
  // RIFF, then a VP8X chunk whose flags say animation, on a 3 x 2 canvas.
  File f = {'R', 'I', 'F', 'F', 22, 0,    0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8',
            'X', 10,  0,   0,   0,  0x02, 0, 0, 0,   2,   0,   0,   1,   0,   0};
  ExpectRefused(f, "image.encoded is an animated WebP file (3x2)");
}

TEST(DecodeTest, FormatsAreNamed) {
  std::mt19937_64 rng = SeededRng();
  const std::vector<uint8_t> px = PhotoLike(5, 3, 3, rng);
  absl::StatusOr<Probed> jpeg = Probe(TjCompress(px, 5, 3, TJPF_RGB, TJSAMP_444, 90, 0), "f");
  absl::StatusOr<Probed> png = Probe(WritePng(RandomPng(5, 3, 2, 8, false, false, rng), rng), "f");
  absl::StatusOr<Probed> webp = Probe(WebpEncode(px, 5, 3, 3, true), "f");
  ASSERT_TRUE(jpeg.ok() && png.ok() && webp.ok());
  EXPECT_EQ(ImageFormatName(jpeg->format), "JPEG");
  EXPECT_EQ(ImageFormatName(png->format), "PNG");
  EXPECT_EQ(ImageFormatName(webp->format), "WebP");
  absl::StatusOr<Probed> pgm = Probe(Bytes(std::string("P5 2 1 255\n\x01\x02")), "f");
  ASSERT_TRUE(pgm.ok());
  EXPECT_EQ(ImageFormatName(pgm->format), "PNM");
}

// Common formats the server does not read are refused as what they are, by their signatures.
TEST(DecodeTest, FormatsTheServerDoesNotReadAreNamed) {
  using std::string_literals::operator""s;
  const std::pair<std::string, std::string> files[] = {
      {"II*\0\x08\0\0\0"s, "TIFF"},
      {"MM\0*\0\0\0\x08"s, "TIFF"},
      {"\0\0\0\x1c"s + "ftypavif\0\0\0\0"s, "AVIF"},
      {"\0\0\0\x18"s + "ftypheic\0\0\0\0"s, "HEIF"},
      {"\0\0\0\x0cjP  \r\n\x87\n\0\0"s, "JPEG 2000"},
      {"\xff\x4f\xff\x51\0\x2f"s, "JPEG 2000"},
      {"\xff\x0a\xfa\x7f"s, "JPEG XL"},
      {"v/1\x01\x02\0\0\0"s, "OpenEXR"},
  };
  for (const auto& [bytes, name] : files) {
    SCOPED_TRACE(name);
    absl::StatusOr<Probed> p = Probe(Bytes(bytes), "image.encoded.data");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().message(),
              "image.encoded.data (" + std::to_string(bytes.size()) + " bytes) is a " + name +
                  " file, a format the server does not read (formats: JPEG, PNG, WebP, BMP, GIF, "
                  "TGA, PSD, HDR, PNM)");
  }
}

}  // namespace
}  // namespace glimpse::server::ingest
