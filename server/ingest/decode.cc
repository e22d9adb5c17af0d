#include "server/ingest/decode.h"

#include <spng.h>
#include <turbojpeg.h>
#include <webp/decode.h>

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

// Functions private to this file: the client or a test may bring its own stb copy. JPEG and PNG
// are left out of it: libjpeg-turbo and libspng own them, so no such file reaches stb_image.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_JPEG
#define STBI_NO_PNG
#define STBI_NO_PIC
// Zeroed buffers: stb_image 2.27 does not notice pixel data cut short in BMP, TGA or PSD files and
// leaves the missing pixels as its allocation had them, which would hand one call's freed memory
// to another caller; they read as zeros instead. (PNM and HDR files so cut are refused.)
#define STBI_MALLOC(size) std::calloc(1, size)
#define STBI_REALLOC(pointer, size) std::realloc(pointer, size)
#define STBI_FREE(pointer) std::free(pointer)
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

constexpr std::string_view kFormats = "JPEG, PNG, WebP, BMP, GIF, TGA, PSD, HDR, PNM";

absl::Status Corrupt(std::string_view field, ImageFormat format, std::string_view reason) {
  return absl::InvalidArgumentError(
      StrCat(field, " is a truncated or corrupt ", ImageFormatName(format), " file: ", reason));
}

bool StartsWith(std::span<const uint8_t> f, std::string_view prefix) {
  return f.size() >= prefix.size() && std::memcmp(f.data(), prefix.data(), prefix.size()) == 0;
}

// Where a JPEG file's SOI marker starts: like stb_image and the JPEG spec's markers, SOI may
// follow any number of 0xFF fill bytes, which libjpeg-turbo does not skip. npos if none.
size_t JpegStart(std::span<const uint8_t> f) {
  size_t i = 0;
  while (i < f.size() && f[i] == 0xFF) ++i;
  return i > 0 && i < f.size() && f[i] == 0xD8 ? i - 1 : std::string_view::npos;
}

// The format a file's signature names; a file cut inside the signature of PNG or WebP is still
// theirs, so that it is refused as truncated.
std::optional<ImageFormat> Sniff(std::span<const uint8_t> f) {
  constexpr std::string_view kPng("\x89PNG\r\n\x1a\n", 8);
  if (JpegStart(f) != std::string_view::npos) return ImageFormat::kJpeg;
  if (f.size() >= 4 && StartsWith(f, kPng.substr(0, std::min<size_t>(f.size(), kPng.size())))) {
    return ImageFormat::kPng;
  }
  if (StartsWith(f, "RIFF") && (f.size() < 12 || std::memcmp(f.data() + 8, "WEBP", 4) == 0)) {
    return ImageFormat::kWebp;
  }
  if (StartsWith(f, "GIF8")) return ImageFormat::kGif;
  if (StartsWith(f, "BM")) return ImageFormat::kBmp;
  if (StartsWith(f, "8BPS")) return ImageFormat::kPsd;
  if (StartsWith(f, "#?RADIANCE\n") || StartsWith(f, "#?RGBE\n")) return ImageFormat::kHdr;
  if (StartsWith(f, "P5") || StartsWith(f, "P6")) return ImageFormat::kPnm;
  return std::nullopt;
}

size_t RowBytes(const gpu::ImageDesc& desc, int channels) {
  return size_t(desc.width) * size_t(channels) * size_t(gpu::BytesPerSample(desc.type));
}

// stb_image's luma, (77 R + 150 G + 29 B) >> 8, for 8- and 16-bit samples alike.
template <typename T>
T Luma(T r, T g, T b) {
  return T((uint32_t{r} * 77 + uint32_t{g} * 150 + uint32_t{b} * 29) >> 8);
}

