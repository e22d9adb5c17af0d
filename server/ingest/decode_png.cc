// Decoding PNG with libspng (server/ingest/decode.h dispatches here by the file's signature).
#include <spng.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/str.h"
#include "server/ingest/decoders.h"

namespace glimpse::server::ingest {

namespace {

// stb_image's limit on a side, kept: larger sides are refused from the header.
constexpr uint32_t kMaxPngSide = uint32_t{1} << 24;
// Memory libspng may spend on the ancillary chunks (text, profiles) it keeps, zTXt inflated
// included, and the longest of them (it may be no more than the whole).
constexpr size_t kPngChunkCache = size_t{16} << 20;
constexpr size_t kPngMaxChunk = kPngChunkCache;

// A PNG file's chunks up to IEND, each of whose stated length must lie within the file: the
// length of a chunk cut short is named, before libspng reads it.
absl::Status CheckPngChunkLengths(std::span<const uint8_t> f, std::string_view field) {
  for (size_t at = 8; f.size() >= at + 8;) {
    const uint64_t length = uint64_t{f[at]} << 24 | uint64_t{f[at + 1]} << 16 |
                            uint64_t{f[at + 2]} << 8 | uint64_t{f[at + 3]};
    if (f.size() - at < 12 || length > f.size() - at - 12) {
      return absl::InvalidArgumentError(
          StrCat(field, " is a truncated or corrupt PNG file: a chunk at byte ", at, " states ",
                 length, " bytes of data, past the file's end (", f.size(), " bytes)"));
    }
    if (std::memcmp(&f[at + 4], "IEND", 4) == 0) break;
    at += 12 + size_t(length);
  }
  return absl::OkStatus();
}

using SpngContext = std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)>;

// A decoder over `file`; `check_crc` false reads chunks whatever their CRC (for the header only:
// a header edited to claim a huge size is then refused by the size, as it says).
absl::StatusOr<SpngContext> NewSpng(std::span<const uint8_t> file, bool check_crc,
                                    std::string_view field) {
  SpngContext ctx(spng_ctx_new(0), &spng_ctx_free);
  if (ctx == nullptr) return absl::ResourceExhaustedError("libspng could not make a decoder");
  int ret = spng_set_image_limits(ctx.get(), kMaxPngSide, kMaxPngSide);
  if (ret == 0) ret = spng_set_chunk_limits(ctx.get(), kPngMaxChunk, kPngChunkCache);
  if (ret == 0 && !check_crc) ret = spng_set_crc_action(ctx.get(), SPNG_CRC_USE, SPNG_CRC_USE);
  if (ret == 0) ret = spng_set_png_buffer(ctx.get(), file.data(), file.size());
  if (ret != 0) return Corrupt(field, ImageFormat::kPng, spng_strerror(ret));
  return ctx;
}

}  // namespace

absl::StatusOr<Probed> ProbePng(std::span<const uint8_t> file, std::string_view field) {
  if (absl::Status s = CheckPngChunkLengths(file, field); !s.ok()) return s;
  absl::StatusOr<SpngContext> ctx = NewSpng(file, /*check_crc=*/false, field);
  if (!ctx.ok()) return ctx.status();
  spng_ihdr ihdr{};
  if (int ret = spng_get_ihdr(ctx->get(), &ihdr); ret != 0) {
    if (ret == SPNG_EUSER_WIDTH || ret == SPNG_EUSER_HEIGHT) {
      const size_t at = ret == SPNG_EUSER_WIDTH ? 16 : 20;  // IHDR's width, height
      const uint32_t side = uint32_t{file[at]} << 24 | uint32_t{file[at + 1]} << 16 |
                            uint32_t{file[at + 2]} << 8 | uint32_t{file[at + 3]};
      return absl::InvalidArgumentError(StrCat(field, " is a PNG file whose header's ",
                                               at == 16 ? "width" : "height", " is ", side,
                                               ", over the largest side decoded, ", kMaxPngSide));
    }
    return Corrupt(field, ImageFormat::kPng, spng_strerror(ret));
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
      if (ret != 0 && ret != SPNG_ECHUNKAVAIL) {
        return Corrupt(field, ImageFormat::kPng, spng_strerror(ret));
      }
      channels = ret == 0 ? 4 : 3;
      break;
    }
    default:
      return Corrupt(field, ImageFormat::kPng, StrCat("colour type ", int{ihdr.color_type}));
  }
  return Probed{ImageFormat::kPng,
                {int(ihdr.width), int(ihdr.height), channels,
                 ihdr.bit_depth == 16 ? gpu::SampleType::kUint16 : gpu::SampleType::kUint8}};
}

