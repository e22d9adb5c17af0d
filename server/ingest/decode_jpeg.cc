// Decoding JPEG with libjpeg-turbo's TurboJPEG API (server/ingest/decode.h dispatches here by the
// file's signature).
#include <turbojpeg.h>

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

// A TurboJPEG decompressor for one read of one file. A handle keeps the Huffman and quantization
// tables of the files it has read (libjpeg keeps them for abbreviated streams, which leave them
// out), so a handle kept for the next file would decode one that lacks a table, or whose table
// is bad, with an earlier file's: another caller's. Each read takes a fresh handle, which costs a
// fraction of a microsecond (libjpeg allocates as it reads; the same decode times either way).
using TurboJpeg = std::unique_ptr<void, int (*)(tjhandle)>;

absl::StatusOr<TurboJpeg> NewDecompressor() {
  TurboJpeg tj(tjInitDecompress(), &tjDestroy);
  if (tj == nullptr) {
    return absl::InternalError(
        StrCat("TurboJPEG could not make a decompressor: ", tjGetErrorStr2(nullptr)));
  }
  return tj;
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

}  // namespace

absl::StatusOr<Probed> ProbeJpeg(std::span<const uint8_t> file, std::string_view field) {
  absl::StatusOr<TurboJpeg> tj = NewDecompressor();
  if (!tj.ok()) return tj.status();
  absl::StatusOr<JpegHeader> h = ReadJpegHeader(tj->get(), file.subspan(JpegStart(file)), field);
  if (!h.ok()) return h.status();
  // CMYK and YCCK files decode to RGB, as stb_image did.
  return Probed{ImageFormat::kJpeg,
                {h->width, h->height, h->colorspace == TJCS_GRAY ? 1 : 3, gpu::SampleType::kUint8}};
}

namespace {

// stb_image's x * y / 255, rounded, for Adobe's inverted CMYK.
uint8_t Blinn(uint8_t x, uint8_t y) {
  const unsigned t = unsigned{x} * y + 128;
  return uint8_t((t + (t >> 8)) >> 8);
}

}  // namespace

absl::Status DecodeJpeg(std::span<const uint8_t> file, const Probed& probed, int channels,
                        std::span<uint8_t> out, size_t row_stride, std::string_view field) {
  absl::StatusOr<TurboJpeg> header_tj = NewDecompressor();
  if (!header_tj.ok()) return header_tj.status();
  const std::span<const uint8_t> jpeg = file.subspan(JpegStart(file));
  absl::StatusOr<JpegHeader> h = ReadJpegHeader(header_tj->get(), jpeg, field);
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
  absl::Status error;  // the last read's, if it failed
  bool warning = false;
  auto failed = [&] { return error; };
  // One read of the whole file with a fresh handle; on failure, `error` and `warning` say why.
  auto read = [&](uint8_t* dst, int pitch, int pixel_format) {
    absl::StatusOr<TurboJpeg> tj = NewDecompressor();
    if (!tj.ok()) {
      error = tj.status();
      warning = false;
      return false;
    }
    if (tjDecompress2(tj->get(), jpeg.data(), jpeg.size(), dst, w, pitch, rows, pixel_format,
                      flags) == 0) {
      return true;
    }
    error = Corrupt(field, ImageFormat::kJpeg, tjGetErrorStr2(tj->get()));
    warning = tjGetErrorCode(tj->get()) == TJERR_WARNING &&
              error.message().find("extraneous bytes before marker") != std::string_view::npos;
    return false;
  };
  auto decode = [&](uint8_t* dst, int pitch, int pixel_format) {
    if (read(dst, pitch, pixel_format)) return true;
    if (!warning) return false;  // stray bytes are the only warning let through
    flags &= ~TJFLAG_STOPONWARNING;
    return read(dst, pitch, pixel_format) || warning;
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

}  // namespace glimpse::server::ingest
