// Encoded image files <-> host pixels, on the host, never on the GPU thread: decoding by
// server/ingest/decode.h (which says which library reads which format), PNG encoding by
// server/ingest/encode_png.cc (libdeflate). Sizes are checked from the file's header before
// anything is decoded.
//
//   absl::StatusOr<gpu::ImageDesc> desc = ProbeEncoded(file, "image.encoded.data");  // header only
//   if (!desc.ok()) return desc.status();
//   absl::StatusOr<gpu::HostImage> host =
//       DecodeEncoded(file, /*desired_channels=*/0, limits.max_image_pixels, "image.encoded.data");
//   if (!host.ok()) return host.status();
//   absl::StatusOr<std::string> png = EncodePng(*host);  // uint8 and uint16 images
//   if (!png.ok()) return png.status();
#ifndef GLIMPSE_SERVER_INGEST_IMAGE_CODEC_H_
#define GLIMPSE_SERVER_INGEST_IMAGE_CODEC_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/image.h"
#include "server/ingest/decode.h"

namespace glimpse::server {

// What the file's header says: size, channels stored, and the sample type it decodes to
// (16-bit PNG/PNM: uint16, HDR: float32, else uint8). `field` names the request field in errors.
absl::StatusOr<gpu::ImageDesc> ProbeEncoded(std::span<const uint8_t> file, std::string_view field);

// The one rule for an EncodedImage's desired_channels: 0 (the file's own) to 4. `field` names it
// in the error ("image.encoded.desired_channels").
absl::Status CheckDesiredChannels(uint32_t desired_channels, std::string_view field);

// The one rule for an EncodedImage's or EncodedUpload's orientation: UNSPECIFIED is FROM_FILE;
// another value is refused (INVALID_ARGUMENT naming `field`, "image.encoded.orientation").
absl::StatusOr<ingest::Orientation> OrientationFrom(int orientation, std::string_view field);

// Decodes the file. desired_channels 0 keeps the file's channels (CheckDesiredChannels). Checks the
// header against max_pixels (RESOURCE_EXHAUSTED naming --max-image-pixels) before decoding.
// `format`, if not null, is set to the file's format once its header has been read.
absl::StatusOr<gpu::HostImage> DecodeEncoded(
    std::span<const uint8_t> file, int desired_channels, uint64_t max_pixels,
    std::string_view field, ingest::ImageFormat* format = nullptr,
    ingest::Orientation orientation = ingest::Orientation::kFromFile);

// A file decoded for an upload to `device`: as DecodeEncoded, except where the device takes
// 3-channel images as rows widened to four channels (DeviceLimits::plain_uploads, see
// gpu::WidenForUpload): an image of 3 channels is then decoded straight into such rows, held in
// `widened` (the fourth lane opaque alpha, never read), and host.data stays empty. Elsewhere
// `widened` stays empty. Given `staging`, an image worth staging (WorthStaging) is decoded
// straight into a block of it, laid out as the device's upload takes it (`staged`, `staged_rows`:
// gpu::StagedRowsFor), host.data and `widened` then empty; where no block is free, as without.
struct DecodedImage {
  gpu::HostImage host;
  std::vector<uint8_t> widened;
  gpu::StagingBlock staged;
  gpu::StagedRows staged_rows;
};
absl::StatusOr<DecodedImage> DecodeEncodedFor(
    const gpu::DeviceLimits& device, std::span<const uint8_t> file, int desired_channels,
    uint64_t max_pixels, std::string_view field, ingest::ImageFormat* format = nullptr,
    gpu::StagingArena* staging = nullptr,
    ingest::Orientation orientation = ingest::Orientation::kFromFile);

// Whether an image's rows of `bytes` go to staging memory when there is some: those of over
// kStagingMinBytes, which then reach the device through one copy (a GPU reads staging memory by
// DMA while the GL thread goes on) into pages that stay mapped. Smaller ones come from memory
// the host allocator keeps, and stay free to be packed several to a GPU job (AnalyzeBatch's
// histogram packs take host rows only).
inline constexpr size_t kStagingMinBytes = size_t{1} << 20;
bool WorthStaging(size_t bytes);
// A block of `staging` (may be null) for `desc`'s rows laid out for `device` (gpu::StagedRowsFor,
// set in `*rows`), where they are worth staging and a block is free; else an empty block.
gpu::StagingBlock ReserveStaged(gpu::StagingArena* staging, const gpu::DeviceLimits& device,
                                const gpu::ImageDesc& desc, gpu::StagedRows* rows);

// A PNG file of a uint8 or uint16 image (1-4 channels: grey, grey + alpha, RGB, RGBA; 8- or
// 16-bit samples), each row filtered adaptively, deflated with libdeflate. float32 images are
// refused (INVALID_ARGUMENT): PNG holds no floats.
absl::StatusOr<std::string> EncodePng(const gpu::HostImage& image);
// The most bytes EncodePng writes for an image so described.
uint64_t PngBytesBound(const gpu::ImageDesc& desc);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_INGEST_IMAGE_CODEC_H_
