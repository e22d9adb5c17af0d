// Decoding BMP, GIF, TGA, PSD, HDR and PNM with stb_image (server/ingest/decode.h dispatches here
// by the file's signature).
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

// Functions private to this file: the client or a test may bring its own stb copy. JPEG and PNG
// are left out of it: libjpeg-turbo and server/ingest/decode_png.cc own them, so no such file
// reaches stb_image.
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

// The name of a common image format this server does not read, by its signature, or empty: so
// that such a file is refused as what it is rather than as an unknown file.
std::string_view UnreadFormat(std::span<const uint8_t> f) {
  auto at = [&](size_t offset, std::string_view sig) {
    return f.size() >= offset + sig.size() &&
           std::memcmp(f.data() + offset, sig.data(), sig.size()) == 0;
  };
  using std::string_view_literals::operator""sv;
  if (at(0, "II*\0"sv) || at(0, "MM\0*"sv) || at(0, "II+\0"sv) || at(0, "MM\0+"sv)) return "TIFF";
  if (at(4, "ftypavif") || at(4, "ftypavis")) return "AVIF";
  if (at(4, "ftypheic") || at(4, "ftypheix") || at(4, "ftyphevc") || at(4, "ftypmif1") ||
      at(4, "ftypmsf1")) {
    return "HEIF";
  }
  if (at(0, "\0\0\0\x0cjP  \r\n\x87\n"sv) || at(0, "\xff\x4f\xff\x51"sv)) return "JPEG 2000";
  if (at(0, "\0\0\0\x0cJXL \r\n\x87\n"sv) || at(0, "\xff\x0a"sv)) return "JPEG XL";
  if (at(0, "v/1\x01"sv)) return "OpenEXR";
  return {};
}

}  // namespace

