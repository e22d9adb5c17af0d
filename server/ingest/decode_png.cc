// Decoding PNG (server/ingest/decode.h dispatches here by the file's signature). The header probe
// is libspng's; the decode is this file's own: the chunks walked with every CRC checked, the image
// data inflated whole by libdeflate into one buffer of the size the header implies (the output
// size is known, so no streaming inflate is needed), the rows unfiltered in place, then expanded
// to the probed format straight into the caller's rows. Pixels are libspng's with SPNG_DECODE_TRNS
// (a tRNS colour key gives alpha 0, palettes expand with their tRNS alpha, low-depth grey scales to
// 8 bits), 16-bit samples in host order, then ConvertRow for other channel counts.
#include <libdeflate.h>
#include <spng.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/str.h"
#include "server/ingest/decoders.h"

namespace glimpse::server::ingest {

namespace {

// stb_image's limit on a side, kept: larger sides are refused from the header.
constexpr uint32_t kMaxPngSide = uint32_t{1} << 24;
// Memory libspng may spend on the ancillary chunks (text, profiles) it keeps while probing, zTXt
// inflated included, and the longest of them (it may be no more than the whole).
constexpr size_t kPngChunkCache = size_t{16} << 20;
constexpr size_t kPngMaxChunk = kPngChunkCache;
// The PNG spec's largest chunk length and side.
constexpr uint32_t kPngMaxLength = 0x7FFFFFFF;

uint32_t Be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

std::string Hex32(uint32_t v) { return fmt::format("{:#010x}", v); }

absl::Status PngCorrupt(std::string_view field, std::string_view reason) {
  return Corrupt(field, ImageFormat::kPng, reason);
}

// A PNG file's chunks up to IEND, each of whose stated length must lie within the file: the
// length of a chunk cut short is named, before libspng reads it.
absl::Status CheckPngChunkLengths(std::span<const uint8_t> f, std::string_view field) {
  for (size_t at = 8; f.size() >= at + 8;) {
    const uint64_t length = Be32(&f[at]);
    if (f.size() - at < 12 || length > f.size() - at - 12) {
      return PngCorrupt(field,
                        StrCat("a chunk at byte ", at, " states ", length,
                               " bytes of data, past the file's end (", f.size(), " bytes)"));
    }
    if (std::memcmp(&f[at + 4], "IEND", 4) == 0) break;
    at += 12 + size_t(length);
  }
  return absl::OkStatus();
}

using SpngContext = std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)>;

// A libspng decoder over `file` for the probe, reading chunks whatever their CRC: a header edited
// to claim a huge size is then refused by the size, as it says. The decode checks every CRC.
absl::StatusOr<SpngContext> NewSpng(std::span<const uint8_t> file, std::string_view field) {
  SpngContext ctx(spng_ctx_new(0), &spng_ctx_free);
  if (ctx == nullptr) return absl::ResourceExhaustedError("libspng could not make a decoder");
  int ret = spng_set_image_limits(ctx.get(), kMaxPngSide, kMaxPngSide);
  if (ret == 0) ret = spng_set_chunk_limits(ctx.get(), kPngMaxChunk, kPngChunkCache);
  if (ret == 0) ret = spng_set_crc_action(ctx.get(), SPNG_CRC_USE, SPNG_CRC_USE);
  if (ret == 0) ret = spng_set_png_buffer(ctx.get(), file.data(), file.size());
  if (ret != 0) return PngCorrupt(field, spng_strerror(ret));
  return ctx;
}

// ---- Chunks ------------------------------------------------------------------------------------

struct PngHeader {
  uint32_t width = 0, height = 0;
  int depth = 0, color_type = 0;
  bool interlaced = false;