// `count` pixels of `from` channels to `to` channels by stb_image's rules: grey is replicated,
// colour becomes luma, a missing alpha is opaque, an unwanted one is dropped.
template <typename T>
void ConvertPixels(const uint8_t* src, int from, uint8_t* dst, int to, size_t count) {
  constexpr T kOpaque = std::numeric_limits<T>::max();
  for (size_t i = 0; i < count; ++i) {
    T s[4];
    std::memcpy(s, src + i * size_t(from) * sizeof(T), size_t(from) * sizeof(T));
    const bool grey = from <= 2;
    const T r = s[0], g = grey ? s[0] : s[1], b = grey ? s[0] : s[2];
    const T a = from == 2 ? s[1] : from == 4 ? s[3] : kOpaque;
    const T y = grey ? s[0] : Luma(r, g, b);
    const T d[4][4] = {{y}, {y, a}, {r, g, b}, {r, g, b, a}};
    std::memcpy(dst + i * size_t(to) * sizeof(T), d[to - 1], size_t(to) * sizeof(T));
  }
}

void ConvertRow(gpu::SampleType type, const uint8_t* src, int from, uint8_t* dst, int to,
                size_t count) {
  if (type == gpu::SampleType::kUint16) {
    ConvertPixels<uint16_t>(src, from, dst, to, count);
  } else {
    ConvertPixels<uint8_t>(src, from, dst, to, count);
  }
}

// ---- JPEG: libjpeg-turbo's TurboJPEG ---------------------------------------------------------

// One decompressor per thread: making one allocates libjpeg's state, which a call should not pay.
class TurboJpegDecompressor {
 public:
  TurboJpegDecompressor() : handle_(tjInitDecompress()) {}
  ~TurboJpegDecompressor() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  TurboJpegDecompressor(const TurboJpegDecompressor&) = delete;
  TurboJpegDecompressor& operator=(const TurboJpegDecompressor&) = delete;
  tjhandle get() const { return handle_; }

 private:
  tjhandle handle_;
};

absl::StatusOr<tjhandle> ThreadDecompressor() {
  thread_local TurboJpegDecompressor decompressor;
  if (decompressor.get() == nullptr) {
    return absl::InternalError(
        StrCat("TurboJPEG could not make a decompressor: ", tjGetErrorStr2(nullptr)));
  }
  return decompressor.get();
}

struct JpegHeader {
  int width = 0, height = 0, colorspace = 0;
};

absl::StatusOr<JpegHeader> ReadJpegHeader(tjhandle tj, std::span<const uint8_t> jpeg,
                                          std::string_view field) {
  JpegHeader h;
  int subsampling = 0;
  if (tjDecompressHeader3(tj, jpeg.data(), jpeg.size(), &h.width, &h.height, &subsampling,
                          &h.colorspace) != 0) {
    return Corrupt(field, ImageFormat::kJpeg, tjGetErrorStr2(tj));
  }
  // Data that ends before the frame header reads as tables only, without an error.
  if (h.width <= 0 || h.height <= 0) {
    return Corrupt(field, ImageFormat::kJpeg, "the data ends before the frame header (SOF)");
  }
  return h;
}

absl::StatusOr<Probed> ProbeJpeg(std::span<const uint8_t> file, std::string_view field) {
  absl::StatusOr<tjhandle> tj = ThreadDecompressor();
  if (!tj.ok()) return tj.status();
  absl::StatusOr<JpegHeader> h = ReadJpegHeader(*tj, file.subspan(JpegStart(file)), field);
  if (!h.ok()) return h.status();
  // CMYK and YCCK files decode to RGB, as stb_image did.
  return Probed{ImageFormat::kJpeg,
                {h->width, h->height, h->colorspace == TJCS_GRAY ? 1 : 3, gpu::SampleType::kUint8}};
}

// stb_image's x * y / 255, rounded, for Adobe's inverted CMYK.
uint8_t Blinn(uint8_t x, uint8_t y) {
  const unsigned t = unsigned{x} * y + 128;
  return uint8_t((t + (t >> 8)) >> 8);
}