absl::StatusOr<Probed> ProbeStb(std::span<const uint8_t> file, std::optional<ImageFormat> sniffed,
                                std::string_view field) {
  if (absl::Status s = CheckPnmNumbers(ReadPnmHeader(file), field); !s.ok()) return s;
  const auto* data = reinterpret_cast<const stbi_uc*>(file.data());
  const int len = int(file.size());
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp)) {
    if (sniffed) return Corrupt(field, *sniffed, stbi_failure_reason());
    if (const std::string_view unread = UnreadFormat(file); !unread.empty()) {
      return absl::InvalidArgumentError(
          StrCat(field, " (", file.size(), " bytes) is a ", unread,
                 " file, a format the server does not read (formats: ", kFormats, ")"));
    }
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

namespace {

// A palette BMP's palette as stb_image 2.27 reads it: the number of entries, computed from the
// pixel data's offset as stb_image computes it (it reads that many), and how many the pixels can
// index (2^bpp). nullopt for a BMP without a palette, or whose header stb_image refuses.
struct BmpPalette {
  uint32_t offset = 0, hsz = 0;
  int64_t entry_bytes = 0, entries = 0, indexed = 0;
};
std::optional<BmpPalette> ReadBmpPalette(std::span<const uint8_t> f) {
  if (f.size() < 30 || f[0] != 'B' || f[1] != 'M') return std::nullopt;
  auto le32 = [&](size_t at) {
    return uint32_t{f[at]} | uint32_t{f[at + 1]} << 8 | uint32_t{f[at + 2]} << 16 |
           uint32_t{f[at + 3]} << 24;
  };
  BmpPalette p;
  p.offset = le32(10);
  p.hsz = le32(14);
  if (p.hsz != 12 && p.hsz != 40 && p.hsz != 56 && p.hsz != 108 && p.hsz != 124) {
    return std::nullopt;
  }
  const size_t bpp_at = p.hsz == 12 ? 24 : 28;
  const int bpp = f[bpp_at] | f[bpp_at + 1] << 8;
  if (bpp != 1 && bpp != 4 && bpp != 8) return std::nullopt;
  // stb_image's offset is an int.
  const int64_t offset = int32_t(p.offset);
  p.entry_bytes = p.hsz == 12 ? 3 : 4;
  p.entries = p.hsz == 12 ? (offset - 14 - 24) / 3 : (offset - 14 - int64_t{p.hsz}) >> 2;
  p.indexed = int64_t{1} << bpp;
  return p;
}

// stb_image refuses a palette of 0 entries or more than 256 itself, but not a count below 0 (the
// pixel data's offset inside the headers): it then reads no palette and colours every pixel from
// its uninitialized stack array, as for a short palette (BmpForStb).
absl::Status CheckBmpPalette(std::span<const uint8_t> f, std::string_view field) {
  const std::optional<BmpPalette> p = ReadBmpPalette(f);
  if (!p || p->entries >= 0) return absl::OkStatus();
  return Corrupt(field, ImageFormat::kBmp,
                 StrCat("its pixel data offset (", p->offset, ") lies inside its ", p->hsz + 14,
                        " bytes of headers, where its palette should follow them"));
}

// A copy of a palette BMP whose palette holds fewer entries than its pixels can index, with the
// palette padded to 2^bpp entries of zeros (black), or nullopt where none is needed. stb_image
// 2.27 keeps the palette in a stack array of 256 entries that it fills only up to the file's
// count, so a pixel indexing past it would read whatever the stack held (another request's data,
// and a different image each time).
std::optional<std::vector<uint8_t>> BmpForStb(std::span<const uint8_t> f) {
  const std::optional<BmpPalette> p = ReadBmpPalette(f);
  // stb_image refuses 0 or more than 256 entries itself; CheckBmpPalette fewer than 0.
  if (!p || p->entries <= 0 || p->entries >= p->indexed || p->entries > 256) return std::nullopt;
  const size_t pad = size_t((p->indexed - p->entries) * p->entry_bytes);
  const size_t at = std::min(f.size(), size_t(14 + int64_t{p->hsz} + p->entries * p->entry_bytes));
  std::vector<uint8_t> out(f.begin(), f.begin() + ptrdiff_t(at));
  out.insert(out.end(), pad, 0);
  out.insert(out.end(), f.begin() + ptrdiff_t(at), f.end());
  const uint32_t new_offset = p->offset + uint32_t(pad);
  for (int i = 0; i < 4; ++i) out[size_t(10 + i)] = uint8_t(new_offset >> (8 * i));
  return out;
}

}  // namespace

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
  }
  if (probed.format == ImageFormat::kHdr) {
    if (absl::Status s = CheckHdrData(file, desc, field); !s.ok()) return s;
  }
  if (probed.format == ImageFormat::kBmp) {
    if (absl::Status s = CheckBmpPalette(file, field); !s.ok()) return s;
  }
  const std::optional<std::vector<uint8_t>> bmp =
      probed.format == ImageFormat::kBmp ? BmpForStb(file) : std::nullopt;
  const std::span<const uint8_t> bytes = bmp ? std::span<const uint8_t>(*bmp) : file;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = int(std::min<size_t>(bytes.size(), INT_MAX));
  // stb_image leaves a 16-bit PNM's samples big-endian, and would convert its channels on them as
  // they are (the luma of byte-swapped values): such a file decodes at its own channels, and its
  // samples are swapped, then converted by the same rules here.
  const bool pnm16 = pnm != 0 && desc.type == gpu::SampleType::kUint16;
  const int decoded_channels = pnm16 ? desc.channels : channels;
  int w = 0, h = 0, comp = 0;
  void* pixels = nullptr;
  switch (desc.type) {
    case gpu::SampleType::kFloat32:
      pixels = stbi_loadf_from_memory(data, len, &w, &h, &comp, channels);
      break;
    case gpu::SampleType::kUint16:
      pixels = stbi_load_16_from_memory(data, len, &w, &h, &comp, decoded_channels);
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
  const size_t row = RowBytes(desc, decoded_channels);
  std::vector<uint8_t> swapped(pnm16 && channels != decoded_channels ? row : 0);
  for (size_t y = 0; y < size_t(h); ++y) {
    const uint8_t* from = static_cast<const uint8_t*>(pixels) + y * row;
    uint8_t* to = out.data() + y * row_stride;
    if (!pnm16) {
      std::memcpy(to, from, row);
      continue;
    }
    uint8_t* little = swapped.empty() ? to : swapped.data();
    for (size_t i = 0; i + 1 < row; i += 2) {
      little[i] = from[i + 1];
      little[i + 1] = from[i];
    }
    if (!swapped.empty()) {
      ConvertRow(desc.type, little, decoded_channels, to, channels, size_t(w));
    }
  }
  return absl::OkStatus();
}

}  // namespace glimpse::server::ingest