  // Samples per pixel in the file (a palette index is one).
  int Samples() const {
    constexpr int kSamples[7] = {1, 0, 3, 1, 2, 0, 4};
    return kSamples[color_type];
  }
  // The filters' "bytes per pixel": 1 for depths under 8.
  size_t FilterBpp() const { return std::max(1, Samples() * depth / 8); }
  // Bytes of a scanline of `pixels` pixels, without its filter byte.
  size_t ScanlineBytes(size_t pixels) const {
    return (pixels * size_t(Samples()) * size_t(depth) + 7) / 8;
  }
};

struct PngChunks {
  PngHeader header;
  std::span<const uint8_t> plte, trns;
  std::vector<std::span<const uint8_t>> idat;  // in file order
};

absl::StatusOr<PngHeader> ParseIhdr(std::span<const uint8_t> d, std::string_view field) {
  if (d.size() != 13) {
    return PngCorrupt(field, StrCat("its IHDR chunk is ", d.size(), " bytes; IHDR is 13"));
  }
  PngHeader h{Be32(&d[0]), Be32(&d[4]), d[8], d[9], d[12] == 1};
  const int t = h.color_type, b = h.depth;
  const bool depth_ok = t == 0   ? b == 1 || b == 2 || b == 4 || b == 8 || b == 16
                        : t == 3 ? b == 1 || b == 2 || b == 4 || b == 8
                                 : (t == 2 || t == 4 || t == 6) && (b == 8 || b == 16);
  if (h.width == 0 || h.width > kPngMaxLength || h.height == 0 || h.height > kPngMaxLength) {
    return PngCorrupt(field, StrCat("its header's size ", h.width, "x", h.height,
                                    " is not in [1, 2^31 - 1] on each side"));
  }
  if (!depth_ok) {
    return PngCorrupt(field, StrCat("its header's colour type ", t, " with bit depth ", b,
                                    " is not one the PNG spec allows"));
  }
  if (d[10] != 0 || d[11] != 0 || d[12] > 1) {
    return PngCorrupt(
        field, StrCat("its header's compression, filter and interlace methods are ", int{d[10]},
                      ", ", int{d[11]}, ", ", int{d[12]}, "; PNG defines 0, 0 and 0 or 1"));
  }
  return h;
}

// Checks one chunk's length against the file's end and its CRC; `at` is where it starts.
absl::Status CheckChunk(std::span<const uint8_t> f, size_t at, std::string_view field) {
  if (f.size() == at) {
    return PngCorrupt(field, StrCat("the file ends at byte ", at, " with no IEND chunk"));
  }
  if (f.size() - at < 12) {
    return PngCorrupt(field, StrCat("the file ends at byte ", f.size(),
                                    ", inside the chunk at byte ", at, " (no IEND chunk)"));
  }
  const uint32_t length = Be32(&f[at]);
  if (length > kPngMaxLength || length > f.size() - at - 12) {
    return PngCorrupt(field, StrCat("a chunk at byte ", at, " states ", length,
                                    " bytes of data, past the file's end (", f.size(), " bytes)"));
  }
  for (int i = 4; i < 8; ++i) {
    const uint8_t c = f[at + size_t(i)] & 0xDF;  // letters only, either case
    if (c < 'A' || c > 'Z') {
      return PngCorrupt(field,
                        StrCat("the chunk at byte ", at, " has a type that is not 4 letters"));
    }
  }
  const uint32_t stated = Be32(&f[at + 8 + length]);
  const uint32_t crc = uint32_t(libdeflate_crc32(0, &f[at + 4], 4 + size_t(length)));
  if (stated != crc) {
    return PngCorrupt(
        field,
        StrCat("the CRC of its ", std::string_view(reinterpret_cast<const char*>(&f[at + 4]), 4),
               " chunk at byte ", at, " is ", Hex32(stated), ", its contents' is ", Hex32(crc)));
  }
  return absl::OkStatus();
}

// Walks the chunks from IHDR to IEND: unknown ancillary chunks are skipped, unknown critical ones
// refused, IDATs must be consecutive; bytes after IEND are ignored.
absl::StatusOr<PngChunks> ReadChunks(std::span<const uint8_t> f, std::string_view field) {
  constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  if (!StartsWith(f, kSignature)) return PngCorrupt(field, "its 8-byte signature is cut short");
  PngChunks chunks;
  bool ihdr = false, idat_done = false;
  for (size_t at = 8;;) {
    if (absl::Status s = CheckChunk(f, at, field); !s.ok()) return s;
    const std::string_view type(reinterpret_cast<const char*>(&f[at + 4]), 4);
    const std::span<const uint8_t> data = f.subspan(at + 8, Be32(&f[at]));
    if (!ihdr && type != "IHDR") {
      return PngCorrupt(field, StrCat("its first chunk is ", type, ", not IHDR"));
    }
    const bool after_idat = !chunks.idat.empty();
    if (type == "IHDR") {
      if (ihdr) return PngCorrupt(field, StrCat("a second IHDR chunk at byte ", at));
      absl::StatusOr<PngHeader> h = ParseIhdr(data, field);
      if (!h.ok()) return h.status();
      chunks.header = *h;
      ihdr = true;
    } else if (type == "PLTE" || type == "tRNS") {
      std::span<const uint8_t>& kept = type == "PLTE" ? chunks.plte : chunks.trns;
      if (after_idat)
        return PngCorrupt(field, StrCat("a ", type, " chunk at byte ", at, " after IDAT"));
      if (kept.data() != nullptr) {
        return PngCorrupt(field, StrCat("a second ", type, " chunk at byte ", at));
      }
      kept = data;
    } else if (type == "IDAT") {
      if (idat_done) {
        return PngCorrupt(
            field, StrCat("an IDAT chunk at byte ", at, " after other chunks followed IDAT"));
      }
      chunks.idat.push_back(data);
    } else if (type == "IEND") {
      if (chunks.idat.empty()) return PngCorrupt(field, "it has no IDAT chunk (no image data)");
      return chunks;
    } else if ((f[at + 4] & 0x20) == 0) {
      return PngCorrupt(field, StrCat("its chunk ", type, " at byte ", at,
                                      " is critical and not one PNG defines"));
    }
    idat_done = after_idat && type != "IDAT";
    at += 12 + data.size();
  }
}

// The palette and transparency as RGBA entries (libspng's: entries past the palette, which an
// index may name, are opaque black), or the tRNS colour key of a grey or RGB file.
struct Transparency {
  std::array<std::array<uint8_t, 4>, 256> palette{};
  bool palette_alpha = false;  // a tRNS chunk came with the palette: RGBA, as the probe said
  bool keyed = false;
  std::array<uint16_t, 3> key{};
};

absl::StatusOr<Transparency> ReadTransparency(const PngChunks& c, std::string_view field) {
  Transparency t;
  const int type = c.header.color_type;
  const size_t entries = c.plte.size() / 3;
  if (type == 3) {
    if (c.plte.empty()) return PngCorrupt(field, "it has no PLTE chunk; colour type 3 needs one");
    if (c.plte.size() % 3 != 0 || entries > (size_t{1} << c.header.depth)) {
      return PngCorrupt(field, StrCat("its PLTE chunk is ", c.plte.size(), " bytes; a ",
                                      c.header.depth, "-bit palette has 1 to ",
                                      size_t{1} << c.header.depth, " entries of 3 bytes"));
    }
    for (auto& e : t.palette) e[3] = 255;
    for (size_t i = 0; i < entries; ++i) std::memcpy(t.palette[i].data(), &c.plte[3 * i], 3);
    if (c.trns.size() > entries) {
      return PngCorrupt(field,
                        StrCat("its tRNS chunk has ", c.trns.size(),
                               " alpha values, more than the palette's ", entries, " entries"));
    }
    for (size_t i = 0; i < c.trns.size(); ++i) t.palette[i][3] = c.trns[i];
    t.palette_alpha = c.trns.data() != nullptr;
  } else if (c.trns.data() != nullptr && (type == 0 || type == 2)) {
    const size_t need = type == 0 ? 2 : 6;
    if (c.trns.size() != need) {
      return PngCorrupt(field, StrCat("its tRNS chunk is ", c.trns.size(), " bytes; colour type ",
                                      type, "'s is ", need));
    }
    t.keyed = true;
    for (size_t i = 0; i < need / 2; ++i)
      t.key[i] = uint16_t(c.trns[2 * i] << 8 | c.trns[2 * i + 1]);
  }
  return t;
}

// ---- Image data --------------------------------------------------------------------------------

// The pixels (x0 + i dx, y0 + j dy) of one Adam7 pass, or of the whole image.
struct Pass {
  size_t x0, y0, dx, dy, width, height;
};

std::vector<Pass> Passes(const PngHeader& h) {
  if (!h.interlaced) return {{0, 0, 1, 1, h.width, h.height}};
  constexpr size_t kAdam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                   {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  std::vector<Pass> passes;
  for (const auto& p : kAdam7) {
    const size_t w = (h.width + p[2] - 1 - p[0]) / p[2], hh = (h.height + p[3] - 1 - p[1]) / p[3];
    if (w > 0 && hh > 0) passes.push_back({p[0], p[1], p[2], p[3], w, hh});  // else no scanlines
  }
  return passes;
}

// Inflates the zlib stream `z` into exactly `out`, checking its Adler-32.
absl::Status Inflate(std::span<const uint8_t> z, std::span<uint8_t> out, std::string_view field) {
  if (z.size() < 2 || (z[0] & 0x0F) != 8 || z[0] >> 4 > 7 || (z[0] << 8 | z[1]) % 31 != 0 ||
      (z[1] & 0x20) != 0) {
    return PngCorrupt(field,
                      "its image data does not start with a zlib header (deflate, a window "
                      "of at most 32 KiB, no preset dictionary)");
  }
  using Inflater =
      std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)>;
  Inflater d(libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (d == nullptr) return absl::ResourceExhaustedError("libdeflate could not make a decompressor");
  size_t used = 0, made = 0;
  switch (libdeflate_deflate_decompress_ex(d.get(), &z[2], z.size() - 2, out.data(), out.size(),
                                           &used, &made)) {
    case LIBDEFLATE_SUCCESS:
      break;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
      return PngCorrupt(field, StrCat("its image data inflates to more than ", out.size(),
                                      " bytes, the header needs ", out.size()));
    default:
      return PngCorrupt(field, "its image data's deflate stream is corrupt or cut short");
  }
  if (made != out.size()) {
    return PngCorrupt(field, StrCat("its image data inflates to ", made,
                                    " bytes, the header needs ", out.size()));
  }
  if (z.size() - 2 - used < 4) {
    return PngCorrupt(field, "its image data ends before the zlib stream's Adler-32 checksum");
  }
  const uint32_t stated = Be32(&z[2 + used]);
  const uint32_t adler = uint32_t(libdeflate_adler32(1, out.data(), out.size()));
  if (stated != adler) {
    return PngCorrupt(field, StrCat("its image data's Adler-32 checksum is ", Hex32(stated),
                                    ", the inflated data's is ", Hex32(adler)));
  }
  return absl::OkStatus();
}

// Paeth's predictor, branch-free: the one of a, b, c nearest to a + b - c, ties to a, then b.
inline uint8_t Paeth(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
  const int least = std::min(pa, std::min(pb, pc));
  return uint8_t(pa == least ? a : pb == least ? b : c);
}

// Reverses filter `filter` (1-4) on a scanline of `n` bytes; `prior` is the unfiltered scanline
// above, nullptr on a pass's first (where it is all zero). kBpp as a constant lets the compiler
// unroll the pixel and vectorise Up.
template <size_t kBpp>
void Unfilter(uint8_t filter, uint8_t* cur, const uint8_t* prior, size_t n) {
  if (prior == nullptr && filter != 3) filter = filter == 4 ? 1 : filter == 2 ? 0 : filter;
  switch (filter) {
    case 1:
      for (size_t i = kBpp; i < n; ++i) cur[i] = uint8_t(cur[i] + cur[i - kBpp]);
      break;
    case 2:
      for (size_t i = 0; i < n; ++i) cur[i] = uint8_t(cur[i] + prior[i]);
      break;
    case 3:
      if (prior == nullptr) {
        for (size_t i = kBpp; i < n; ++i) cur[i] = uint8_t(cur[i] + (cur[i - kBpp] >> 1));
        break;
      }
      for (size_t i = 0; i < kBpp; ++i) cur[i] = uint8_t(cur[i] + (prior[i] >> 1));
      for (size_t i = kBpp; i < n; ++i)
        cur[i] = uint8_t(cur[i] + ((cur[i - kBpp] + prior[i]) >> 1));
      break;
    case 4:
      for (size_t i = 0; i < kBpp; ++i) cur[i] = uint8_t(cur[i] + prior[i]);
      for (size_t i = kBpp; i < n; ++i) {
        cur[i] = uint8_t(cur[i] + Paeth(cur[i - kBpp], prior[i], prior[i - kBpp]));
      }
      break;
    default:
      break;
  }
}

using UnfilterFn = void (*)(uint8_t, uint8_t*, const uint8_t*, size_t);

UnfilterFn UnfilterFor(size_t bpp) {
  switch (bpp) {
    case 1:
      return &Unfilter<1>;
    case 2:
      return &Unfilter<2>;
    case 3:
      return &Unfilter<3>;
    case 4:
      return &Unfilter<4>;
    case 6:
      return &Unfilter<6>;
    default:
      return &Unfilter<8>;
  }
}

// ---- Pixels ------------------------------------------------------------------------------------

// Unfiltered scanlines -> pixels of `Channels()` samples (8- or 16-bit, host order): grey, grey +
// alpha, RGB or RGBA, alpha added by a tRNS colour key or a palette's tRNS.
class Expander {
 public:
  Expander(const PngHeader& h, const Transparency& t) : h_(h), t_(t) {
    channels_ = h.color_type == 3 ? (t.palette_alpha ? 4 : 3) : h.Samples() + (t.keyed ? 1 : 0);
  }
  int Channels() const { return channels_; }
  size_t PixelBytes() const { return size_t(channels_) * (h_.depth == 16 ? 2 : 1); }

  // `count` pixels of the scanline `raw` to `dst`.
  void Row(const uint8_t* raw, size_t count, uint8_t* dst) const {
    const size_t n = size_t(h_.Samples());
    if (h_.depth == 16) {
      // Big-endian samples to host order; rows a stride apart may leave them unaligned.
      for (size_t i = 0; i < count; ++i, raw += 2 * n) {
        bool key = t_.keyed;
        for (size_t c = 0; c < n; ++c, dst += 2) {
          const uint16_t v = uint16_t(raw[2 * c] << 8 | raw[2 * c + 1]);
          key = key && v == t_.key[c];
          std::memcpy(dst, &v, 2);
        }
        if (t_.keyed) {
          const uint16_t a = key ? 0 : 0xFFFF;
          std::memcpy(dst, &a, 2);
          dst += 2;
        }
      }
    } else if (h_.color_type == 3) {
      const size_t bytes = size_t(channels_);
      for (size_t i = 0; i < count; ++i)
        std::memcpy(dst + i * bytes, t_.palette[Sample(raw, i)].data(), bytes);
    } else if (h_.depth == 8 && !t_.keyed) {
      std::memcpy(dst, raw, count * n);
    } else {
      // 8-bit with a colour key, or grey under 8 bits (scaled: 1-bit * 255, 2-bit * 85, 4-bit *
      // 17).
      const int scale = 255 / ((1 << h_.depth) - 1);
      for (size_t i = 0; i < count; ++i) {
        bool key = t_.keyed;
        for (size_t c = 0; c < n; ++c) {
          const int v = h_.depth == 8 ? raw[i * n + c] : Sample(raw, i);
          key = key && v == t_.key[c];
          *dst++ = uint8_t(v * scale);
        }
        if (t_.keyed) *dst++ = key ? 0 : 255;
      }
    }
  }

 private:
  // Sample i of a scanline of one-sample pixels of depth <= 8.
  int Sample(const uint8_t* raw, size_t i) const {
    const size_t bit = i * size_t(h_.depth);
    return raw[bit >> 3] >> (8 - h_.depth - int(bit & 7)) & ((1 << h_.depth) - 1);
  }

  const PngHeader& h_;
  const Transparency& t_;
  int channels_ = 0;
};

}  // namespace

absl::StatusOr<Probed> ProbePng(std::span<const uint8_t> file, std::string_view field) {
  constexpr size_t kIhdrEnd = 8 + 12 + 13;  // the signature, then IHDR's chunk
  if (file.size() < kIhdrEnd) {
    return PngCorrupt(field, StrCat("the file ends at byte ", file.size(),
                                    ", before the end of its IHDR chunk (byte ", kIhdrEnd, ")"));
  }
  if (absl::Status s = CheckPngChunkLengths(file, field); !s.ok()) return s;
  absl::StatusOr<SpngContext> ctx = NewSpng(file, field);
  if (!ctx.ok()) return ctx.status();
  spng_ihdr ihdr{};
  if (int ret = spng_get_ihdr(ctx->get(), &ihdr); ret != 0) {
    if (ret == SPNG_EUSER_WIDTH || ret == SPNG_EUSER_HEIGHT) {
      const size_t at = ret == SPNG_EUSER_WIDTH ? 16 : 20;  // IHDR's width, height
      return absl::InvalidArgumentError(
          StrCat(field, " is a PNG file whose header's ", at == 16 ? "width" : "height", " is ",
                 Be32(&file[at]), ", over the largest side decoded, ", kMaxPngSide));
    }
    return PngCorrupt(field, spng_strerror(ret));
  }
  // The channels stb_image reported: a palette's are RGB, RGBA if a tRNS chunk gives alpha.
  int channels = 0;
  switch (ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE:
      channels = 1;
      break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
      channels = 2;
      break;
    case SPNG_COLOR_TYPE_TRUECOLOR:
      channels = 3;
      break;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
      channels = 4;
      break;
    case SPNG_COLOR_TYPE_INDEXED: {
      spng_trns trns{};
      const int ret = spng_get_trns(ctx->get(), &trns);
      if (ret != 0 && ret != SPNG_ECHUNKAVAIL) return PngCorrupt(field, spng_strerror(ret));
      channels = ret == 0 ? 4 : 3;
      break;
    }
    default:
      return PngCorrupt(field, StrCat("colour type ", int{ihdr.color_type}));
  }
  return Probed{ImageFormat::kPng,
                {int(ihdr.width), int(ihdr.height), channels,
                 ihdr.bit_depth == 16 ? gpu::SampleType::kUint16 : gpu::SampleType::kUint8}};
}

absl::Status DecodePng(std::span<const uint8_t> file, const Probed& probed, int channels,
                       std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  absl::StatusOr<PngChunks> chunks = ReadChunks(file, field);
  if (!chunks.ok()) return chunks.status();
  const PngHeader& h = chunks->header;
  absl::StatusOr<Transparency> transparency = ReadTransparency(*chunks, field);
  if (!transparency.ok()) return transparency.status();
  const Expander expand(h, *transparency);
  if (int64_t{h.width} != probed.desc.width || int64_t{h.height} != probed.desc.height ||
      (h.depth == 16) != (probed.desc.type == gpu::SampleType::kUint16)) {
    return absl::InvalidArgumentError(StrCat(field, " changed between its probe and its decode"));
  }
  // The filtered image: each pass's scanlines, each after its filter-type byte.
  const std::vector<Pass> passes = Passes(h);
  size_t filtered_size = 0;
  for (const Pass& p : passes) filtered_size += p.height * (1 + h.ScanlineBytes(p.width));
  // One IDAT is inflated where it lies; several are gathered first.
  std::span<const uint8_t> z = chunks->idat[0];
  std::unique_ptr<uint8_t[]> gathered;
  if (chunks->idat.size() > 1) {
    size_t total = 0;
    for (const auto& idat : chunks->idat) total += idat.size();
    gathered = std::make_unique_for_overwrite<uint8_t[]>(total);
    size_t at = 0;
    for (const auto& idat : chunks->idat) {
      if (!idat.empty()) std::memcpy(&gathered[at], idat.data(), idat.size());
      at += idat.size();
    }
    z = {gathered.get(), total};
  }
  auto filtered = std::make_unique_for_overwrite<uint8_t[]>(filtered_size);
  if (absl::Status s = Inflate(z, {filtered.get(), filtered_size}, field); !s.ok()) return s;
  gathered.reset();

  const gpu::SampleType type = probed.desc.type;
  const size_t sample_bytes = h.depth == 16 ? 2 : 1, pixel_out = size_t(channels) * sample_bytes;
  const bool direct = !h.interlaced && expand.Channels() == channels;
  // One row of the file's expanded pixels, where they are converted or scattered.
  std::vector<uint8_t> row(direct ? 0 : size_t(h.width) * expand.PixelBytes());
  const UnfilterFn unfilter = UnfilterFor(h.FilterBpp());
  uint8_t* line = filtered.get();
  for (size_t k = 0; k < passes.size(); ++k) {
    const Pass& p = passes[k];
    const size_t bytes = h.ScanlineBytes(p.width);
    const uint8_t* prior = nullptr;
    for (size_t j = 0; j < p.height; ++j, prior = line + 1, line += 1 + bytes) {
      if (line[0] > 4) {
        return PngCorrupt(field,
                          StrCat("scanline ", j, h.interlaced ? StrCat(" of pass ", k + 1) : "",
                                 " has filter type ", int{line[0]}, "; PNG's are 0 to 4"));
      }
      unfilter(line[0], line + 1, prior, bytes);
      uint8_t* dst = out.data() + (p.y0 + j * p.dy) * row_stride;
      if (direct) {
        expand.Row(line + 1, p.width, dst);
        continue;
      }
      expand.Row(line + 1, p.width, row.data());
      if (p.dx == 1) {
        ConvertRow(type, row.data(), expand.Channels(), dst, channels, p.width);
        continue;
      }
      for (size_t i = 0; i < p.width; ++i) {
        ConvertRow(type, &row[i * expand.PixelBytes()], expand.Channels(),
                   dst + (p.x0 + i * p.dx) * pixel_out, channels, 1);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace glimpse::server::ingest