absl::Status DecodeJpeg(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  absl::StatusOr<tjhandle> tj = ThreadDecompressor();
  if (!tj.ok()) return tj.status();
  const std::span<const uint8_t> jpeg = file.subspan(JpegStart(file));
  absl::StatusOr<JpegHeader> h = ReadJpegHeader(*tj, jpeg, field);
  if (!h.ok()) return h.status();
  if (h->width != probed.desc.width || h->height != probed.desc.height) {
    return absl::InvalidArgumentError(StrCat(field, " changed between its probe and its decode"));
  }
  const int w = h->width, rows = h->height;
  // Warnings (data cut short, a bad Huffman code) stop the decode: their pixels would be made up.
  // One kind is let through, as libjpeg-turbo and OpenCV let it through: stray bytes between
  // segments ("N extraneous bytes before marker 0xXX"), which cameras and editors write and which
  // leave every pixel intact. The decode then runs again without stopping, and passes when that
  // is still its only complaint. LIMITSCANS refuses progressive files of more than 500 scans, a
  // CPU bomb.
  int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
  auto failed = [&] { return Corrupt(field, ImageFormat::kJpeg, tjGetErrorStr2(*tj)); };
  auto decode = [&](uint8_t* dst, int pitch, int pixel_format) {
    if (tjDecompress2(*tj, jpeg.data(), jpeg.size(), dst, w, pitch, rows, pixel_format, flags) ==
        0) {
      return true;
    }
    auto stray_bytes_only = [&] {
      return tjGetErrorCode(*tj) == TJERR_WARNING &&
             std::string_view(tjGetErrorStr2(*tj)).find("extraneous bytes before marker") !=
                 std::string_view::npos;
    };
    if (!stray_bytes_only()) return false;
    flags &= ~TJFLAG_STOPONWARNING;
    return tjDecompress2(*tj, jpeg.data(), jpeg.size(), dst, w, pitch, rows, pixel_format, flags) ==
               0 ||
           stray_bytes_only();
  };
  if (h->colorspace == TJCS_CMYK || h->colorspace == TJCS_YCCK) {
    // libjpeg-turbo makes no RGB of these: CMYK (YCCK converted), then stb_image's conversion.
    std::vector<uint8_t> cmyk(size_t(w) * size_t(rows) * 4);
    if (!decode(cmyk.data(), 0, TJPF_CMYK)) return failed();
    std::vector<uint8_t> rgb(size_t(w) * 3);
    for (int y = 0; y < rows; ++y) {
      const uint8_t* p = &cmyk[size_t(y) * size_t(w) * 4];
      for (size_t x = 0; x < size_t(w); ++x, p += 4) {
        for (int c = 0; c < 3; ++c) rgb[x * 3 + size_t(c)] = Blinn(p[c], p[3]);
      }
      ConvertRow(gpu::SampleType::kUint8, rgb.data(), 3, out.data() + size_t(y) * row_stride,
                 channels, size_t(w));
    }
    return absl::OkStatus();
  }
  // 4 channels: RGBA, whose alpha libjpeg-turbo sets to 0xFF. 2: grey, then made grey + alpha.
  const int format = channels <= 2 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBA;
  if (!decode(out.data(), int(row_stride), format)) return failed();
  if (channels == 2) {
    for (int y = 0; y < rows; ++y) {
      uint8_t* row = out.data() + size_t(y) * row_stride;
      for (size_t x = size_t(w); x-- > 0;) {  // from the end: each pixel moves right
        row[2 * x] = row[x];
        row[2 * x + 1] = 0xFF;
      }
    }
  }
  return absl::OkStatus();
}

// ---- PNG: libspng ----------------------------------------------------------------------------

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
  const gpu::SampleType type = probed.desc.type;
  const bool sixteen = type == gpu::SampleType::kUint16;
  const int from = !sixteen && channels == 3 ? 3 : 4;
  const int format = sixteen ? SPNG_FMT_RGBA16 : from == 3 ? SPNG_FMT_RGB8 : SPNG_FMT_RGBA8;
  const size_t width = ihdr.width;
  const size_t decoded_row = width * size_t(from) * (sixteen ? 2 : 1);
  const bool direct = from == channels;
  const bool interlaced = ihdr.interlace_method != SPNG_INTERLACE_NONE;
  int ret = spng_decode_image(ctx, nullptr, 0, format, SPNG_DECODE_TRNS | SPNG_DECODE_PROGRESSIVE);
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

// ---- WebP: libwebp ---------------------------------------------------------------------------

std::string_view Vp8StatusName(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_OK:
      return "OK";
    case VP8_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
      return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
      return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
      return "suspended";
    case VP8_STATUS_USER_ABORT:
      return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return "not enough data (the file is cut short)";
  }
  return "unknown error";
}

