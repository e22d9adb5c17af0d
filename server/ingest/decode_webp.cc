// Decoding WebP with libwebp (server/ingest/decode.h dispatches here by the file's signature).
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
#include "server/ingest/decoders.h"

namespace glimpse::server::ingest {

namespace {

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

}  // namespace

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

}  // namespace glimpse::server::ingest
