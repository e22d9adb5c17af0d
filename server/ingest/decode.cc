#include "server/ingest/decode.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/str.h"
#include "gpu/image.h"
#include "server/host_memory.h"
#include "server/ingest/decoders.h"

namespace glimpse::server::ingest {
namespace {

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

// stb_image's luma, (77 R + 150 G + 29 B) >> 8, for 8- and 16-bit samples alike.
template <typename T>
T Luma(T r, T g, T b) {
  return T((uint32_t{r} * 77 + uint32_t{g} * 150 + uint32_t{b} * 29) >> 8);
}

// `count` pixels of `From` channels to `To` channels by stb_image's rules: grey is replicated,
// colour becomes luma, a missing alpha is opaque, an unwanted one is dropped. The channel counts
// are template arguments so that each pixel's copies are fixed-size moves, not calls to memcpy
// (with run-time sizes, two such calls per pixel made a 1080p RGB PNG's conversion to four
// channels cost more than its decode).
template <typename T, int From, int To>
void ConvertPixels(const uint8_t* src, uint8_t* dst, size_t count) {
  constexpr T kOpaque = std::numeric_limits<T>::max();
  constexpr bool kGrey = From <= 2;
  for (size_t i = 0; i < count; ++i, src += From * sizeof(T), dst += To * sizeof(T)) {
    T s[4];
    std::memcpy(s, src, From * sizeof(T));
    const T r = s[0], g = kGrey ? s[0] : s[1], b = kGrey ? s[0] : s[2];
    const T a = From == 2 ? s[1] : From == 4 ? s[3] : kOpaque;
    const T y = kGrey ? s[0] : Luma(r, g, b);
    const T d[4][4] = {{y}, {y, a}, {r, g, b}, {r, g, b, a}};
    std::memcpy(dst, d[To - 1], To * sizeof(T));
  }
}

// 3 -> 4 channels, the conversion GPUs ask of every colour photo without alpha: a word per pixel.
template <typename T>
void AddOpaqueAlpha(const uint8_t* src, uint8_t* dst, size_t count) {
  gpu::WidenPixels(sizeof(T) == 1 ? gpu::SampleType::kUint8 : gpu::SampleType::kUint16, src, count,
                   dst, /*opaque=*/true);
}

template <typename T>
void ConvertPixels(const uint8_t* src, int from, uint8_t* dst, int to, size_t count) {
  // Every (from, to) pair, each its own instance: 1-4 channels to 1-4.
  using Fn = void (*)(const uint8_t*, uint8_t*, size_t);
  static constexpr Fn kFns[4][4] = {
      {&ConvertPixels<T, 1, 1>, &ConvertPixels<T, 1, 2>, &ConvertPixels<T, 1, 3>,
       &ConvertPixels<T, 1, 4>},
      {&ConvertPixels<T, 2, 1>, &ConvertPixels<T, 2, 2>, &ConvertPixels<T, 2, 3>,
       &ConvertPixels<T, 2, 4>},
      {&ConvertPixels<T, 3, 1>, &ConvertPixels<T, 3, 2>, &ConvertPixels<T, 3, 3>,
       &AddOpaqueAlpha<T>},
      {&ConvertPixels<T, 4, 1>, &ConvertPixels<T, 4, 2>, &ConvertPixels<T, 4, 3>,
       &ConvertPixels<T, 4, 4>},
  };
  kFns[from - 1][to - 1](src, dst, count);
}

// The file's pixels in the order it stores them (`probed` then describes them so).
absl::Status DecodeStored(std::span<const uint8_t> file, const Probed& probed, int channels,
                          std::span<uint8_t> out, size_t row_stride, std::string_view field) {
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

}  // namespace

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

size_t RowBytes(const gpu::ImageDesc& desc, int channels) {
  return size_t(desc.width) * size_t(channels) * size_t(gpu::BytesPerSample(desc.type));
}

void ConvertRow(gpu::SampleType type, const uint8_t* src, int from, uint8_t* dst, int to,
                size_t count) {
  if (type == gpu::SampleType::kUint16) {
    ConvertPixels<uint16_t>(src, from, dst, to, count);
  } else {
    ConvertPixels<uint8_t>(src, from, dst, to, count);
  }
}

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

absl::StatusOr<Probed> Probe(std::span<const uint8_t> file, std::string_view field,
                             Orientation orientation) {
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
  if (orientation == Orientation::kFromFile) {
    probed->orientation = ExifOrientation(FindExif(file, probed->format));
    if (probed->orientation >= 5) std::swap(probed->desc.width, probed->desc.height);
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
  if (probed.orientation != 1) {
    // Decoded as stored, then turned into `out`.
    Probed stored = probed;
    stored.orientation = 1;
    if (probed.orientation >= 5) std::swap(stored.desc.width, stored.desc.height);
    const size_t stored_row = RowBytes(stored.desc, channels);
    const ScratchBlock pixels(stored_row * size_t(stored.desc.height));
    if (absl::Status s = DecodeStored(file, stored, channels,
                                      std::span(pixels.data(), pixels.size()), stored_row, field);
        !s.ok()) {
      return s;
    }
    Reorient(probed.orientation, pixels.data(), stored.desc.width, stored.desc.height,
             stored_row / size_t(stored.desc.width), stored_row, out.data(), row_stride);
    return absl::OkStatus();
  }
  return DecodeStored(file, probed, channels, out, row_stride, field);
}

}  // namespace glimpse::server::ingest