absl::Status DecodePng(std::span<const uint8_t> file, const Probed& probed, int channels,
                       std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  absl::StatusOr<SpngContext> made = NewSpng(file, /*check_crc=*/true, field);
  if (!made.ok()) return made.status();
  spng_ctx* ctx = made->get();
  spng_ihdr ihdr{};
  if (int ret = spng_get_ihdr(ctx, &ihdr); ret != 0) {
    return Corrupt(field, ImageFormat::kPng, spng_strerror(ret));
  }
  if (int(ihdr.width) != probed.desc.width || int(ihdr.height) != probed.desc.height) {
    return absl::InvalidArgumentError(StrCat(field, " changed between its probe and its decode"));
  }
  // libspng's RGB(A) forms, tRNS applied, then stb_image's conversions: 16-bit files stay 16-bit.
  // 8-bit grey asked as grey decodes straight to G8: the same samples as through RGBA8 and back,
  // without the four-times-larger row and its conversion. (libspng 0.7.3 refuses GA8 for grey +
  // alpha files, so those still take RGBA8.)
  const gpu::SampleType type = probed.desc.type;
  const bool sixteen = type == gpu::SampleType::kUint16;
  const bool grey8 = !sixteen && ihdr.bit_depth == 8 && channels == 1 &&
                     ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE;
  const int from = grey8 ? 1 : !sixteen && channels == 3 ? 3 : 4;
  const int format = grey8       ? SPNG_FMT_G8
                     : sixteen   ? SPNG_FMT_RGBA16
                     : from == 3 ? SPNG_FMT_RGB8
                                 : SPNG_FMT_RGBA8;
  const size_t width = ihdr.width;
  const size_t decoded_row = width * size_t(from) * (sixteen ? 2 : 1);
  const bool direct = from == channels;
  const bool interlaced = ihdr.interlace_method != SPNG_INTERLACE_NONE;
  int ret = spng_decode_image(ctx, nullptr, 0, format,
                              (grey8 ? 0 : SPNG_DECODE_TRNS) | SPNG_DECODE_PROGRESSIVE);
  if (ret != 0) return Corrupt(field, ImageFormat::kPng, spng_strerror(ret));
  // Adam7 passes write every row several times: converted once all are in.
  std::vector<uint8_t> decoded(direct ? 0 : decoded_row * (interlaced ? ihdr.height : 1));
  for (;;) {
    spng_row_info row{};
    if ((ret = spng_get_row_info(ctx, &row)) != 0) break;
    uint8_t* to = direct ? out.data() + size_t(row.row_num) * row_stride
                         : decoded.data() + (interlaced ? row.row_num * decoded_row : 0);
    ret = spng_decode_row(ctx, to, decoded_row);
    if (!direct && !interlaced && (ret == 0 || ret == SPNG_EOI)) {
      ConvertRow(type, to, from, out.data() + size_t(row.row_num) * row_stride, channels, width);
    }
    if (ret != 0) break;
  }
  // The chunks after the image data, to IEND: the last IDAT's CRC is checked there.
  if (ret == SPNG_EOI) ret = spng_decode_chunks(ctx);
  if (ret != 0) return Corrupt(field, ImageFormat::kPng, spng_strerror(ret));
  if (!direct && interlaced) {
    for (size_t y = 0; y < ihdr.height; ++y) {
      ConvertRow(type, &decoded[y * decoded_row], from, out.data() + y * row_stride, channels,
                 width);
    }
  }
  return absl::OkStatus();
}

}  // namespace glimpse::server::ingest
