// The encoded-image path of uploads and inline images: the header probe, the --max-image-pixels
// check before decoding, the decode, and (for small uint8 results) a PNG round trip.
// Input: one byte whose value mod 5 is desired_channels, then the file.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gpu/str.h"
#include "server/image_codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace glimpse::fuzz {
namespace {

// Large enough for every header path, small enough that a decode stays within milliseconds.
constexpr uint64_t kMaxPixels = uint64_t{1} << 20;

void Run(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int desired = data[0] % 5;
  const std::span<const uint8_t> file(data + 1, size - 1);

  absl::StatusOr<gpu::ImageDesc> probed = server::ProbeEncoded(file, "file");
  CheckRefusal(probed.status());
  absl::StatusOr<gpu::HostImage> image = server::DecodeEncoded(file, desired, kMaxPixels, "file");
  CheckRefusal(image.status());
  if (!image.ok()) return;
  Check(probed.ok(), "decoded a file whose header probe failed");
  const gpu::ImageDesc& d = image->desc;
  Check(d.width == probed->width && d.height == probed->height && d.type == probed->type,
        StrCat("decoded ", gpu::DescribeImage(d), ", probed ", gpu::DescribeImage(*probed)));
  Check(uint64_t(d.pixels()) <= kMaxPixels, StrCat("decoded ", d.pixels(), " pixels"));
  Check(d.channels == (desired != 0 ? desired : probed->channels),
        StrCat("decoded ", d.channels, " channels, asked ", desired));
  Check(image->data.size() == d.bytes(), StrCat(image->data.size(), " bytes for ", d.bytes()));

  if (d.type != gpu::SampleType::kUint8 || d.pixels() > 4096) return;
  absl::StatusOr<std::string> png = server::EncodePng(*image);
  Check(png.ok(), StrCat("EncodePng: ", png.status().ToString()));
  absl::StatusOr<gpu::HostImage> again = server::DecodeEncoded(
      std::span(reinterpret_cast<const uint8_t*>(png->data()), png->size()), 0, kMaxPixels, "png");
  Check(again.ok() && again->desc == d && again->data == image->data,
        StrCat("PNG round trip of ", gpu::DescribeImage(d), " differs"));
}

}  // namespace
}  // namespace glimpse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  glimpse::fuzz::Run(data, size);
  return 0;
}