absl::StatusOr<Probed> ProbeWebp(std::span<const uint8_t> file, std::string_view field) {
  WebPBitstreamFeatures features{};
  if (VP8StatusCode s = WebPGetFeatures(file.data(), file.size(), &features); s != VP8_STATUS_OK) {
    return Corrupt(field, ImageFormat::kWebp, Vp8StatusName(s));
  }
  if (features.has_animation) {
    return absl::InvalidArgumentError(
        StrCat(field, " is an animated WebP file (", features.width, "x", features.height,
               "); only still WebP images are decoded: send one frame"));
  }
  return Probed{
      ImageFormat::kWebp,
      {features.width, features.height, features.has_alpha ? 4 : 3, gpu::SampleType::kUint8}};
}

absl::Status DecodeWebp(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) {
    return absl::InternalError("libwebp's decoder does not match the headers it was built with");
  }
  // RGB or RGBA straight into `out`; grey (+ alpha) by way of RGB (RGBA) rows.
  const int from = channels == 1 || channels == 3 ? 3 : 4;
  const size_t width = size_t(probed.desc.width), height = size_t(probed.desc.height);
  const bool direct = from == channels;
  std::vector<uint8_t> decoded(direct ? 0 : width * height * size_t(from));
  config.output.colorspace = from == 3 ? MODE_RGB : MODE_RGBA;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = direct ? out.data() : decoded.data();
  config.output.u.RGBA.stride = direct ? int(row_stride) : int(width) * from;
  config.output.u.RGBA.size = direct ? out.size() : decoded.size();
  const VP8StatusCode s = WebPDecode(file.data(), file.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (s != VP8_STATUS_OK) return Corrupt(field, ImageFormat::kWebp, Vp8StatusName(s));
  if (config.output.width != probed.desc.width || config.output.height != probed.desc.height) {
    return absl::InvalidArgumentError(StrCat(field, " changed between its probe and its decode"));
  }
  if (!direct) {
    for (size_t y = 0; y < height; ++y) {
      ConvertRow(gpu::SampleType::kUint8, &decoded[y * width * size_t(from)], from,
                 out.data() + y * row_stride, channels, width);
    }
  }
  return absl::OkStatus();
}

// ---- BMP, GIF, TGA, PSD, HDR, PNM: stb_image -------------------------------------------------

// The header of a binary PNM file (P5 grey, P6 RGB), read byte by byte as stb_image 2.27 reads it
// (stbi__pnm_info): a number missing where one belongs reads as 0, and the samples start after
// the character that ends the last number, whatever it is.
struct PnmHeader {
  // The digits stb_image reads as width, height and maxval, as written ("" for 0).
  std::array<std::string_view, 3> numbers;
  // Where the samples start, or 0 for a file that is not a binary PNM. stb_image 2.27 neither
  // notices truncated samples (it leaves the missing ones uninitialized) nor swaps 16-bit samples
  // from their big-endian order, and converts their channels as if they were 8-bit: DecodeStb
  // makes up for all three with this.
  size_t data_offset = 0;
};

PnmHeader ReadPnmHeader(std::span<const uint8_t> f) {
  PnmHeader h;
  if (f.size() < 2 || f[0] != 'P' || (f[1] != '5' && f[1] != '6')) return h;
  size_t pos = 2;  // of the next byte to read; stb_image reads 0 past the end
  auto at_end = [&] { return pos >= f.size(); };
  auto next = [&] { return pos < f.size() ? char(f[pos++]) : '\0'; };
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  char c = next();
  for (std::string_view& number : h.numbers) {
    for (;;) {  // whitespace and comments
      while (!at_end() && space(c)) c = next();
      if (at_end() || c != '#') break;
      while (!at_end() && c != '\n' && c != '\r') c = next();
    }
    const size_t start = pos - 1;  // c's position, when c is a digit
    size_t digits = 0;
    while (!at_end() && c >= '0' && c <= '9') {
      ++digits;
      c = next();
    }
    number = std::string_view(reinterpret_cast<const char*>(f.data()) + start, digits);
  }
  h.data_offset = pos;
  return h;
}

