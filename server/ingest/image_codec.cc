#include "server/ingest/image_codec.h"

#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "glimpse/v1/image_analytics.pb.h"

namespace glimpse::server {

absl::StatusOr<gpu::ImageDesc> ProbeEncoded(std::span<const uint8_t> file, std::string_view field) {
  absl::StatusOr<ingest::Probed> probed = ingest::Probe(file, field);
  if (!probed.ok()) return probed.status();
  return probed->desc;
}

absl::Status CheckDesiredChannels(uint32_t desired_channels, std::string_view field) {
  if (desired_channels <= 4) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(field, " must be 0 (the file's own channels) to 4, got ", desired_channels));
}

absl::StatusOr<ingest::Orientation> OrientationFrom(int orientation, std::string_view field) {
  switch (orientation) {
    case v1::ORIENTATION_UNSPECIFIED:
    case v1::ORIENTATION_FROM_FILE:
      return ingest::Orientation::kFromFile;
    case v1::ORIENTATION_AS_STORED:
      return ingest::Orientation::kAsStored;
    default:
      return absl::InvalidArgumentError(StrCat(field, " must be ORIENTATION_FROM_FILE (1) or ",
                                               "ORIENTATION_AS_STORED (2), got ", orientation));
  }
}

absl::StatusOr<gpu::HostImage> DecodeEncoded(std::span<const uint8_t> file, int desired_channels,
                                             uint64_t max_pixels, std::string_view field,
                                             ingest::ImageFormat* format,
                                             ingest::Orientation orientation) {
  absl::StatusOr<DecodedImage> decoded = DecodeEncodedFor(
      gpu::DeviceLimits{}, file, desired_channels, max_pixels, field, format, nullptr, orientation);
  if (!decoded.ok()) return decoded.status();
  return std::move(decoded->host);
}

bool WorthStaging(size_t bytes) { return bytes > kStagingMinBytes; }

gpu::StagingBlock ReserveStaged(gpu::StagingArena* staging, const gpu::DeviceLimits& device,
                                const gpu::ImageDesc& desc, gpu::StagedRows* rows) {
  *rows = gpu::StagedRowsFor(device, desc);
  if (staging == nullptr || !WorthStaging(rows->bytes(desc))) return {};
  return staging->Reserve(rows->bytes(desc));
}

absl::StatusOr<DecodedImage> DecodeEncodedFor(const gpu::DeviceLimits& device,
                                              std::span<const uint8_t> file, int desired_channels,
                                              uint64_t max_pixels, std::string_view field,
                                              ingest::ImageFormat* format,
                                              gpu::StagingArena* staging,
                                              ingest::Orientation orientation) {
  if (desired_channels < 0) return CheckDesiredChannels(UINT32_MAX, "desired_channels");
  if (absl::Status s = CheckDesiredChannels(uint32_t(desired_channels), "desired_channels");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<ingest::Probed> probed = ingest::Probe(file, field, orientation);
  if (!probed.ok()) return probed.status();
  if (format != nullptr) *format = probed->format;
  const gpu::ImageDesc& desc = probed->desc;
  if (uint64_t(desc.pixels()) > max_pixels) {
    return absl::ResourceExhaustedError(
        StrCat(field, " is ", desc.width, "x", desc.height, " = ", desc.pixels(),
               " pixels, over the server's limit of ", max_pixels, " (--max-image-pixels)"));
  }
  DecodedImage out;
  out.host.desc = desc;
  if (desired_channels != 0) out.host.desc.channels = desired_channels;
  const gpu::ImageDesc& d = out.host.desc;
  if (gpu::StagingBlock block = ReserveStaged(staging, device, d, &out.staged_rows)) {
    const gpu::StagedRows& layout = out.staged_rows;
    if (absl::Status s = ingest::DecodeInto(file, *probed, layout.channels, block.bytes(),
                                            layout.row_stride, field);
        !s.ok()) {
      return s;
    }
    gpu::ClearRowPadding(layout, d, block.bytes());
    out.staged = std::move(block);
    return out;
  }
  if (device.plain_uploads && d.channels == 3) {
    // Straight into the device's four-channel rows: a 3-channel decode's own channel conversion
    // to four (opaque alpha), with no 3-channel copy to widen afterwards.
    gpu::ImageDesc four = d;
    four.channels = 4;
    out.widened.resize(gpu::WidenedBytes(d));
    if (absl::Status s = ingest::DecodeInto(file, *probed, 4, out.widened, four.row_bytes(), field);
        !s.ok()) {
      return s;
    }
    return out;
  }
  out.host.data.resize(d.bytes());
  if (absl::Status s =
          ingest::DecodeInto(file, *probed, d.channels, out.host.data, d.row_bytes(), field);
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace glimpse::server
