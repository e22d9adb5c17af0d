#include "server/image_codec.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gpu/str.h"

// Functions private to this file: the client or a test may bring its own stb copy.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace glimpse::server {
namespace {

constexpr std::string_view kFormats = "PNG, JPEG, BMP, TGA, GIF, PNM, HDR or PSD";

// The header of a binary PNM file (P5 grey, P6 RGB), tokenized as stb_image 2.27 reads it.
struct PnmHeader {
  // The numbers read (width, height, maxval) before the first missing one, as written.
  std::array<std::string_view, 3> numbers;
  int count = 0;
  // Where the samples start when all three were read, else 0. stb_image 2.27 neither notices a
  // truncated PNM nor swaps 16-bit PNM samples from their big-endian order, and converts their
  // channels as if they were 8-bit: DecodeEncoded makes up for all three with this.
  size_t data_offset = 0;
};

PnmHeader ReadPnmHeader(std::span<const uint8_t> f) {
  PnmHeader h;
  if (f.size() < 3 || f[0] != 'P' || (f[1] != '5' && f[1] != '6')) return h;
  size_t i = 2;
  for (; h.count < 3; ++h.count) {
    while (i < f.size() && (std::isspace(f[i]) || f[i] == '#')) {
      if (f[i] == '#') {
        while (i < f.size() && f[i] != '\n' && f[i] != '\r') ++i;
      } else {
        ++i;
      }
    }
    if (i >= f.size() || !std::isdigit(f[i])) return h;
    const size_t start = i;
    while (i < f.size() && std::isdigit(f[i])) ++i;
    h.numbers[size_t(h.count)] =
        std::string_view(reinterpret_cast<const char*>(&f[start]), i - start);
  }
  h.data_offset = i + 1;  // one whitespace character ends the header
  return h;
}

// stb_image parses the header's numbers into an int without a bound (signed overflow, undefined
// behaviour, on 10 digits and more): numbers past INT_MAX are refused before stb_image sees them.
absl::Status CheckPnmNumbers(const PnmHeader& h, std::string_view field) {
  constexpr std::array<std::string_view, 3> kNames = {"width", "height", "maxval"};
  for (int n = 0; n < h.count; ++n) {
    std::string_view digits = h.numbers[size_t(n)];
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    const std::string_view int_max = "2147483647";
    if (digits.size() > int_max.size() || (digits.size() == int_max.size() && digits > int_max)) {
      const bool cut = digits.size() > 24;
      return absl::InvalidArgumentError(StrCat(
          field, " is a PNM file whose header's ", kNames[size_t(n)], " is ", digits.substr(0, 24),
          cut ? "..." : "", ", over the largest a header may state, ", int_max));
    }
  }
  return absl::OkStatus();
}

// What stb_image 2.27 is given to decode a PNG file: nullopt to decode the file in place, or a
// copy without its empty IDAT chunks. An empty IDAT is valid PNG (the image data is all IDATs'
// data joined), but stb_image reads one that comes first into a null buffer, memcpy(nullptr, p, 0):
// undefined behaviour that lets the compiler drop its later null check of that buffer. A chunk
// whose stated length runs past the end of the file is refused: stb_image grows its buffer to an
// IDAT's stated length before reading it, so a 100-byte file would allocate gigabytes.
absl::StatusOr<std::optional<std::string>> PngForStb(std::span<const uint8_t> f,
                                                     std::string_view field) {
  constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (f.size() < 8 || std::memcmp(f.data(), kSignature, 8) != 0) return std::nullopt;
  // The chunks up to IEND (stb_image reads no further): [start, end) each, CRC included.
  std::vector<std::pair<size_t, size_t>> chunks;
  bool empty_idat = false;
  for (size_t at = 8; f.size() - at >= 8;) {
    const uint64_t length = uint64_t{f[at]} << 24 | uint64_t{f[at + 1]} << 16 |
                            uint64_t{f[at + 2]} << 8 | uint64_t{f[at + 3]};
    const std::string_view type(reinterpret_cast<const char*>(&f[at + 4]), 4);
    if (f.size() - at < 12 || length > f.size() - at - 12) {
      return absl::InvalidArgumentError(
          StrCat(field, " is a truncated or corrupt PNG file: a chunk at byte ", at, " states ",
                 length, " bytes of data, past the file's end (", f.size(), " bytes)"));
    }
    chunks.emplace_back(at, at + 12 + size_t(length));
    empty_idat = empty_idat || (length == 0 && type == "IDAT");
    if (type == "IEND") break;
    at += 12 + size_t(length);
  }
  if (!empty_idat) return std::nullopt;
  std::string out(reinterpret_cast<const char*>(f.data()), 8);
  for (const auto& [start, end] : chunks) {
    if (end - start == 12 && std::memcmp(&f[start + 4], "IDAT", 4) == 0) continue;
    out.append(reinterpret_cast<const char*>(&f[start]), end - start);
  }
  return out;
}

// stb_image 2.27 builds a JPEG Huffman table into arrays of 256 codes without checking that the
// table's 16 code counts add up to no more than that: such a table (corrupt by the JPEG spec,
// ITU T.81 B.2.4.2) is refused before stb_image reads the file. Every DHT segment is found the way
// a decoder finds it: marker segments by their lengths, and entropy-coded data after SOS up to
// the next 0xFF that is neither byte stuffing (0xFF00) nor a restart marker.
absl::Status CheckJpegHuffmanTables(std::span<const uint8_t> f, std::string_view field) {
  // Like markers, SOI may follow any number of 0xFF fill bytes.
  size_t pos = 0;
  while (pos < f.size() && f[pos] == 0xFF) ++pos;
  if (pos == 0 || pos >= f.size() || f[pos] != 0xD8) return absl::OkStatus();
  ++pos;
  auto byte = [&](size_t i) -> size_t { return i < f.size() ? f[i] : 0; };
  while (pos < f.size()) {
    if (f[pos] != 0xFF) {
      ++pos;
      continue;
    }
    while (pos < f.size() && f[pos] == 0xFF) ++pos;
    if (pos >= f.size()) break;
    const uint8_t m = f[pos++];
    if (m == 0xD9) break;                                                           // EOI
    if (m == 0x00 || m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length
    const size_t length = byte(pos) << 8 | byte(pos + 1);
    if (m == 0xC4) {  // DHT: tables while its length lasts, as stb_image reads them
      int64_t left = int64_t(length) - 2;
      for (size_t t = pos + 2; left > 0;) {
        size_t codes = 0;
        for (size_t i = 1; i <= 16; ++i) codes += byte(t + i);
        if (codes > 256) {
          return absl::InvalidArgumentError(
              StrCat(field, " is a corrupt JPEG file: the Huffman table at byte ", t, " has ",
                     codes, " codes, more than 256"));
        }
        t += 17 + codes;
        left -= int64_t(17 + codes);
      }
    }
    pos += std::max<size_t>(length, 2);
    if (m == 0xDA) {  // SOS: skip the entropy-coded data
      while (pos + 1 < f.size() &&
             !(f[pos] == 0xFF && f[pos + 1] != 0 && (f[pos + 1] < 0xD0 || f[pos + 1] > 0xD7))) {
        ++pos;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<gpu::ImageDesc> ProbeEncoded(std::span<const uint8_t> file, std::string_view field) {
  if (file.empty()) {
    return absl::InvalidArgumentError(StrCat(field, " is empty: no image file was sent"));
  }
  if (file.size() > size_t(INT_MAX)) {
    return absl::InvalidArgumentError(
        StrCat(field, " is ", file.size(), " bytes; encoded files must be under 2 GiB"));
  }
  if (absl::Status s = CheckPnmNumbers(ReadPnmHeader(file), field); !s.ok()) return s;
  if (absl::Status s = CheckJpegHuffmanTables(file, field); !s.ok()) return s;
  const auto* data = reinterpret_cast<const stbi_uc*>(file.data());
  const int len = int(file.size());
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(data, len, &w, &h, &comp)) {
    return absl::InvalidArgumentError(StrCat(field, " (", file.size(),
                                             " bytes) is not an image file that can be read (",
                                             kFormats, "): ", stbi_failure_reason()));
  }
  gpu::ImageDesc desc{.width = w, .height = h, .channels = comp, .type = gpu::SampleType::kUint8};
  if (stbi_is_hdr_from_memory(data, len)) {
    desc.type = gpu::SampleType::kFloat32;
  } else if (stbi_is_16_bit_from_memory(data, len)) {
    desc.type = gpu::SampleType::kUint16;
  }
  if (w <= 0 || h <= 0) {
    return absl::InvalidArgumentError(StrCat(field, " has zero size (", w, "x", h, ")"));
  }
  return desc;
}

absl::StatusOr<gpu::HostImage> DecodeEncoded(std::span<const uint8_t> file, int desired_channels,
                                             uint64_t max_pixels, std::string_view field) {
  if (desired_channels < 0 || desired_channels > 4) {
    return absl::InvalidArgumentError(
        StrCat("desired_channels must be in [0, 4], got ", desired_channels));
  }
  absl::StatusOr<gpu::ImageDesc> probed = ProbeEncoded(file, field);
  if (!probed.ok()) return probed.status();
  gpu::ImageDesc desc = *probed;
  if (uint64_t(desc.pixels()) > max_pixels) {
    return absl::ResourceExhaustedError(
        StrCat(field, " is ", desc.width, "x", desc.height, " = ", desc.pixels(),
               " pixels, over the server's limit of ", max_pixels, " (--max-image-pixels)"));
  }
  if (desired_channels != 0) desc.channels = desired_channels;

  const size_t pnm = ReadPnmHeader(file).data_offset;
  if (pnm != 0) {
    const size_t needed = size_t(desc.pixels()) * probed->channels * gpu::BytesPerSample(desc.type);
    if (file.size() < pnm || file.size() - pnm < needed) {
      return absl::InvalidArgumentError(StrCat(
          field, " is a truncated PNM file: its header (", gpu::DescribeImage(*probed), ") needs ",
          needed, " bytes of samples, it has ", file.size() < pnm ? 0 : file.size() - pnm));
    }
    if (desc.type == gpu::SampleType::kUint16 && desc.channels != probed->channels) {
      return absl::InvalidArgumentError(
          StrCat("desired_channels ", desired_channels, " cannot be applied to a 16-bit PNM file (",
                 probed->channels, " channels); send 0 to keep them"));
    }
  }
  const absl::StatusOr<std::optional<std::string>> prepared = PngForStb(file, field);
  if (!prepared.ok()) return prepared.status();
  const std::optional<std::string>& png = *prepared;
  const std::span<const uint8_t> bytes =
      png ? std::span(reinterpret_cast<const uint8_t*>(png->data()), png->size()) : file;
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = int(bytes.size());
  int w = 0, h = 0, comp = 0;
  void* pixels = nullptr;
  switch (desc.type) {
    case gpu::SampleType::kFloat32:
      pixels = stbi_loadf_from_memory(data, len, &w, &h, &comp, desc.channels);
      break;
    case gpu::SampleType::kUint16:
      pixels = stbi_load_16_from_memory(data, len, &w, &h, &comp, desc.channels);
      break;
    case gpu::SampleType::kUint8:
      pixels = stbi_load_from_memory(data, len, &w, &h, &comp, desc.channels);
      break;
  }
  if (pixels == nullptr) {
    return absl::InvalidArgumentError(StrCat(field, " could not be decoded (corrupt or truncated ",
                                             "file?): ", stbi_failure_reason()));
  }
  gpu::HostImage host;
  if (w != desc.width || h != desc.height) {
    stbi_image_free(pixels);
    return absl::InvalidArgumentError(StrCat(field, " decoded to ", w, "x", h,
                                             ", which disagrees with its header's ", desc.width,
                                             "x", desc.height));
  }
  host.desc = desc;
  host.data.resize(desc.bytes());
  std::memcpy(host.data.data(), pixels, desc.bytes());
  stbi_image_free(pixels);
  if (pnm != 0 && desc.type == gpu::SampleType::kUint16) {
    for (size_t i = 0; i + 1 < host.data.size(); i += 2) std::swap(host.data[i], host.data[i + 1]);
  }
  return host;
}

absl::StatusOr<std::string> EncodePng(const gpu::HostImage& image) {
  const gpu::ImageDesc& d = image.desc;
  if (d.type != gpu::SampleType::kUint8) {
    return absl::InvalidArgumentError(StrCat("encoding PNG needs a uint8 image, got ",
                                             gpu::DescribeImage(d), "; ask for RAW pixels"));
  }
  std::string out;
  auto write = [](void* context, void* bytes, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(bytes), size_t(size));
  };
  if (!stbi_write_png_to_func(write, &out, d.width, d.height, d.channels, image.data.data(),
                              int(d.row_bytes()))) {
    return absl::InternalError(
        StrCat("PNG encoding of a ", gpu::DescribeImage(d), " image failed"));
  }
  return out;
}

}  // namespace glimpse::server