// stb_image parses the header's numbers into an int without a bound (signed overflow, undefined
// behaviour, on 10 digits and more): numbers past INT_MAX are refused before stb_image sees them.
absl::Status CheckPnmNumbers(const PnmHeader& h, std::string_view field) {
  constexpr std::array<std::string_view, 3> kNames = {"width", "height", "maxval"};
  for (size_t n = 0; n < h.numbers.size(); ++n) {
    std::string_view digits = h.numbers[n];
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    const std::string_view int_max = "2147483647";
    if (digits.size() > int_max.size() || (digits.size() == int_max.size() && digits > int_max)) {
      const bool cut = digits.size() > 24;
      return absl::InvalidArgumentError(StrCat(field, " is a PNM file whose header's ", kNames[n],
                                               " is ", digits.substr(0, 24), cut ? "..." : "",
                                               ", over the largest a header may state, ", int_max));
    }
  }
  return absl::OkStatus();
}

// stb_image 2.27 reads a Radiance HDR file's pixels past the end of the data without noticing:
// flat pixels then come from an uninitialized array, and run-length scanlines read zeros, a run of
// length 0, which it loops on forever (as it does on such a run within the data). The pixel data
// is walked as stb_image walks it, and a file that ends too soon or holds such a run is refused;
// what stb_image refuses itself is left to it.
absl::Status CheckHdrData(std::span<const uint8_t> f, const gpu::ImageDesc& desc,
                          std::string_view field) {
  // The header: the identifier line, lines up to an empty one, then the resolution line.
  size_t p = 0;
  auto next_line = [&] {  // the length of the line at p, p moved past its '\n'
    const size_t start = p;
    while (p < f.size() && f[p] != '\n') ++p;
    const size_t length = p - start;
    if (p < f.size()) ++p;
    return length;
  };
  next_line();
  while (p < f.size() && next_line() != 0) {
  }
  next_line();
  const size_t width = size_t(desc.width), pixels = size_t(desc.pixels());
  auto truncated = [&](size_t at) {
    return absl::InvalidArgumentError(
        StrCat(field, " is a truncated HDR file: its ", gpu::DescribeImage(desc),
               " pixels need more data than its ", f.size(), " bytes (from byte ", at, ")"));
  };
  auto flat = [&](size_t from, size_t count) {  // `count` pixels of 4 bytes from `from`
    return f.size() - from < count * 4 ? truncated(from) : absl::OkStatus();
  };
  if (width < 8 || width >= 32768) return flat(p, pixels);
  for (int y = 0; y < desc.height; ++y) {
    if (f.size() - p < 4) return truncated(p);
    if (f[p] != 2 || f[p + 1] != 2 || (f[p + 2] & 0x80) != 0) {
      return flat(p + 4, pixels - 1);  // stb_image starts over as flat pixels, this one first
    }
    if ((size_t{f[p + 2]} << 8 | f[p + 3]) != width) return absl::OkStatus();
    p += 4;
    for (int k = 0; k < 4; ++k) {
      for (size_t x = 0; x < width;) {
        if (p >= f.size()) return truncated(p);
        size_t count = f[p++];
        if (count > 128) {
          count -= 128;
          if (p >= f.size()) return truncated(p);
          ++p;
        } else if (count == 0) {
          return absl::InvalidArgumentError(StrCat(
              field, " is a corrupt HDR file: a scanline holds a run of length 0 at byte ", p - 1));
        } else {
          if (count <= width - x && f.size() - p < count) return truncated(p);
          p += count;
        }
        if (count > width - x) return absl::OkStatus();
        x += count;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Probed> ProbeStb(std::span<const uint8_t> file, std::optional<ImageFormat> sniffed,
                                std::string_view field) {
  if (absl::Status s = CheckPnmNumbers(ReadPnmHeader(file), field); !s.ok()) return s;
  const auto* data = reinterpret_cast<const stbi_uc*>(file.data());
  const int len = int(file.size());
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp)) {
    if (sniffed) return Corrupt(field, *sniffed, stbi_failure_reason());
    return absl::InvalidArgumentError(StrCat(field, " (", file.size(),
                                             " bytes) is not an image file that can be read "
                                             "(formats: ",
                                             kFormats, "): ", stbi_failure_reason()));
  }
  Probed probed{sniffed.value_or(ImageFormat::kTga), {w, h, comp, gpu::SampleType::kUint8}};
  if (stbi_is_hdr_from_memory(data, len)) {
    probed.desc.type = gpu::SampleType::kFloat32;
  } else if (stbi_is_16_bit_from_memory(data, len)) {
    probed.desc.type = gpu::SampleType::kUint16;
  }
  return probed;
}

// A copy of a palette BMP whose palette holds fewer entries than its pixels can index, with the
// palette padded to 2^bpp entries of zeros (black), or nullopt where none is needed. stb_image
// 2.27 keeps the palette in a stack array of 256 entries that it fills only up to the file's
// count, so a pixel indexing past it would read whatever the stack held (another request's data,
// and a different image each time). The count is computed as stb_image computes it.
std::optional<std::vector<uint8_t>> BmpForStb(std::span<const uint8_t> f) {
  if (f.size() < 30 || f[0] != 'B' || f[1] != 'M') return std::nullopt;
  auto le32 = [&](size_t at) {
    return uint32_t{f[at]} | uint32_t{f[at + 1]} << 8 | uint32_t{f[at + 2]} << 16 |
           uint32_t{f[at + 3]} << 24;
  };
  const uint32_t offset = le32(10), hsz = le32(14);
  if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124) return std::nullopt;
  const size_t bpp_at = hsz == 12 ? 24 : 28;
  const int bpp = f[bpp_at] | f[bpp_at + 1] << 8;
  if (bpp != 1 && bpp != 4 && bpp != 8) return std::nullopt;
  const int64_t entry = hsz == 12 ? 3 : 4;
  const int64_t psize = hsz == 12 ? (int64_t{offset} - 14 - 24) / 3
                                  : (int64_t{offset} - 14 - int64_t{hsz}) >> 2;
  const int64_t needed = int64_t{1} << bpp;
  // stb_image refuses 0 or more than 256 entries itself.
  if (psize <= 0 || psize >= needed || psize > 256) return std::nullopt;
  const size_t pad = size_t((needed - psize) * entry);
  const size_t at = std::min(f.size(), size_t(14 + int64_t{hsz} + psize * entry));
  std::vector<uint8_t> out(f.begin(), f.begin() + ptrdiff_t(at));
  out.insert(out.end(), pad, 0);
  out.insert(out.end(), f.begin() + ptrdiff_t(at), f.end());
  const uint32_t new_offset = offset + uint32_t(pad);
  for (int i = 0; i < 4; ++i) out[size_t(10 + i)] = uint8_t(new_offset >> (8 * i));
  return out;
}

absl::Status DecodeStb(std::span<const uint8_t> file, const Probed& probed, int channels,
                       std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  const gpu::ImageDesc& desc = probed.desc;
  const size_t pnm = ReadPnmHeader(file).data_offset;
  if (pnm != 0) {
    const size_t needed =
        size_t(desc.pixels()) * size_t(desc.channels) * size_t(gpu::BytesPerSample(desc.type));
    if (file.size() < pnm || file.size() - pnm < needed) {
      return absl::InvalidArgumentError(StrCat(
          field, " is a truncated PNM file: its header (", gpu::DescribeImage(desc), ") needs ",
          needed, " bytes of samples, it has ", file.size() < pnm ? 0 : file.size() - pnm));
    }
    if (desc.type == gpu::SampleType::kUint16 && channels != desc.channels) {
      return absl::InvalidArgumentError(StrCat("desired_channels ", channels,
                                               " cannot be applied to a 16-bit PNM file (",
                                               desc.channels, " channels); send 0 to keep them"));
    }
  }
  if (probed.format == ImageFormat::kHdr) {
    if (absl::Status s = CheckHdrData(file, desc, field); !s.ok()) return s;
  }
  const std::optional<std::vector<uint8_t>> bmp =
      probed.format == ImageFormat::kBmp ? BmpForStb(file) : std::nullopt;
  const std::span<const uint8_t> bytes = bmp ? std::span<const uint8_t>(*bmp) : file;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = int(std::min<size_t>(bytes.size(), INT_MAX));
  int w = 0, h = 0, comp = 0;
  void* pixels = nullptr;
  switch (desc.type) {
    case gpu::SampleType::kFloat32:
      pixels = stbi_loadf_from_memory(data, len, &w, &h, &comp, channels);
      break;
    case gpu::SampleType::kUint16:
      pixels = stbi_load_16_from_memory(data, len, &w, &h, &comp, channels);
      break;
    case gpu::SampleType::kUint8:
      pixels = stbi_load_from_memory(data, len, &w, &h, &comp, channels);
      break;
  }
  if (pixels == nullptr) return Corrupt(field, probed.format, stbi_failure_reason());
  const std::unique_ptr<void, decltype(&stbi_image_free)> owned(pixels, &stbi_image_free);
  if (w != desc.width || h != desc.height) {
    return absl::InvalidArgumentError(StrCat(field, " decoded to ", w, "x", h,
                                             ", which disagrees with its header's ", desc.width,
                                             "x", desc.height));
  }
  const size_t row = RowBytes(desc, channels);
  const bool swap = pnm != 0 && desc.type == gpu::SampleType::kUint16;
  for (size_t y = 0; y < size_t(h); ++y) {
    uint8_t* to = out.data() + y * row_stride;
    std::memcpy(to, static_cast<const uint8_t*>(pixels) + y * row, row);
    // PNM samples are big-endian; stb_image leaves them so.
    if (swap) {
      for (size_t i = 0; i + 1 < row; i += 2) std::swap(to[i], to[i + 1]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kBmp:
      return "BMP";
    case ImageFormat::kGif:
      return "GIF";
    case ImageFormat::kTga:
      return "TGA";
    case ImageFormat::kPsd:
      return "PSD";
    case ImageFormat::kHdr:
      return "HDR";
    case ImageFormat::kPnm:
      return "PNM";
  }
  return "unknown";
}

absl::StatusOr<Probed> Probe(std::span<const uint8_t> file, std::string_view field) {
  if (file.empty()) {
    return absl::InvalidArgumentError(StrCat(field, " is empty: no image file was sent"));
  }
  if (file.size() > size_t(INT_MAX)) {
    return absl::InvalidArgumentError(
        StrCat(field, " is ", file.size(), " bytes; encoded files must be under 2 GiB"));
  }
  const std::optional<ImageFormat> sniffed = Sniff(file);
  absl::StatusOr<Probed> probed;
  switch (sniffed.value_or(ImageFormat::kTga)) {
    case ImageFormat::kJpeg:
      probed = ProbeJpeg(file, field);
      break;
    case ImageFormat::kPng:
      probed = ProbePng(file, field);
      break;
    case ImageFormat::kWebp:
      probed = ProbeWebp(file, field);
      break;
    default:
      probed = ProbeStb(file, sniffed, field);
      break;
  }
  if (!probed.ok()) return probed;
  const gpu::ImageDesc& d = probed->desc;
  if (d.width <= 0 || d.height <= 0) {
    return absl::InvalidArgumentError(StrCat(field, " is a ", ImageFormatName(probed->format),
                                             " file of zero size (", d.width, "x", d.height, ")"));
  }
  return probed;
}

absl::Status DecodeInto(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  if (channels < 1 || channels > 4) {
    return absl::InvalidArgumentError(StrCat("channels must be in [1, 4], got ", channels));
  }
  const gpu::ImageDesc& d = probed.desc;
  const size_t row = RowBytes(d, channels);
  if (d.width <= 0 || d.height <= 0 || row_stride < row || row_stride > size_t(INT_MAX) ||
      out.size() / row_stride < size_t(d.height) - 1 ||
      out.size() - row_stride * (size_t(d.height) - 1) < row) {
    return absl::InvalidArgumentError(StrCat(
        "decoding ", gpu::DescribeImage(d), " as ", channels, " channels needs rows of ", row,
        " bytes at most 2^31 - 1 apart; got ", out.size(), " bytes, rows ", row_stride, " apart"));
  }
  switch (probed.format) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(file, probed, channels, out, row_stride, field);
    case ImageFormat::kPng:
      return DecodePng(file, probed, channels, out, row_stride, field);
    case ImageFormat::kWebp:
      return DecodeWebp(file, probed, channels, out, row_stride, field);
    default:
      return DecodeStb(file, probed, channels, out, row_stride, field);
  }
}

}  // namespace glimpse::server::ingest
